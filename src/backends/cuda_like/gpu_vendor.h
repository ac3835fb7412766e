// The one vendor header: the cuda backend's sources call gpu* names, which map to the CUDA
// runtime here and to HIP in a HIP build (which still registers as backend "cuda").
#pragma once

#if defined(OPREG_USE_HIP)
#include <hip/hip_runtime_api.h>
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuDeviceProp = hipDeviceProp_t;
inline constexpr gpuError_t gpuSuccess = hipSuccess;
inline constexpr auto gpuMemcpyDefault = hipMemcpyDefault;
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuGetErrorString hipGetErrorString
#define gpuSetDevice hipSetDevice
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuRuntimeGetVersion hipRuntimeGetVersion
#define gpuDriverGetVersion hipDriverGetVersion
#define OPREG_GPU_RUNTIME "HIP"
#define OPREG_GPU_DLPACK_DEVICE 10  // kDLROCM
#else
#include <cuda_runtime_api.h>
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuDeviceProp = cudaDeviceProp;
inline constexpr gpuError_t gpuSuccess = cudaSuccess;
inline constexpr auto gpuMemcpyDefault = cudaMemcpyDefault;
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuGetErrorString cudaGetErrorString
#define gpuSetDevice cudaSetDevice
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuRuntimeGetVersion cudaRuntimeGetVersion
#define gpuDriverGetVersion cudaDriverGetVersion
#define OPREG_GPU_RUNTIME "CUDA"
#define OPREG_GPU_DLPACK_DEVICE 2  // kDLCUDA
#endif
