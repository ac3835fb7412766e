// The npu emulator's counter table for rms_norm: for each hidden size, the variant the registry
// chooses, its tiling, the GM traffic it moves against the ideal, UB use, and the cost model's
// time. Every figure is EMULATED: counted by the host emulator or estimated by its cost model,
// never measured on Ascend hardware. A plain program (no Google Benchmark: nothing is timed but
// the emulation itself, reported apart).
//
//   build/bench/npu_counters [--rows 4096] [--hidden 1024,...,65536] [--dtype f32|bf16|f16]...
//
// The profile is the npu backend's (OPREG_NPU_PROFILE, OPREG_NPU_UB_BYTES).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/npu/npu_backend.h"
#include "bench_cpu_common.h"
#include "backends/npu/rms_norm/plan.h"
#include "ops/describe.h"
#include "opreg/ops.h"
#include "opreg/registry.h"

namespace {

using namespace opreg;

struct Row {
  std::string op;
  std::int64_t hidden = 0;
  DType dtype = DType::f32;
  std::string variant;
  npu::Tiles plan;
  npu::LaunchCounters c;
  std::uint64_t ideal_read = 0;
  std::uint64_t ideal_write = 0;
  std::uint64_t model_bytes = 0;  // bytes_moved: each input once, each output once
  double emulate_ms = 0;
};

Tensor filled(Registry& reg, Device d, const Shape& s, DType t, double v) {
  Tensor out = Tensor::empty(s, t, d, reg);
  out.fill(v, reg);
  return out;
}

Row run(Registry& reg, Device npu, Direction dir, std::int64_t rows, std::int64_t hidden, DType x) {
  Row r;
  r.op = dir == Direction::fwd ? "fwd" : "bwd";
  r.hidden = hidden;
  r.dtype = x;
  const Shape shape{rows, hidden};
  const auto xb = static_cast<std::uint64_t>(rows * hidden) * element_size(x);
  const auto wb = static_cast<std::uint64_t>(hidden) * element_size(x);
  const auto rb = static_cast<std::uint64_t>(rows) * 4;
  npu::Emulator& em = *npu::emulator_of(reg);
  const auto start = std::chrono::steady_clock::now();
  const VariantInfo* chosen = nullptr;
  if (dir == Direction::fwd) {
    RmsNormFwdArgs a;
    a.x = filled(reg, npu, shape, x, 0.75);
    a.weight = filled(reg, npu, Shape{hidden}, x, 1.25);
    a.y = Tensor::empty(shape, x, npu, reg);
    a.rstd = Tensor::empty(Shape{rows}, DType::f32, npu, reg);
    chosen = reg.choose(rms_norm_fwd_op(), a);
    r.plan = npu::rms_norm::plan_fwd(chosen->impl == "chunked" ? npu::rms_norm::Impl::chunked : npu::rms_norm::Impl::single_pass,
                                npu::rms_norm::sizes_of(family::describe(a)), em.model())
                 .tiles;
    reg.call(rms_norm_fwd_op(), a);
  } else {
    RmsNormBwdArgs a;
    a.dy = filled(reg, npu, shape, x, 0.5);
    a.x = filled(reg, npu, shape, x, 0.75);
    a.weight = filled(reg, npu, Shape{hidden}, x, 1.25);
    a.rstd = filled(reg, npu, Shape{rows}, DType::f32, 1.5);
    a.dx = Tensor::empty(shape, x, npu, reg);
    a.dweight = Tensor::empty(Shape{hidden}, x, npu, reg);
    chosen = reg.choose(rms_norm_bwd_op(), a);
    r.plan = npu::rms_norm::plan_bwd(chosen->impl == "chunked" ? npu::rms_norm::Impl::chunked : npu::rms_norm::Impl::single_pass,
                                npu::rms_norm::sizes_of(family::describe(a)), em.model())
                 .tiles;
    reg.call(rms_norm_bwd_op(), a);
  }
  r.emulate_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  r.variant = chosen->name;
  r.c = *em.last_launch();
  const auto cores = static_cast<std::uint64_t>(r.c.block_dim);
  if (dir == Direction::fwd) {
    r.ideal_read = xb + cores * wb;  // x once, the weight once per core
    r.ideal_write = xb + rb;
  } else {
    const auto partials = cores * static_cast<std::uint64_t>(hidden) * 4;
    r.ideal_read = 2 * xb + rb + cores * wb + partials;  // dy, x, rstd once; w once a core; partials once
    r.ideal_write = xb + partials + wb;                  // dx, each core's partial once, dweight
  }
  r.model_bytes = bytes_moved("rms_norm", dir, shape, x, x);
  return r;
}

std::string mib(std::uint64_t b) { return fmt::format("{:.1f}", static_cast<double>(b) / (1 << 20)); }

int main_(int argc, char** argv) {
  std::int64_t rows = 4096;
  std::vector<std::int64_t> hidden{1024, 2048, 4096, 8192, 16384, 32768, 65536};
  std::vector<DType> dtypes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--rows") {
      rows = std::stoll(value);
      ++i;
    } else if (arg == "--hidden") {
      hidden.clear();
      for (std::size_t at = 0; at < value.size();) {
        const std::size_t comma = value.find(',', at);
        hidden.push_back(std::stoll(value.substr(at, comma - at)));
        at = comma == std::string::npos ? value.size() : comma + 1;
      }
      ++i;
    } else if (arg == "--dtype") {
      dtypes.push_back(parse_dtype(value));
      ++i;
    } else {
      std::fprintf(stderr, "usage: npu_counters [--rows N] [--hidden H1,H2,...] [--dtype f32|f16|bf16]...\n");
      return 2;
    }
  }
  if (dtypes.empty()) dtypes = {DType::f32, DType::bf16};
  Registry& reg = default_registry();
  const Device npu = reg.parse_device("npu");
  const npu::Emulator& em = *npu::emulator_of(reg);
  const npu::Profile& p = em.profile();
  fmt::print(
      "EMULATED counters and cost-model estimates (not hardware measurements): {} ({} vector cores, UB {} B, "
      "L2 {} MiB, HBM {} GB/s{}), rms_norm, {} rows, weight in x's dtype\n\n",
      p.name, p.vector_cores, em.ub_bytes(), p.l2_bytes >> 20, p.hbm_gbps, p.hbm_gbps_verified ? "" : " unverified",
      rows);
  fmt::print(
      "| op | dtype | hidden | variant | mode | block_dim / waves | rows a tile, BLOCK_SIZE_SUB x chunks | depth | "
      "UB peak | gm_read MiB (x ideal) | gm_write MiB (x ideal) | DMAs | vector repeats | L2-resident | est_us "
      "(emulated) | GB/s at est_us (emulated) | emulation ms (host) |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const DType x : dtypes) {
    for (const Direction dir : {Direction::fwd, Direction::bwd}) {
      for (const std::int64_t h : hidden) {
        const Row r = run(reg, npu, dir, rows, h, x);
        const npu::Counters& c = r.c.counters;
        const std::string tile =
            r.plan.mode == npu::TileMode::split_row
                ? fmt::format("1, {} x {} (tail {})", r.plan.block_size_sub, r.plan.chunks, r.plan.tail)
                : fmt::format("{}", r.plan.rows_per_tile);
        fmt::print(
            "| {} | {} | {} | {} | {} | {} / {} | {} | {} | {:.0f}% | {} ({:.3f}) | {} ({:.3f}) | {} | {} | {} | "
            "{:.1f} | {:.0f} | {:.0f} |\n",
            r.op, to_string(r.dtype), r.hidden, r.variant.substr(r.variant.rfind('.') + 1), npu::to_string(r.plan.mode),
            r.c.block_dim, r.c.waves, tile, r.plan.depth, 100 * r.c.ub_ratio(), mib(c.gm_read),
            static_cast<double>(c.gm_read) / static_cast<double>(r.ideal_read), mib(c.gm_write),
            static_cast<double>(c.gm_write) / static_cast<double>(r.ideal_write), c.dma_in + c.dma_out,
            c.vector_repeats, r.c.l2_resident ? "yes" : "no", r.c.est_us,
            static_cast<double>(r.model_bytes) / (r.c.est_us * 1e3), r.emulate_ms);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return opreg::bench::guarded_main("npu_counters", main_, argc, argv); }
