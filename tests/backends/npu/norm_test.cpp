// The npu norm kernels' own tests (issue 19) beside the shared conformance grids.
