// The npu glu kernels' own tests (issue 19) beside the shared conformance grids.
