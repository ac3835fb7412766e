// The cpu kernels on a busy machine. Another process spins on one core (pinned to the last CPU
// this process may use) while each fast variant runs at the default thread count; the time is
// compared with the same variant's single-thread time on the quiet machine and with the
// reference (cpu.<op>.<dir>.ref) under the same load. Goal: no variant above 1.5x its own
// single-thread time, and none slower than the reference.
//
// BM_Busy/<variant>: the timed iterations run under load; counters single_ms (quiet,
// OPREG_NUM_THREADS=1), quiet_ms (quiet, default threads), busy_over_single, ref_busy_ms and
// busy_over_ref. Shapes are the tour's: 256 x 4096 bf16 (bf16 parameters), group_norm 8 x 64 x 1024
// with 32 groups.
//
// BM_SerialThreshold/<elements>/<team>: rms_norm.fwd (avx2 kernel, bf16, rows of 1024) called with a
// team of 1 or 2 below and around the serial threshold (parallel.h's kSerialBelow), quiet.
//
// usage: bench_cpu_busy [google benchmark flags]
#include <benchmark/benchmark.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "backends/cpu/parallel.h"
#include "backends/cpu/rms_norm/direct.h"
#include "bench_cpu_common.h"

namespace opreg::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A process that keeps one core busy until destroyed.
class Spinner {
 public:
  Spinner() {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    sched_getaffinity(0, sizeof(mine), &mine);
    int last = 0;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &mine)) last = c;
    }
    pid_ = fork();
    if (pid_ == 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(last, &one);
      sched_setaffinity(0, sizeof(one), &one);
      volatile unsigned long spin = 0;
      for (;;) spin = spin + 1;
    }
    usleep(20000);  // let it settle on its core
  }
  ~Spinner() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Spinner(const Spinner&) = delete;
  Spinner& operator=(const Spinner&) = delete;

 private:
  pid_t pid_ = -1;
};

// Sets the default registry's thread count for the scope.
class Threads {
 public:
  explicit Threads(int n) : saved_(default_registry().config()) {
    Config c = saved_;
    c.num_threads = n;
    default_registry().set_config(c);
  }
  ~Threads() { default_registry().set_config(saved_); }
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;

 private:
  Config saved_;
};

template <class F>
double median_ms(int reps, const F& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void busy(benchmark::State& state, const std::string& variant) {
  const std::string op = variant.substr(4, variant.rfind('.') - 4);  // cpu.<op>.<dir>.<impl>
  const std::string base = op.substr(0, op.find('.'));
  const Shape shape = base == "group_norm" ? Shape{8, 64, 1024} : Shape{256, 4096};
  OpProblem p(op, shape, DType::bf16);
  if (!p.run_variant(variant)) {
    state.SkipWithError("the variant does not run here");
    return;
  }
  double single = 0;
  double quiet = 0;
  {
    const Threads one(1);
    single = median_ms(21, [&] { p.run_variant(variant); });
  }
  quiet = median_ms(21, [&] { p.run_variant(variant); });
  double ref = 0;
  {
    const Spinner load;
    for (auto _ : state) {
      const auto t0 = Clock::now();
      p.run_variant(variant);
      state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const std::string reference = "cpu." + op + ".ref";
    ref = median_ms(3, [&] { p.run_variant(reference); });
  }
  // The timed loop's mean is in the report; its median, for the ratio, is measured once more.
  double loaded = 0;
  {
    const Spinner load;
    loaded = median_ms(21, [&] { p.run_variant(variant); });
  }
  state.counters["single_ms"] = single;
  state.counters["quiet_ms"] = quiet;
  state.counters["busy_ms"] = loaded;
  state.counters["busy_over_single"] = loaded / single;
  state.counters["ref_busy_ms"] = ref;
  state.counters["busy_over_ref"] = loaded / ref;
}

// rms_norm.fwd with a given team, bypassing the size threshold, to find where a team pays off.
void serial_threshold(benchmark::State& state) {
  const std::int64_t elements = state.range(0);
  const int team = static_cast<int>(state.range(1));
  const std::int64_t hidden = 1024;
  const std::int64_t rows = elements / hidden;
  Tensor x = Tensor::empty({rows, hidden}, DType::bf16);
  Tensor w = Tensor::empty({hidden}, DType::bf16);
  Tensor y = Tensor::empty({rows, hidden}, DType::bf16);
  Tensor rstd = Tensor::empty({rows}, DType::f32);
  fill_pattern(x, 1);
  fill_pattern(w, 2);
  cpu::RowNormFwd d;
  d.x = x.data();
  d.weight = w.data();
  d.y = y.data();
  d.rstd = rstd.data_as<float>();
  d.rows = rows;
  d.hidden = hidden;
  d.eps = 1e-6;
  d.x_type = cpu::Elem::bf16;
  d.w_type = cpu::Elem::bf16;
  std::vector<double> scratch(static_cast<std::size_t>(hidden) + 64);
  cpu::Exec e;
  e.team = team;
  e.run = &cpu::run_items;
  e.owner = scratch.data();
  e.scratch = [](void* owner, std::size_t) -> void* { return owner; };
  const bool avx2 = default_registry().device_props(Device{}).get("isa") == "avx2";
  for (auto _ : state) {
    if (avx2) {
      cpu::avx2::rms_norm_fwd(d, e);
    } else {
      cpu::generic::rms_norm_fwd(d, e);
    }
  }
  state.SetLabel(avx2 ? "avx2" : "generic");
}

void register_all() {
  for (const std::string_view impl : {"generic", "avx2"}) {
    for (const std::string_view base : op_names()) {
      for (const std::string_view dir : {"fwd", "bwd"}) {
        const std::string variant = "cpu." + std::string(base) + "." + std::string(dir) + "." + std::string(impl);
        benchmark::RegisterBenchmark(("BM_Busy/" + variant).c_str(), [variant](benchmark::State& s) {
          busy(s, variant);
        })->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(30);
      }
    }
  }
  auto* t = benchmark::RegisterBenchmark("BM_SerialThreshold", serial_threshold);
  for (const std::int64_t elements : {4096, 8192, 16384, 32768, 65536, 131072, 262144}) {
    for (const int team : {1, 2}) t->Args({elements, team});
  }
  t->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace opreg::bench

int main(int argc, char** argv) {
  opreg::bench::register_all();
  return opreg::bench::run_benchmarks(argc, argv);
}
