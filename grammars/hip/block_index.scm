; HIP's own spelling of block-index and grid-size reads: hipBlockIdx_x, hipGridDim_y.
((identifier) @use
  (#match? @use "^hip(BlockIdx|GridDim)_[xyz]$"))
