// The descriptors' element types (describe.h).
#include "ops/describe.h"

#include "registry/fail.h"

namespace opreg::family {

namespace {

// The kernels' element types and their dtypes, in Elem's order.
constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};

}  // namespace

Elem elem_of(DType dtype) {
  for (std::size_t i = 0; i < std::size(kDTypes); ++i) {
    if (kDTypes[i] == dtype) return static_cast<Elem>(i);
  }
  fail(ErrorKind::internal, "dtype {} reached a kernel (the op's check refuses it)", to_string(dtype));
}

DType dtype_of(Elem elem) { return kDTypes[static_cast<std::size_t>(elem)]; }

const char* elem_name(Elem elem) { return elem == Elem::f32 ? "f32" : elem == Elem::f16 ? "f16" : "bf16"; }

Mode mode_of(Casting casting) {
  switch (casting) {
    case Casting::gemma: return Mode::gemma;
    case Casting::none: return Mode::none;
    case Casting::llama: break;
  }
  return Mode::llama;
}

GluRounding rounding_of(Rounding rounding, Elem elem) {
  return rounding == Rounding::torch && elem != Elem::f32 ? GluRounding::torch : GluRounding::once;
}

}  // namespace opreg::family
