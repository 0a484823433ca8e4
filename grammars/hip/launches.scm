; hipLaunchKernelGGL(kernel, grid, block, shmem, stream, args...), hipLaunchKernel, hipLaunchCooperativeKernel.
(call_expression
  function: (identifier) @api
  arguments: (argument_list) @args
  (#match? @api "^hipLaunch(KernelGGL|Kernel|CooperativeKernel)$")) @launch
