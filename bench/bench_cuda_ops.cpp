// GPU time of every op through the public entry point (check, the registry's choice, kernel) at
// the shapes of the peer table (issue 20), in bytes of the byte model (opreg::bytes_moved) per
// second next to a device-to-device copy of the same bytes and the 1 GiB copy (copy/peak).
// bench/peer_gpu_ops.py times the peers (torch, torch.compile, Liger-Kernel, FlagGems, QuACK) on
// the same cases with the same method and writes the table from both.
//
// Method (bench_cuda_common.h): L2 flushed before each timed run, CUDA events around the work
// alone on the default stream, the median of 20-200 runs after 3 warm-ups; inputs random in
// [-2, 2]; weight and bias in x's dtype.
//
// Cases: ops/<op>/<dir>/<dtype>/<shape>, where dir is fwd, or fwdbwd (the forward then the
// backward, parameter gradients included: dweight, and dbias for layer_norm and group_norm):
//   rms_norm, fused_add_rms_norm, layer_norm, geglu, swiglu: rows x hidden, 4096 x {1024 .. 32768}
//     and 65536 x 4096 (geglu and swiglu: a, b and c all of that shape), bf16 and f32;
//   group_norm: N x C x HW = 32 x {256, 512, 1024, 2048} x 4096, 32 groups, bf16 and f32;
//   decode: the row ops at {1, 8, 64} x {4096, 8192}, bf16, forward only (a latency, in us).
// Counters: us, GBps, bytes, copy_us, copy_GBps, of_copy; the label names the chosen variants
// (forward+backward). The whole run takes about a minute on an H100.
#include <benchmark/benchmark.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "bench_cuda_common.h"
#include "opreg/ops.h"

