// The npu emulator's counters for every op the npu backend has: for each op direction, dtype and
// size, the variant the registry chooses (and, for geglu and swiglu, flat against sub_block), its
// launch (block_dim, waves, idle cores), UB peak against the UB, GM traffic against the byte
// model (each input once, each output once), the cost model's time and the fraction of the
// profile's HBM bandwidth that time means. Every figure is EMULATED: counted by the host
// emulator or estimated by its cost model, never measured on Ascend hardware.
//
//   build/bench/npu_op_counters [--rows 256] [--hidden 1024,...,65536] [--channels 256,...,2048]
//                               [--batch 2] [--spatial 4096] [--dtype bf16]... [--ops geglu,...]
//
// Row ops take rows x hidden; group_norm takes batch x channels x spatial with 32 groups. The
// profile is the npu backend's (OPREG_NPU_PROFILE, OPREG_NPU_UB_BYTES).
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backends/npu/npu_backend.h"
#include "bench_cpu_common.h"
#include "opreg/registry.h"
#include "ops/problem.h"

namespace {

using namespace opreg;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = text.find(',', at);
    out.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

std::string mib(std::uint64_t b) { return fmt::format("{:.1f}", static_cast<double>(b) / (1 << 20)); }

// One row of the table: `variant` empty runs the registry's choice.
void row(Registry& reg, Device npu, const ProblemSpec& spec, const std::string& variant) {
  Problem problem(reg, spec, npu);
  std::string name = variant;
  if (variant.empty()) {
    name = problem.run().variant->name;
  } else if (const Verdict v = problem.run_variant(variant); !v.ok) {
    fmt::print("| {} | {} | {} | {} | refused: {} ||||||||\n", spec.op, to_string(spec.dtype), spec.shape.str(),
               variant, v.reason);
    return;
  }
  const npu::Emulator& em = *npu::emulator_of(reg);
  const npu::LaunchCounters l = *em.last_launch();
  const npu::Counters& c = l.counters;
  const std::uint64_t model = problem.bytes();
  const double gbps = l.est_us > 0 ? static_cast<double>(model) / (l.est_us * 1e3) : 0.0;
  fmt::print("| {} | {} | {} | {} | {} / {} / {} | {:.0f}% | {} | {} | {:.3f} | {} | {:.1f} | {:.0f} | {:.0f}% |\n",
             spec.op, to_string(spec.dtype), spec.shape.str(), name.substr(name.find('.', 4) + 1), l.block_dim,
             l.waves, l.idle_cores, 100 * l.ub_ratio(), mib(c.gm_read), mib(c.gm_write),
             static_cast<double>(c.gm_read + c.gm_write) / static_cast<double>(model), l.l2_resident ? "yes" : "no",
             l.est_us, gbps, 100 * gbps / em.profile().hbm_gbps);
  std::fflush(stdout);
}

int main_(int argc, char** argv) {
  std::int64_t rows = 256;
  std::int64_t batch = 2;
  std::int64_t spatial = 4096;
  std::vector<std::int64_t> hidden{1024, 2048, 4096, 8192, 16384, 32768, 65536};
  std::vector<std::int64_t> channels{256, 512, 1024, 2048};
  std::vector<DType> dtypes;
  std::vector<std::string> ops{"rms_norm", "fused_add_rms_norm", "layer_norm", "group_norm", "geglu", "swiglu"};
  for (int i = 1; i + 1 < argc || i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    auto numbers = [&] {
      std::vector<std::int64_t> out;
      for (const auto& s : split_list(value)) out.push_back(std::stoll(s));
      return out;
    };
    if (arg == "--rows") {
      rows = std::stoll(value);
    } else if (arg == "--batch") {
      batch = std::stoll(value);
    } else if (arg == "--spatial") {
      spatial = std::stoll(value);
    } else if (arg == "--hidden") {
      hidden = numbers();
    } else if (arg == "--channels") {
      channels = numbers();
    } else if (arg == "--dtype") {
      dtypes.push_back(parse_dtype(value));
    } else if (arg == "--ops") {
      ops = split_list(value);
    } else {
      std::fprintf(stderr,
                   "usage: npu_op_counters [--rows N] [--hidden H,...] [--channels C,...] [--batch N] [--spatial HW] "
                   "[--dtype f32|f16|bf16]... [--ops rms_norm,...]\n");
      return 2;
    }
    ++i;
  }
  if (dtypes.empty()) dtypes = {DType::bf16};
  Registry& reg = default_registry();
  const Device npu = reg.parse_device("npu");
  const npu::Emulator& em = *npu::emulator_of(reg);
  const npu::Profile& p = em.profile();
  fmt::print(
      "EMULATED counters and cost-model estimates (not hardware measurements): {} ({} vector cores, UB {} B, HBM {} "
      "GB/s{}); rows {} (group_norm {} x C x {}, 32 groups); weights in x's dtype\n\n",
      p.name, p.vector_cores, em.ub_bytes(), p.hbm_gbps, p.hbm_gbps_verified ? "" : " unverified", rows, batch,
      spatial);
  fmt::print(
      "| op | dtype | shape | variant | block_dim / waves / idle cores | UB peak | gm_read MiB | gm_write MiB | "
      "traffic / byte model | L2-resident | est_us (emulated) | GB/s at est_us | of HBM |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& op : ops) {
    for (const char* dir : {"fwd", "bwd"}) {
      for (const DType x : dtypes) {
        ProblemSpec spec;
        spec.op = op + "." + dir;
        spec.dtype = x;
        spec.wdtype = x;
        const bool grouped = problem_options(spec.op).groups;
        for (const std::int64_t n : grouped ? channels : hidden) {
          spec.shape = grouped ? Shape{batch, n, spatial} : Shape{rows, n};
          spec.groups = grouped ? 32 : 1;
          if (op == "geglu" || op == "swiglu") {
            for (const char* impl : {"flat", "sub_block"}) row(reg, npu, spec, fmt::format("npu.{}.{}", spec.op, impl));
          } else {
            row(reg, npu, spec, "");
          }
        }
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return opreg::bench::guarded_main("npu_op_counters", main_, argc, argv); }
