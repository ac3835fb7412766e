// GPU throughput of the cuda rms_norm variants, in bytes of the byte model (opreg::bytes_moved)
// per second, next to a device-to-device copy of the same bytes (half read, half written): the
// ceiling a memory-bound kernel competes with. bench/peer_gpu_rms_norm.py times PyTorch and
// Liger-Kernel on the same shapes with the same method.
//
// Method (bench_cuda_common.h, the same in the peer script): each timed run starts with L2 flushed
// (a 256 MiB memset), then CUDA events around the work alone, on the default stream; the reported
// time is the median of the runs (counter `us`), after 3 warm-up runs. Inputs are random in
// [-2, 2] (never zeros).
//
// Cases: rms/<variant>/<dir>/<dtype>/<rows>x<hidden>, where variant is `chosen` (the public entry
// point: check, choice, kernel) or one of cluster/rows/split run by name (a variant that does not
// take the shape is reported as skipped with its reason); dir is fwd, or fwdbwd (forward then
// backward, dW included); dtype bf16 (bf16 weight) or f32. Counters: us, GBps, copy_us, copy_GBps,
// of_copy (GBps / copy_GBps).
//
// copy/peak: a device-to-device copy of 1 GiB (2 GiB moved), the device's copy bandwidth that
// the tables quote fractions of besides the copy of each case's own bytes (which, for the
// smaller cases, is itself short of the peak).
//
// sweep/...: the launch shapes the variants could use, run through the kernels' launchers
// directly, for tuning the plans (docs/backends/cuda.md): <dir>_rows_nv<accesses>_tpr<threads a
// row>_blk<threads a block>_st<stages: 0 = registers>[_hold: scales in shared memory][_np: a block
// per row group, not persistent], and <dir>_cluster_c<blocks>_tpr<threads>. Filter with
// --benchmark_filter; bench/peer_gpu_rms_norm.py sweep BENCH.json lists the best per case.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda_like/gpu_vendor.h"
#include "backends/cuda_like/rms_norm/plan.h"
#include "ops/describe.h"
#include "bench_cuda_common.h"
#include "opreg/ops.h"

