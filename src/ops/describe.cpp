// The descriptors' element types (describe.h).
#include "ops/describe.h"

#include "registry/fail.h"

namespace opreg::family {

Elem elem_of(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return Elem::f32;
    case DType::f16:
      return Elem::f16;
    case DType::bf16:
      return Elem::bf16;
    default:
      break;
  }
  fail(ErrorKind::internal, "dtype {} reached a kernel (the op's check refuses it)", to_string(dtype));
}

DType dtype_of(Elem elem) {
  switch (elem) {
    case Elem::f16:
      return DType::f16;
    case Elem::bf16:
      return DType::bf16;
    case Elem::f32:
      break;
  }
  return DType::f32;
}

const char* elem_name(Elem elem) { return elem == Elem::f32 ? "f32" : elem == Elem::f16 ? "f16" : "bf16"; }

Mode mode_of(Casting casting) {
  switch (casting) {
    case Casting::gemma:
      return Mode::gemma;
    case Casting::none:
      return Mode::none;
    case Casting::llama:
      break;
  }
  return Mode::llama;
}

GluRounding rounding_of(Rounding rounding, Elem elem) {
  return rounding == Rounding::torch && elem != Elem::f32 ? GluRounding::torch : GluRounding::once;
}

}  // namespace opreg::family
