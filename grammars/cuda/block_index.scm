; Block-index and grid-size reads, CUDA spelling: blockIdx.x, ::blockIdx.y, gridDim.z.
(field_expression
  argument: [(identifier) (qualified_identifier)] @object
  field: (field_identifier) @axis
  (#match? @object "^(::)?(blockIdx|gridDim)$")) @use

; The whole block index, e.g. `dim3 b = blockIdx;` (fields are matched above).
((identifier) @whole
  (#eq? @whole "blockIdx"))