namespace {

using namespace opreg;
using namespace opreg::bench;

// One problem's tensors, kept while consecutive cases use the same shape and dtype.
struct RmsData {
  Shape shape;
  DType dtype = DType::f32;
  RmsNormFwdArgs fwd;
  RmsNormBwdArgs bwd;
};
RmsData& data_for(const Shape& shape, DType dtype) {
  static RmsData d;
  if (d.fwd.x.defined() && d.shape == shape && d.dtype == dtype) return d;
  d = RmsData{};
  Registry& reg = gpu().reg;
  const Device dev = gpu().dev;
  const std::int64_t hidden = shape[shape.ndim() - 1];
  d.shape = shape;
  d.dtype = dtype;
  d.fwd.x = Tensor::empty(shape, dtype, dev, reg);
  d.fwd.weight = Tensor::empty({hidden}, dtype, dev, reg);
  d.fwd.y = Tensor::empty(shape, dtype, dev, reg);
  d.fwd.rstd = Tensor::empty({rows_hidden(shape).rows}, DType::f32, dev, reg);
  fill_random(d.fwd.x, 1);
  fill_random(d.fwd.weight, 2);
  d.bwd.dy = Tensor::empty(shape, dtype, dev, reg);
  fill_random(d.bwd.dy, 3);
  d.bwd.x = d.fwd.x;
  d.bwd.weight = d.fwd.weight;
  d.bwd.rstd = d.fwd.rstd;
  d.bwd.dx = Tensor::empty(shape, dtype, dev, reg);
  d.bwd.dweight = Tensor::empty({hidden}, dtype, dev, reg);
  rms_norm_fwd(d.fwd);  // the statistics the backward consumes
  return d;
}

std::uint64_t case_bytes(const Shape& shape, DType dtype, bool with_bwd) {
  std::uint64_t b = bytes_moved("rms_norm", Direction::fwd, shape, dtype, dtype);
  if (with_bwd) b += bytes_moved("rms_norm", Direction::bwd, shape, dtype, dtype);
  return b;
}

// ---- rms/...: each variant by name, and the registry's choice.

std::string run_rms_once(RmsData& d, Registry& reg, bool with_bwd, const std::string& impl, std::string& label);

void run_rms(benchmark::State& state, Shape shape, DType dtype, bool with_bwd, std::string impl) {
  RmsData& d = data_for(shape, dtype);
  Registry& reg = gpu().reg;
  std::string label;
  timed(state, case_bytes(shape, dtype, with_bwd), [&]() -> std::string {
    try {
      return run_rms_once(d, reg, with_bwd, impl, label);
    } catch (const Error& e) {
      return e.what();
    }
  });
  state.SetLabel(label);
}

std::string run_rms_once(RmsData& d, Registry& reg, bool with_bwd, const std::string& impl, std::string& label) {
  {
    if (impl == "chosen") {
      const DispatchResult f = rms_norm_fwd(d.fwd);
      label = f.variant->impl;
      if (with_bwd) label += "+" + rms_norm_bwd(d.bwd).variant->impl;
      return {};
    }
    const Verdict vf = reg.call_variant(rms_norm_fwd_op(), "cuda.rms_norm.fwd." + impl, d.fwd);
    if (!vf.ok) return "fwd: " + vf.reason;
    if (!with_bwd) return {};
    const Verdict vb = reg.call_variant(rms_norm_bwd_op(), "cuda.rms_norm.bwd." + impl, d.bwd);
    return vb.ok ? std::string() : "bwd: " + vb.reason;
  }
}

// ---- sweep/...: launch shapes through the launchers directly.

struct Sweep {
  bool backward;
  cuda_like::RowShape shape;
};

void run_sweep(benchmark::State& state, Shape shape, DType dtype, Sweep sw) {
  using namespace cuda_like;
  RmsData& d = data_for(shape, dtype);
  Gpu& g = gpu();
  const auto& gpu_facts = *static_cast<const GpuInfo*>(g.reg.device_props(g.dev).facts);
  static float* partial = nullptr;
  static std::size_t partial_size = 0;
  const std::uint64_t bytes =
      bytes_moved("rms_norm", sw.backward ? Direction::bwd : Direction::fwd, shape, dtype, dtype);
  timed(state, bytes, [&]() -> std::string {
    Launch l;
    if (!sw.backward) {
      const RowNormFwd p = family::describe(d.fwd);
      gpuError_t err = plan_fwd_rows(p, sw.shape, gpu_facts, l);
      if (err == gpuSuccess) {
        err = launch_fwd_rows(p, sw.shape, l, nullptr);
      }
      return err == gpuSuccess ? std::string() : gpuGetErrorString(err);
    }
    const RowNormBwd p = family::describe(d.bwd);
    gpuError_t err = plan_bwd_rows(p, sw.shape, gpu_facts, l);
    if (err != gpuSuccess) return gpuGetErrorString(err);
    if (l.workspace > partial_size) {
      if (partial != nullptr) gpuFree(partial);
      gpu_check(gpuMalloc(reinterpret_cast<void**>(&partial), l.workspace), "cudaMalloc(partial)");
      partial_size = l.workspace;
    }
    err = launch_bwd_rows(p, sw.shape, l, partial, nullptr);
    if (err == gpuSuccess) err = launch_dw_finish(partial, p.x_type, l.partials, p.hidden, p.dweight, p.w_type, nullptr, l);
    if (err == gpuSuccess) state.SetLabel("grid=" + std::to_string(l.grid) + " threads=" + std::to_string(l.threads));
    return err == gpuSuccess ? std::string() : gpuGetErrorString(err);
  });
}

// The launch shapes worth comparing for one problem: accesses per thread x stages (the plan's
// block of 256 threads, or one row) x, backward, scales held in shared memory or not; and
// clusters of 2, 4, 8 (2 stages).
std::vector<std::pair<std::string, Sweep>> sweeps(std::int64_t hidden, DType dtype) {
  using namespace cuda_like;
  std::vector<std::pair<std::string, Sweep>> out;
  const int vec = 16 / static_cast<int>(element_size(dtype));
  const std::int64_t nvec = hidden / vec;
  const std::size_t room = 227 * 1024 - 2048 - (hidden * 4);
  for (const bool backward : {false, true}) {
    const char* dir = backward ? "bwd" : "fwd";
    for (const int nv : backward ? std::vector<int>{1, 2, 4} : std::vector<int>{2, 4, 8}) {
      const int limit = backward ? max_threads_bwd(nv, vec) : max_threads_fwd(nv, vec);
      const int tpr = round_threads((nvec + nv - 1) / nv);
      if (tpr > limit) continue;
      RowShape s;
      s.vec = vec;
      s.nv = nv;
      s.tpr = tpr;
      s.slots = tpr >= 256 ? 1 : 256 / tpr;
      const int threads = s.slots * tpr;
      // Stages 0 (the row in registers) to 2; backward, scales held in shared memory or not;
      // forward in registers, also without the persistent grid (a block per row group: "_np").
      for (const int stages : {0, 1, 2}) {
        for (const bool hold : backward&& stages > 0 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
          for (const int per_sm : !backward && stages == 0 ? std::vector<int>{0, -1} : std::vector<int>{0}) {
            const std::size_t smem =
                stages * stage_bytes(backward, nv, threads) + (hold ? held_scale_bytes(nv, vec, threads) : 0);
            if (smem > room || (hold && held_scale_bytes(nv, vec, threads) > 32 * 1024)) continue;
            s.stages = stages;
            s.hold = hold;
            s.per_sm = per_sm;
            out.push_back({std::string(dir) + "_rows_nv" + std::to_string(nv) + "_tpr" + std::to_string(tpr) + "_blk" +
                               std::to_string(threads) + "_st" + std::to_string(stages) + (hold ? "_hold" : "") +
                               (per_sm < 0 ? "_np" : ""),
                           Sweep{backward, s}});
          }
        }
      }
    }
    const int cnv = backward ? kClusterBwdNv : kClusterFwdNv;
    const int climit = backward ? max_threads_bwd(cnv, vec) : max_threads_fwd(cnv, vec);
    for (const int c : {2, 4, 8}) {
      const int tpr = std::max(32, round_threads((nvec + c * cnv - 1) / (c * cnv)));
      if (tpr > climit || tpr < 128) continue;
      RowShape s;
      s.vec = vec;
      s.nv = cnv;
      s.tpr = tpr;
      s.cluster = c;
      s.stages = 2;
      s.hold = backward && held_scale_bytes(cnv, vec, tpr) <= 32 * 1024;
      out.push_back(
          {std::string(dir) + "_cluster_c" + std::to_string(c) + "_tpr" + std::to_string(tpr), Sweep{backward, s}});
    }
  }
  return out;
}

const std::vector<Shape>& bench_shapes() {
  static const std::vector<Shape> shapes{{4096, 1024},  {4096, 2048},  {4096, 4096},  {4096, 5120}, {4096, 8192},
                                         {4096, 14336}, {4096, 16384}, {4096, 32768}, {65536, 4096}};
  return shapes;
}

void register_all() {
  for (const DType dtype : {DType::bf16, DType::f32}) {
    const std::string dt(to_string(dtype));
    for (const Shape& shape : bench_shapes()) {
      for (const bool with_bwd : {false, true}) {
        const int iters = iterations_for(case_bytes(shape, dtype, with_bwd));
        for (const char* impl : {"chosen", "cluster", "rows", "split"}) {
          const std::string name =
              std::string("rms/") + impl + "/" + (with_bwd ? "fwdbwd" : "fwd") + "/" + dt + "/" + shape.str();
          benchmark::RegisterBenchmark(name.c_str(), run_rms, shape, dtype, with_bwd, std::string(impl))
              ->UseManualTime()
              ->Iterations(iters)
              ->Unit(benchmark::kMicrosecond);
        }
      }
      for (const auto& [what, sw] : sweeps(shape[1], dtype)) {
        const std::string name = "sweep/" + dt + "/" + shape.str() + "/" + what;
        const Direction dir = sw.backward ? Direction::bwd : Direction::fwd;
        benchmark::RegisterBenchmark(name.c_str(), run_sweep, shape, dtype, sw)
            ->UseManualTime()
            ->Iterations(iterations_for(bytes_moved("rms_norm", dir, shape, dtype, dtype)))
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return bench_main(argc, argv, "bench_cuda_rms_norm", register_all); }