namespace {

using namespace opreg;
using namespace opreg::bench;

constexpr std::int64_t kGroups = 32;
constexpr std::array<std::string_view, 5> kRowOps{"rms_norm", "fused_add_rms_norm", "layer_norm", "geglu", "swiglu"};

// One problem's tensors and its two calls, kept while consecutive cases share (op, shape, dtype).
struct Problem {
  std::string key;
  std::function<DispatchResult()> fwd;
  std::function<DispatchResult()> bwd;
};

template <class Fwd, class Bwd>
struct Calls {
  Fwd fwd;
  Bwd bwd;
};

// The tensors of one op at one shape: inputs random (seed > 0), outputs left as allocated; the
// forward runs once so that the backward finds its statistics.
std::unique_ptr<Problem> make_problem(std::string_view op, const Shape& shape, DType dt) {
  Gpu& g = gpu();
  const auto t = [&](const Shape& s, DType d, std::uint64_t seed) {
    Tensor x = Tensor::empty(s, d, g.dev, g.reg);
    if (seed > 0) fill_random(x, seed);
    return x;
  };
  const bool grouped = op == "group_norm";
  const Shape params = grouped ? Shape{shape[1]} : Shape{shape[shape.ndim() - 1]};
  const Shape stats = grouped ? Shape{shape[0], kGroups} : Shape{rows_hidden(shape).rows};
  constexpr DType f32 = DType::f32;
  auto p = std::make_unique<Problem>();
  if (op == "rms_norm") {
    auto c = std::make_shared<Calls<RmsNormFwdArgs, RmsNormBwdArgs>>();
    c->fwd = {.x = t(shape, dt, 1), .weight = t(params, dt, 2), .y = t(shape, dt, 0), .rstd = t(stats, f32, 0)};
    c->bwd = {.dy = t(shape, dt, 3),
              .x = c->fwd.x,
              .weight = c->fwd.weight,
              .rstd = c->fwd.rstd,
              .dx = t(shape, dt, 0),
              .dweight = t(params, dt, 0)};
    p->fwd = [c] { return rms_norm_fwd(c->fwd); };
    p->bwd = [c] { return rms_norm_bwd(c->bwd); };
  } else if (op == "fused_add_rms_norm") {
    auto c = std::make_shared<Calls<FusedAddRmsNormFwdArgs, FusedAddRmsNormBwdArgs>>();
    c->fwd = {.x = t(shape, dt, 1),
              .residual = t(shape, dt, 4),
              .weight = t(params, dt, 2),
              .y = t(shape, dt, 0),
              .s = t(shape, dt, 0),
              .rstd = t(stats, f32, 0)};
    c->bwd = {.dy = t(shape, dt, 3),
              .ds_out = t(shape, dt, 5),
              .s = c->fwd.s,
              .weight = c->fwd.weight,
              .rstd = c->fwd.rstd,
              .dx = t(shape, dt, 0),
              .dweight = t(params, dt, 0)};
    p->fwd = [c] { return fused_add_rms_norm_fwd(c->fwd); };
    p->bwd = [c] { return fused_add_rms_norm_bwd(c->bwd); };
  } else if (op == "layer_norm" || grouped) {
    auto c = std::make_shared<Calls<LayerNormFwdArgs, LayerNormBwdArgs>>();
    c->fwd = {.x = t(shape, dt, 1),
              .weight = t(params, dt, 2),
              .bias = t(params, dt, 6),
              .y = t(shape, dt, 0),
              .mean = t(stats, f32, 0),
              .rstd = t(stats, f32, 0)};
    c->bwd = {.dy = t(shape, dt, 3),
              .x = c->fwd.x,
              .weight = c->fwd.weight,
              .mean = c->fwd.mean,
              .rstd = c->fwd.rstd,
              .dx = t(shape, dt, 0),
              .dweight = t(params, dt, 0),
              .dbias = t(params, dt, 0)};
    if (grouped) {
      // The same tensors in group_norm's structs (its fields are layer_norm's and num_groups).
      auto gc = std::make_shared<Calls<GroupNormFwdArgs, GroupNormBwdArgs>>();
      const auto& f = c->fwd;
      const auto& b = c->bwd;
      gc->fwd = {.x = f.x,
                 .weight = f.weight,
                 .bias = f.bias,
                 .y = f.y,
                 .mean = f.mean,
                 .rstd = f.rstd,
                 .num_groups = kGroups};
      gc->bwd = {.dy = b.dy,
                 .x = b.x,
                 .weight = b.weight,
                 .mean = b.mean,
                 .rstd = b.rstd,
                 .dx = b.dx,
                 .dweight = b.dweight,
                 .dbias = b.dbias,
                 .num_groups = kGroups};
      p->fwd = [gc] { return group_norm_fwd(gc->fwd); };
      p->bwd = [gc] { return group_norm_bwd(gc->bwd); };
    } else {
      p->fwd = [c] { return layer_norm_fwd(c->fwd); };
      p->bwd = [c] { return layer_norm_bwd(c->bwd); };
    }
  } else if (op == "geglu" || op == "swiglu") {
    auto c = std::make_shared<Calls<GluFwdArgs, GluBwdArgs>>();
    c->fwd = {.a = t(shape, dt, 1), .b = t(shape, dt, 7), .c = t(shape, dt, 0)};
    c->bwd = {.dc = t(shape, dt, 3), .a = c->fwd.a, .b = c->fwd.b, .da = t(shape, dt, 0), .db = t(shape, dt, 0)};
    if (op == "geglu") {
      p->fwd = [c] { return geglu_fwd(c->fwd); };
      p->bwd = [c] { return geglu_bwd(c->bwd); };
    } else {
      p->fwd = [c] { return swiglu_fwd(c->fwd); };
      p->bwd = [c] { return swiglu_bwd(c->bwd); };
    }
  } else {
    return nullptr;
  }
  p->fwd();
  gpu_check(gpuStreamSynchronize(nullptr), "cudaStreamSynchronize");
  return p;
}

// The problem of this case, made when the case differs from the last one in (op, shape, dtype);
// the last one's tensors are freed first (the largest need 7 GiB).
Problem* problem_for(std::string_view op, const Shape& shape, DType dt, std::string& why) {
  static std::unique_ptr<Problem> current;
  const std::string key = std::string(op) + "/" + shape.str() + "/" + std::string(to_string(dt));
  if (current && current->key == key) return current.get();
  current.reset();
  try {
    current = make_problem(op, shape, dt);
  } catch (const Error& e) {
    why = e.what();
    return nullptr;
  }
  if (!current) {
    why = "unknown op " + std::string(op);
    return nullptr;
  }
  current->key = key;
  return current.get();
}

std::string impl_of(const DispatchResult& r) {
  if (r.variant == nullptr) return "?";
  return r.fell_back ? r.variant->name + " (fallback)" : r.variant->impl;
}

std::uint64_t case_bytes(std::string_view op, const Shape& shape, DType dt, bool with_bwd) {
  std::uint64_t b = bytes_moved(op, Direction::fwd, shape, dt, dt, kGroups);
  if (with_bwd) b += bytes_moved(op, Direction::bwd, shape, dt, dt, kGroups);
  return b;
}

void run_case(benchmark::State& state, std::string op, Shape shape, DType dt, bool with_bwd) {
  std::string why;
  Problem* p = problem_for(op, shape, dt, why);
  if (p == nullptr) {
    state.SkipWithError(("setup: " + why).c_str());
    return;
  }
  std::string label;
  timed(state, case_bytes(op, shape, dt, with_bwd), [&]() -> std::string {
    try {
      label = impl_of(p->fwd());
      if (with_bwd) {
        label += '+';  // appended in two steps: "+" + string trips g++ 12's -Wrestrict
        label += impl_of(p->bwd());
      }
      return {};
    } catch (const Error& e) {
      return e.what();
    }
  });
  state.SetLabel(label);
}

void add_case(std::string_view op, const Shape& shape, DType dt, bool with_bwd) {
  const std::string name = "ops/" + std::string(op) + "/" + (with_bwd ? "fwdbwd" : "fwd") + "/" +
                           std::string(to_string(dt)) + "/" + shape.str();
  benchmark::RegisterBenchmark(name.c_str(), run_case, std::string(op), shape, dt, with_bwd)
      ->UseManualTime()
      ->Iterations(iterations_for(case_bytes(op, shape, dt, with_bwd)))
      ->Unit(benchmark::kMicrosecond);
}

void register_all() {
  const std::array<Shape, 7> rows{Shape{4096, 1024},  Shape{4096, 2048},  Shape{4096, 4096}, Shape{4096, 8192},
                                  Shape{4096, 16384}, Shape{4096, 32768}, Shape{65536, 4096}};
  for (const std::string_view op : kRowOps) {
    for (const DType dt : {DType::bf16, DType::f32}) {
      for (const Shape& s : rows) {
        for (const bool with_bwd : {false, true}) add_case(op, s, dt, with_bwd);
      }
    }
  }
  for (const DType dt : {DType::bf16, DType::f32}) {
    for (const std::int64_t c : {256, 512, 1024, 2048}) {
      for (const bool with_bwd : {false, true}) add_case("group_norm", Shape{32, c, 4096}, dt, with_bwd);
    }
  }
  for (const std::string_view op : kRowOps) {
    for (const std::int64_t r : {1, 8, 64}) {
      for (const std::int64_t h : {4096, 8192}) add_case(op, Shape{r, h}, DType::bf16, false);
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return bench_main(argc, argv, "bench_cuda_ops", register_all); }
