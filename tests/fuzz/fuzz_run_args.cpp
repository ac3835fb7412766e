// `opreg run`'s command line: NUL-separated arguments through the option parser and on to the
// problem spec (nothing is run). Usage and opreg::Error are the only exceptions allowed.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "run_options.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace opreg;
  const std::vector<std::string> parts = fuzz::split(data, size);
  const std::vector<std::string_view> args(parts.begin(), parts.end());
  try {
    const cli::RunOptions options = cli::parse_run_args(args);
    const ProblemSpec spec = cli::to_spec(options);
    (void)spec.cli_args("cpu");
  } catch (const cli::Usage&) {
  } catch (const Error&) {
  }
  return 0;
}
