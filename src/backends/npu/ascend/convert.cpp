#include "backends/npu/ascend/convert.h"

#include <vector>

#include "opreg/dtype.h"

namespace opreg::npu::detail {

const float* half_table() {
  static const std::vector<float> table = [] {
    std::vector<float> values(1u << 16);
    for (std::uint32_t bits = 0; bits < values.size(); ++bits) {
      values[bits] = static_cast<float>(to_double(half{static_cast<std::uint16_t>(bits)}));
    }
    return values;
  }();
  return table.data();
}

}  // namespace opreg::npu::detail
