; kernel<<<grid, block, shmem, stream>>>(args)
(call_expression
  function: (_) @kernel
  (kernel_call_syntax) @config
  arguments: (argument_list) @args) @launch

; cudaLaunchKernel(func, grid, block, args, shmem, stream) and its cooperative form.
(call_expression
  function: [(identifier) (qualified_identifier)] @api
  arguments: (argument_list) @args
  (#match? @api "(^|::)cudaLaunch(Cooperative)?Kernel$")) @launch
