// GPU time of every op through the public entry point (check, the registry's choice, kernel) at
// the shapes of the peer table (issue 20), in bytes of the byte model (opreg::bytes_moved) per
// second next to a device-to-device copy of the same bytes and the 1 GiB copy (copy/peak).
// bench/peer_gpu_ops.py times the peers (torch, torch.compile, Liger-Kernel, FlagGems, QuACK) on
// the same cases with the same method and writes the table from both.
//
// Method (bench_cuda_common.h): L2 flushed before each timed run, CUDA events around the work
// alone on the default stream, the median of 20-200 runs after 3 warm-ups. The tensors come from
// the one problem factory (src/ops/problem.h), as the tests' and `opreg bench`'s do: inputs
// random in [-2, 2], weight and bias in x's dtype, a backward's statistics from the reference
// forward on the same inputs.
//
// Cases: ops/<op>/<dir>/<dtype>/<shape>, where dir is fwd, or fwdbwd (the forward then the
// backward, parameter gradients included: dweight, and dbias for layer_norm and group_norm):
//   every op of the manifest whose problem has rows: rows x hidden, 4096 x {1024 .. 32768} and
//     65536 x 4096 (geglu and swiglu: a, b and c all of that shape), bf16 and f32;
//   the grouped ops (group_norm): N x C x HW = 32 x {256, 512, 1024, 2048} x 4096, 32 groups,
//     bf16 and f32;
//   decode: the row ops at {1, 8, 64} x {4096, 8192}, bf16, forward only (a latency, in us);
//   rope: q [B, Hq, T, D] = 4 x 32 x 4096 x 128 with 8 kv heads (Llama 3 8B's attention), q and k
//     HF's transposed views, one shared [1, T, D] table pair, bf16 and f32.
// Counters: us, GBps, bytes, copy_us, copy_GBps, of_copy; the label names the chosen variants
// (forward+backward). The problems are made on the host (the factory), so
// the whole run takes a few minutes.
#include <benchmark/benchmark.h>

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "bench_cpu_common.h"
#include "bench_cuda_common.h"
#include "ops/problem.h"

namespace {

using namespace opreg;
using namespace opreg::bench;

// The factory's problems of one case, kept while consecutive cases share (op, shape, dtype):
// the forward, and the backward once a fwdbwd case asks for it.
struct Problems {
  std::string key;
  std::unique_ptr<Problem> fwd;
  std::unique_ptr<Problem> bwd;
};

constexpr std::int64_t kRopeKvHeads = 8;

std::unique_ptr<Problem> make_problem(std::string_view op, Direction dir, const Shape& shape, DType dt) {
  ProblemSpec spec;
  spec.op = std::string(op) + "." + std::string(to_string(dir));
  spec.dtype = dt;
  spec.wdtype = dt;
  spec.shape = shape;
  spec.groups = kGroups;
  if (problem_options(spec.op).rope) {
    spec.kv_heads = kRopeKvHeads;
    spec.transposed = true;
  }
  return std::make_unique<Problem>(gpu().reg, spec, gpu().dev);
}

// The problems of this case; the last case's tensors are freed first when it differs in (op,
// shape, dtype) (the largest need 7 GiB). Null with `why` set when the factory refuses.
Problems* problems_for(std::string_view op, const Shape& shape, DType dt, bool with_bwd, std::string& why) {
  static Problems current;
  const std::string key = std::string(op) + "/" + shape.str() + "/" + std::string(to_string(dt));
  try {
    if (current.key != key) {
      current = {};
      current.fwd = make_problem(op, Direction::fwd, shape, dt);
      current.key = key;
    }
    if (with_bwd && !current.bwd) current.bwd = make_problem(op, Direction::bwd, shape, dt);
  } catch (const Error& e) {
    current = {};
    why = e.what();
    return nullptr;
  }
  return &current;
}

std::string impl_of(const DispatchResult& r) {
  if (r.variant == nullptr) return "?";
  return r.fell_back ? r.variant->name + " (fallback)" : r.variant->impl;
}

// By the shape (rope's: HF's call, k with q's head count), for the iteration count; a case's
// counters use its problems' own bytes (Problem::bytes, the call's byte model).
std::uint64_t case_bytes(std::string_view op, const Shape& shape, DType dt, bool with_bwd) {
  std::uint64_t b = bytes_moved(op, Direction::fwd, shape, dt, dt, kGroups);
  if (with_bwd) b += bytes_moved(op, Direction::bwd, shape, dt, dt, kGroups);
  return b;
}

void run_case(benchmark::State& state, std::string op, Shape shape, DType dt, bool with_bwd) {
  std::string why;
  Problems* p = problems_for(op, shape, dt, with_bwd, why);
  if (p == nullptr) {
    state.SkipWithError(("setup: " + why).c_str());
    return;
  }
  std::string label;
  timed(state, p->fwd->bytes() + (with_bwd ? p->bwd->bytes() : 0), [&]() -> std::string {
    try {
      label = impl_of(p->fwd->run());
      if (with_bwd) {
        label += '+';  // appended in two steps: "+" + string trips g++ 12's -Wrestrict
        label += impl_of(p->bwd->run());
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
  for (const std::string_view op : op_names()) {
    for (const DType dt : {DType::bf16, DType::f32}) {
      if (op == "rope") {
        for (const bool with_bwd : {false, true}) add_case(op, Shape{4, 32, 4096, 128}, dt, with_bwd);
      } else if (grouped(op)) {
        for (const std::int64_t c : {256, 512, 1024, 2048}) {
          for (const bool with_bwd : {false, true}) add_case(op, Shape{32, c, 4096}, dt, with_bwd);
        }
      } else {
        for (const Shape& s : rows) {
          for (const bool with_bwd : {false, true}) add_case(op, s, dt, with_bwd);
        }
      }
    }
  }
  for (const std::string_view op : op_names()) {
    if (grouped(op) || op == "rope") continue;
    for (const std::int64_t r : {1, 8, 64}) {
      for (const std::int64_t h : {4096, 8192}) add_case(op, Shape{r, h}, DType::bf16, false);
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return bench_main(argc, argv, "bench_cuda_ops", register_all); }
