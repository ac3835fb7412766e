// The cpu's rope lists, forward and backward (one kernel: the backward negates sin).
#include "backends/cpu/list.h"
#include "registry/fail.h"

namespace opreg::cpu {

void position_outside(const char* op, std::int64_t b, std::int64_t t, std::int64_t row, std::int64_t rows) {
  fail(ErrorKind::invalid_argument, "{}: position_ids[{}, {}] = {} is outside cos and sin's {} rows; accepted: 0 to {}",
       op, b, t, row, rows, rows - 1);
}

OPREG_CPU_KERNELS(rope, Rope, Rope)

void register_rope(Registry& r, Isa level) { OPREG_CPU_LISTS(r, level, rope, Rope, rope); }

}  // namespace opreg::cpu
