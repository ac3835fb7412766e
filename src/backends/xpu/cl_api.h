// The OpenCL entry points the xpu backend calls, loaded from the ICD loader (libOpenCL.so.1) at
// the backend's first use rather than linked: libopreg then has no NEEDED entry for OpenCL, a
// machine without the loader still loads libopreg (and `import opreg`), and the xpu backend
// reports itself unavailable with dlopen's reason. Every use of a listed cl* function in a file
// that includes this header goes through the loaded table (the macros at the end).
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <string>

// The functions used, X(name); adding a call to another cl* function adds it here and below.
#define OPREG_CL_FUNCTIONS(X)                                                                          \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext)     \
  X(clReleaseContext) X(clCreateCommandQueueWithProperties)                    \
  X(clReleaseCommandQueue) X(clFinish) X(clCreateProgramWithSource) X(clBuildProgram)                  \
  X(clGetProgramBuildInfo) X(clReleaseProgram) X(clCreateKernelsInProgram) X(clGetKernelInfo)          \
  X(clGetKernelArgInfo) X(clGetKernelWorkGroupInfo) X(clReleaseKernel) X(clSetKernelArg)               \
  X(clSetKernelArgSVMPointer) X(clEnqueueNDRangeKernel) X(clSVMAlloc) X(clSVMFree)                     \
  X(clEnqueueSVMMemcpy) X(clEnqueueSVMMemFill)

namespace opreg::xpu {

struct ClApi {
#define OPREG_CL_MEMBER_(name) decltype(&::name) name = nullptr;
  OPREG_CL_FUNCTIONS(OPREG_CL_MEMBER_)
#undef OPREG_CL_MEMBER_
};

// The table, loaded once (thread-safe); nullptr when the loader or one of its functions is
// missing, with the reason in *why ("libOpenCL.so.1: cannot open shared object file ...").
const ClApi* load_cl_api(std::string* why = nullptr);
// The loaded table; throws opreg::Error (device) with the reason when it could not be loaded
// (only reached after discovery listed a device, so in practice never).
const ClApi& cl_api();

}  // namespace opreg::xpu

#define clGetPlatformIDs(...) (::opreg::xpu::cl_api().clGetPlatformIDs(__VA_ARGS__))
#define clGetPlatformInfo(...) (::opreg::xpu::cl_api().clGetPlatformInfo(__VA_ARGS__))
#define clGetDeviceIDs(...) (::opreg::xpu::cl_api().clGetDeviceIDs(__VA_ARGS__))
#define clGetDeviceInfo(...) (::opreg::xpu::cl_api().clGetDeviceInfo(__VA_ARGS__))
#define clCreateContext(...) (::opreg::xpu::cl_api().clCreateContext(__VA_ARGS__))
#define clReleaseContext(...) (::opreg::xpu::cl_api().clReleaseContext(__VA_ARGS__))
#define clCreateCommandQueueWithProperties(...) \
  (::opreg::xpu::cl_api().clCreateCommandQueueWithProperties(__VA_ARGS__))
#define clReleaseCommandQueue(...) (::opreg::xpu::cl_api().clReleaseCommandQueue(__VA_ARGS__))
#define clFinish(...) (::opreg::xpu::cl_api().clFinish(__VA_ARGS__))
#define clCreateProgramWithSource(...) (::opreg::xpu::cl_api().clCreateProgramWithSource(__VA_ARGS__))
#define clBuildProgram(...) (::opreg::xpu::cl_api().clBuildProgram(__VA_ARGS__))
#define clGetProgramBuildInfo(...) (::opreg::xpu::cl_api().clGetProgramBuildInfo(__VA_ARGS__))
#define clReleaseProgram(...) (::opreg::xpu::cl_api().clReleaseProgram(__VA_ARGS__))
#define clCreateKernelsInProgram(...) (::opreg::xpu::cl_api().clCreateKernelsInProgram(__VA_ARGS__))
#define clGetKernelInfo(...) (::opreg::xpu::cl_api().clGetKernelInfo(__VA_ARGS__))
#define clGetKernelArgInfo(...) (::opreg::xpu::cl_api().clGetKernelArgInfo(__VA_ARGS__))
#define clGetKernelWorkGroupInfo(...) (::opreg::xpu::cl_api().clGetKernelWorkGroupInfo(__VA_ARGS__))
#define clReleaseKernel(...) (::opreg::xpu::cl_api().clReleaseKernel(__VA_ARGS__))
#define clSetKernelArg(...) (::opreg::xpu::cl_api().clSetKernelArg(__VA_ARGS__))
#define clSetKernelArgSVMPointer(...) (::opreg::xpu::cl_api().clSetKernelArgSVMPointer(__VA_ARGS__))
#define clEnqueueNDRangeKernel(...) (::opreg::xpu::cl_api().clEnqueueNDRangeKernel(__VA_ARGS__))
#define clSVMAlloc(...) (::opreg::xpu::cl_api().clSVMAlloc(__VA_ARGS__))
#define clSVMFree(...) (::opreg::xpu::cl_api().clSVMFree(__VA_ARGS__))
#define clEnqueueSVMMemcpy(...) (::opreg::xpu::cl_api().clEnqueueSVMMemcpy(__VA_ARGS__))
#define clEnqueueSVMMemFill(...) (::opreg::xpu::cl_api().clEnqueueSVMMemFill(__VA_ARGS__))
