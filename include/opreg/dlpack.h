// DLPack exchange: opreg tensors to and from frameworks without copying. Built on Debian's
// libdlpack-dev (dlpack.h 0.6: the legacy DLManagedTensor; DLManagedTensorVersioned too where
// the header has it, DLPack 1.0 and later).
//
//   DLManagedTensor* m = torch_like_producer();      // any DLPack producer
//   opreg::Tensor x = opreg::from_dlpack(m);         // same memory; m's deleter runs when the
//                                                    // last tensor sharing it is gone
//   DLManagedTensor* out = opreg::to_dlpack(y);      // the consumer calls out->deleter(out)
#pragma once

#include <dlpack/dlpack.h>

#include "opreg/tensor.h"

namespace opreg {

class Registry;

// dtype <-> DLDataType: f32, f64, f16 (kDLFloat), bf16 (kDLBfloat), i32, i64 (kDLInt), one lane.
// Anything else is an opreg::Error naming it and what is accepted.
DLDataType to_dlpack_dtype(DType dtype);
DType from_dlpack_dtype(DLDataType dtype);

// The opreg device a DLDevice names: the one backend whose Backend::dlpack_device_type() is
// device.device_type (cpu for kDLCPU, cuda for kDLCUDA, xpu for kDLOpenCL, ...), index
// device.device_id. No such backend, or several (two backends of kDLExtDev), is an opreg::Error;
// pass the device explicitly then.
Device from_dlpack_device(DLDevice device, const Registry& registry);
DLDevice to_dlpack_device(Device device, const Registry& registry);

// Import without copying: the tensor views managed->dl_tensor's memory (data + byte_offset, with
// its strides; null strides mean contiguous) and takes ownership of `managed`: its deleter runs
// exactly once, when the last opreg tensor sharing the memory is destroyed. A dtype or device
// opreg cannot map is an opreg::Error, and then `managed` is left to the caller (not deleted).
Tensor from_dlpack(DLManagedTensor* managed);
Tensor from_dlpack(DLManagedTensor* managed, Registry& registry);
Tensor from_dlpack(DLManagedTensor* managed, Device device, Registry& registry);

// Export without copying: the returned DLManagedTensor shares `tensor`'s memory and keeps it
// alive until the consumer calls its deleter (exactly once). Shape and strides (in elements) are
// owned by the returned object. A view of caller memory (Tensor::wrap) exports that memory,
// which the caller keeps alive.
DLManagedTensor* to_dlpack(const Tensor& tensor);
DLManagedTensor* to_dlpack(const Tensor& tensor, const Registry& registry);

#ifdef DLPACK_MAJOR_VERSION
// DLPack 1.0's versioned struct (only where the installed header has it). A read-only tensor
// exports with DLPACK_FLAG_BITMASK_READ_ONLY, and such a producer's tensor imports read-only.
Tensor from_dlpack(DLManagedTensorVersioned* managed, Registry& registry);
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor, const Registry& registry);
#endif

// A non-owning DLTensor describing `tensor` (shape and strides point into the tensor, which must
// outlive the result): for passing opreg tensors to C kernels (the plugin ABI).
DLTensor dlpack_view(const Tensor& tensor, const Registry& registry);

}  // namespace opreg
