// Every text parser of the public API on arbitrary text: device strings (through the default
// registry, every built-in backend's name included), shapes, dtypes, casting modes, input-value
// modes. Each must return or throw opreg::Error.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "opreg/ops.h"
#include "ops/problem.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace opreg;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Registry& reg = default_registry();
  fuzz::expect_only_opreg_errors([&] {
    const Device d = reg.parse_device(text);
    (void)reg.device_name(d);
    (void)reg.device_label(d);
    reg.check_device(d);
  });
  fuzz::expect_only_opreg_errors([&] {
    const Shape s = Shape::parse(text);
    (void)s.str();
    (void)rows_hidden(s);
  });
  fuzz::expect_only_opreg_errors([&] { (void)parse_dtype(text); });
  fuzz::expect_only_opreg_errors([&] { (void)parse_casting(text); });
  fuzz::expect_only_opreg_errors([&] { (void)parse_rounding(text, "geglu.fwd"); });
  fuzz::expect_only_opreg_errors([&] { (void)parse_values(text); });
  fuzz::expect_only_opreg_errors([&] { (void)problem_options(text); });
  return 0;
}
