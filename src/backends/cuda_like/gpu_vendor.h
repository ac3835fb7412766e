// The one vendor header: the cuda backend's sources call gpu* names, which map to the CUDA
// runtime here and to HIP in a HIP build (which still registers as backend "cuda").
// Device code (.cu files) gets the 16-bit float types and their conversions from here too.
#pragma once

#if defined(OPREG_USE_HIP)
#include <hip/hip_runtime_api.h>
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuEvent_t = hipEvent_t;
using gpuDeviceProp = hipDeviceProp_t;
using gpuFuncAttribute_t = hipFuncAttribute;
inline constexpr gpuError_t gpuSuccess = hipSuccess;
inline constexpr gpuError_t gpuErrorNotSupported = hipErrorNotSupported;
inline constexpr gpuError_t gpuErrorInvalidValue = hipErrorInvalidValue;
inline constexpr auto gpuMemcpyDefault = hipMemcpyDefault;
inline constexpr auto gpuFuncAttributeMaxDynamicSharedMemorySize = hipFuncAttributeMaxDynamicSharedMemorySize;
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuGetDevice hipGetDevice
#define gpuSetDevice hipSetDevice
#define gpuMalloc hipMalloc
#define gpuMemGetInfo hipMemGetInfo
#define gpuFree hipFree
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuStreamCreate hipStreamCreate
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuEventCreate hipEventCreate
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuRuntimeGetVersion hipRuntimeGetVersion
#define gpuDriverGetVersion hipDriverGetVersion
#define OPREG_GPU_RUNTIME "HIP"
#define OPREG_GPU_DLPACK_DEVICE 10  // kDLROCM
// HIP has no thread-block clusters: the cluster variants are not built.
#define OPREG_GPU_CLUSTERS 0
// ROCm 5.2's hipDeviceProp_t has no sharedMemPerBlockOptin: a block's LDS has no opt-in beyond it.
#define gpu_smem_optin(prop) ((prop).sharedMemPerBlock)
#else
#include <cuda_runtime_api.h>
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuEvent_t = cudaEvent_t;
using gpuDeviceProp = cudaDeviceProp;
using gpuFuncAttribute_t = cudaFuncAttribute;
inline constexpr gpuError_t gpuSuccess = cudaSuccess;
inline constexpr gpuError_t gpuErrorNotSupported = cudaErrorNotSupported;
inline constexpr gpuError_t gpuErrorInvalidValue = cudaErrorInvalidValue;
inline constexpr auto gpuMemcpyDefault = cudaMemcpyDefault;
inline constexpr auto gpuFuncAttributeMaxDynamicSharedMemorySize = cudaFuncAttributeMaxDynamicSharedMemorySize;
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuGetDevice cudaGetDevice
#define gpuSetDevice cudaSetDevice
#define gpuMalloc cudaMalloc
#define gpuMemGetInfo cudaMemGetInfo
#define gpuFree cudaFree
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuStreamCreate cudaStreamCreate
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuRuntimeGetVersion cudaRuntimeGetVersion
#define gpuDriverGetVersion cudaDriverGetVersion
#define OPREG_GPU_RUNTIME "CUDA"
#define OPREG_GPU_DLPACK_DEVICE 2  // kDLCUDA
// Thread-block clusters (sm_90 and later): cudaLaunchKernelEx with a cluster dimension, and
// distributed shared memory through cooperative_groups::this_cluster().
#define OPREG_GPU_CLUSTERS 1
#define gpu_smem_optin(prop) ((prop).sharedMemPerBlockOptin)
#define gpuLaunchKernelEx cudaLaunchKernelEx
#define gpuOccupancyMaxActiveClusters cudaOccupancyMaxActiveClusters
using gpuLaunchConfig_t = cudaLaunchConfig_t;
using gpuLaunchAttribute = cudaLaunchAttribute;
inline constexpr auto gpuLaunchAttributeClusterDimension = cudaLaunchAttributeClusterDimension;
// Programmatic dependent launch (sm_90): a kernel may start while the previous one drains.
inline constexpr auto gpuLaunchAttributeProgrammaticStreamSerialization =
    cudaLaunchAttributeProgrammaticStreamSerialization;
#endif

// Clears the runtime's last error after a failed call that is reported otherwise (HIP's calls are
// [[nodiscard]]).
inline void gpu_clear_error() { (void)gpuGetLastError(); }

// ---- Device code only.
#if defined(__CUDACC__) || defined(__HIPCC__)
#if defined(OPREG_USE_HIP)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
// ROCm 5.2 (Debian bookworm's HIP) has no hip_bf16.h and no __hip_bfloat16 with its intrinsics
// (../shared/research/hip-rocm52.md): bf16 is kept as its 16-bit word, converted by elem.cuh.
struct alignas(2) gpu_bf16 {
  unsigned short bits;
};
struct alignas(4) gpu_bf16x2 {
  gpu_bf16 x, y;
};
#define OPREG_GPU_FULL_MASK 0xFFFFFFFFFFFFFFFFull
#define OPREG_GPU_WARP 64
#define gpu_shfl_xor(value, offset) __shfl_xor((value), (offset))
#define gpu_any(pred) __any(pred)
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
using gpu_bf16 = __nv_bfloat16;
using gpu_bf16x2 = __nv_bfloat162;
#define OPREG_GPU_FULL_MASK 0xFFFFFFFFu
#define OPREG_GPU_WARP 32
#define gpu_shfl_xor(value, offset) __shfl_xor_sync(OPREG_GPU_FULL_MASK, (value), (offset))
#define gpu_any(pred) __any_sync(OPREG_GPU_FULL_MASK, (pred))
#endif
#endif
