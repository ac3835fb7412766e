// The one vendor header: the cuda backend's sources call gpu* names, which map to the CUDA
// runtime here and to HIP in a HIP build (which still registers as backend "cuda").
// Device code (.cu files) gets the 16-bit float types and their conversions from here too.
#pragma once

// Every gpu* name is the vendor's own name with "gpu" for "cuda" or "hip" (OPREG_GPU_NAME).
#if defined(OPREG_USE_HIP)
#include <hip/hip_runtime_api.h>
#define OPREG_GPU_NAME(name) hip##name
using gpuDeviceProp = hipDeviceProp_t;
#define OPREG_GPU_RUNTIME "HIP"
#define OPREG_GPU_DLPACK_DEVICE 10  // kDLROCM
// HIP has no thread-block clusters: the cluster variants are not built.
#define OPREG_GPU_CLUSTERS 0
// ROCm 5.2's hipDeviceProp_t has no sharedMemPerBlockOptin: a block's LDS has no opt-in beyond it.
#define gpu_smem_optin(prop) ((prop).sharedMemPerBlock)
#else
#include <cuda_runtime_api.h>
#define OPREG_GPU_NAME(name) cuda##name
using gpuDeviceProp = cudaDeviceProp;
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
using gpuError_t = OPREG_GPU_NAME(Error_t);
using gpuStream_t = OPREG_GPU_NAME(Stream_t);
using gpuEvent_t = OPREG_GPU_NAME(Event_t);
using gpuFuncAttribute_t = OPREG_GPU_NAME(FuncAttribute);
inline constexpr gpuError_t gpuSuccess = OPREG_GPU_NAME(Success);
inline constexpr gpuError_t gpuErrorNotSupported = OPREG_GPU_NAME(ErrorNotSupported);
inline constexpr gpuError_t gpuErrorInvalidValue = OPREG_GPU_NAME(ErrorInvalidValue);
inline constexpr auto gpuMemcpyDefault = OPREG_GPU_NAME(MemcpyDefault);
inline constexpr auto gpuFuncAttributeMaxDynamicSharedMemorySize =
    OPREG_GPU_NAME(FuncAttributeMaxDynamicSharedMemorySize);
#define gpuGetDeviceCount OPREG_GPU_NAME(GetDeviceCount)
#define gpuGetDeviceProperties OPREG_GPU_NAME(GetDeviceProperties)
#define gpuGetErrorString OPREG_GPU_NAME(GetErrorString)
#define gpuGetLastError OPREG_GPU_NAME(GetLastError)
#define gpuGetDevice OPREG_GPU_NAME(GetDevice)
#define gpuSetDevice OPREG_GPU_NAME(SetDevice)
#define gpuMalloc OPREG_GPU_NAME(Malloc)
#define gpuMemGetInfo OPREG_GPU_NAME(MemGetInfo)
#define gpuFree OPREG_GPU_NAME(Free)
#define gpuMemcpyAsync OPREG_GPU_NAME(MemcpyAsync)
#define gpuMemsetAsync OPREG_GPU_NAME(MemsetAsync)
#define gpuStreamCreate OPREG_GPU_NAME(StreamCreate)
#define gpuStreamDestroy OPREG_GPU_NAME(StreamDestroy)
#define gpuStreamSynchronize OPREG_GPU_NAME(StreamSynchronize)
#define gpuEventCreate OPREG_GPU_NAME(EventCreate)
#define gpuEventDestroy OPREG_GPU_NAME(EventDestroy)
#define gpuEventRecord OPREG_GPU_NAME(EventRecord)
#define gpuEventSynchronize OPREG_GPU_NAME(EventSynchronize)
#define gpuEventElapsedTime OPREG_GPU_NAME(EventElapsedTime)
#define gpuFuncSetAttribute OPREG_GPU_NAME(FuncSetAttribute)
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor OPREG_GPU_NAME(OccupancyMaxActiveBlocksPerMultiprocessor)
#define gpuRuntimeGetVersion OPREG_GPU_NAME(RuntimeGetVersion)
#define gpuDriverGetVersion OPREG_GPU_NAME(DriverGetVersion)

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
