// oneDNN's layer normalization as the cpu benchmarks' peer (issue 24): forward (training: mean and
// variance out, scale and shift) and backward (diff_src, diff_scale, diff_shift) on the shapes and
// with the timing of bench_cpu_ops (rows 4096 x hidden 1024 .. 32768, the same case names
// fwd/layer_norm/f32/4096, real time, min time 0.3 s per repetition), at the same thread count.
// Bytes per second are opreg's byte model (opreg::bytes_moved) of the same problem, so GB/s and
// times compare one to one with bench_cpu_ops's.
//
// Before a case is timed, oneDNN's outputs on it are checked against opreg's cpu layer_norm (the
// registry's default choice) on the same inputs, with opreg's tolerance table (src/ops/problem.h):
// y, mean, rstd (oneDNN's 1 / sqrt(variance + eps)), and with oneDNN's backward given its own
// statistics, dx, dweight and dbias. A case that differs is skipped with the errors as its error
// message, and the program exits 1. Counter check_err: the largest of those errors (<= 1 passes).
//
// The bf16 cases (bf16 data, f32 scale and shift as oneDNN takes them) are registered too: where
// oneDNN has no implementation for them (2.6.3 on an AVX2-only machine has none) the case is skipped
// with oneDNN's refusal as its error message; where it has one, the case is timed unchecked.
//
// Threads: oneDNN runs on the OpenMP (or TBB) runtime it was built with; this program sets the
// OpenMP runtime's thread count with omp_set_num_threads of that runtime to --threads N (default:
// opreg's, OPREG_NUM_THREADS or the machine's cores) and fails when oneDNN uses any other runtime.
//
// usage: peer_onednn_cpu [--threads N] [--benchmark_filter=fwd/layer_norm/f32/4096] [google benchmark flags]
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/parallel.h"
#include "bench_cpu_common.h"
#include "ops/problem.h"

namespace opreg::bench {
namespace {

using Clock = std::chrono::steady_clock;
using dnnl::memory;
using Flags = dnnl::normalization_flags;

constexpr std::int64_t kRows = 4096;
constexpr float kEps = 1e-5F;  // opreg's and torch.nn.LayerNorm's default

const char* runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_OMP:
      return "omp";
    case DNNL_RUNTIME_TBB:
      return "tbb";
    case DNNL_RUNTIME_SEQ:
      return "sequential";
    case DNNL_RUNTIME_THREADPOOL:
      return "threadpool";
    default:
      return "other";
  }
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

std::string status_name(dnnl_status_t status) {
  switch (status) {
    case dnnl_out_of_memory:
      return "out_of_memory";
    case dnnl_invalid_arguments:
      return "invalid_arguments";
    case dnnl_unimplemented:
      return "unimplemented";
    default:
      return std::to_string(static_cast<int>(status));
  }
}

// Sets the thread count of the OpenMP runtime oneDNN was linked with (looked up in the process, so
// it is that library's omp_set_num_threads and not another runtime's); returns the count it reports.
int set_onednn_threads(int threads) {
  const unsigned runtime = dnnl_version()->cpu_runtime;
  if (runtime != DNNL_RUNTIME_OMP) {
    std::fprintf(stderr,
                 "peer_onednn_cpu: oneDNN uses the %s cpu runtime; only OpenMP's thread count can be set here\n",
                 runtime_name(runtime));
    std::exit(2);
  }
  using SetFn = void (*)(int);
  using GetFn = int (*)();
  auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  auto get = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (set == nullptr || get == nullptr) {
    std::fprintf(stderr, "peer_onednn_cpu: oneDNN uses OpenMP but omp_set_num_threads is not in the process\n");
    std::exit(2);
  }
  set(threads);
  return get();
}

// max |got - want| / (atol + rtol |want|) over n values (NaN anywhere counts as infinite).
double max_err(const float* got, const float* want, std::size_t n, Tolerance tol) {
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double e = d / (tol.atol + tol.rtol * std::fabs(static_cast<double>(want[i])));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

// One problem of rows x hidden in one data type: the inputs, oneDNN's primitives and arguments.
// The parameters (scale, shift and their gradients) are f32 whatever the data type: oneDNN 2.6
// takes nothing else.
struct OneDnnLayerNorm {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::layer_normalization_forward::primitive_desc fwd_pd;
  dnnl::layer_normalization_backward::primitive_desc bwd_pd;
  dnnl::layer_normalization_forward fwd;
  dnnl::layer_normalization_backward bwd;
  std::unordered_map<int, memory> fwd_args;
  std::unordered_map<int, memory> bwd_args;
  Tensor x, dy, y, dx;                                  // data: f32 or bf16
  Tensor weight, bias, mean, variance, dweight, dbias;  // f32

  // Throws dnnl::error where oneDNN has no implementation for the data type.
  OneDnnLayerNorm(std::int64_t hidden, DType dtype) {
    const memory::dims dims{kRows, hidden};
    const auto dt = dtype == DType::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::desc data_md(dims, dt, memory::format_tag::ab);
    const Flags flags = Flags::use_scale | Flags::use_shift;
    fwd_pd = {{dnnl::prop_kind::forward_training, data_md, kEps, flags}, engine};
    bwd_pd = {{dnnl::prop_kind::backward, data_md, data_md, kEps, flags}, engine, fwd_pd};
    fwd = dnnl::layer_normalization_forward(fwd_pd);
    bwd = dnnl::layer_normalization_backward(bwd_pd);

    const Shape data{kRows, hidden};
    x = Tensor::empty(data, dtype);
    dy = Tensor::empty(data, dtype);
    y = Tensor::empty(data, dtype);
    dx = Tensor::empty(data, dtype);
    for (Tensor* p : {&weight, &bias, &dweight, &dbias}) *p = Tensor::empty({hidden}, DType::f32);
    for (Tensor* p : {&mean, &variance}) *p = Tensor::empty({kRows}, DType::f32);
    fill_pattern(x, 1);
    fill_pattern(weight, 2);
    fill_pattern(bias, 3);
    fill_pattern(dy, 4);

    const memory::desc param_md({hidden}, memory::data_type::f32, memory::format_tag::a);
    auto mem = [&](const memory::desc& md, Tensor& t) { return memory(md, engine, t.data()); };
    fwd_args = {{DNNL_ARG_SRC, mem(data_md, x)},
                {DNNL_ARG_SCALE, mem(param_md, weight)},
                {DNNL_ARG_SHIFT, mem(param_md, bias)},
                {DNNL_ARG_DST, mem(data_md, y)},
                {DNNL_ARG_MEAN, mem(fwd_pd.mean_desc(), mean)},
                {DNNL_ARG_VARIANCE, mem(fwd_pd.variance_desc(), variance)}};
    bwd_args = {{DNNL_ARG_SRC, fwd_args.at(DNNL_ARG_SRC)},     {DNNL_ARG_DIFF_DST, mem(data_md, dy)},
                {DNNL_ARG_MEAN, fwd_args.at(DNNL_ARG_MEAN)},   {DNNL_ARG_VARIANCE, fwd_args.at(DNNL_ARG_VARIANCE)},
                {DNNL_ARG_SCALE, fwd_args.at(DNNL_ARG_SCALE)}, {DNNL_ARG_SHIFT, fwd_args.at(DNNL_ARG_SHIFT)},
                {DNNL_ARG_DIFF_SRC, mem(data_md, dx)},         {DNNL_ARG_DIFF_SCALE, mem(param_md, dweight)},
                {DNNL_ARG_DIFF_SHIFT, mem(param_md, dbias)}};
  }
  void forward() {
    fwd.execute(stream, fwd_args);
    stream.wait();
  }
  void backward() {
    bwd.execute(stream, bwd_args);
    stream.wait();
  }
};

// Runs oneDNN's forward and backward once and opreg's on the same inputs; returns the largest
// error and describes every output's in `report`.
double check_against_opreg(OneDnnLayerNorm& d, std::string& report) {
  d.forward();
  d.backward();
  const NormOut f = layer_norm(d.x, d.weight, d.bias, kEps);
  const NormGrads g = layer_norm_backward(d.dy, d.x, d.weight, f.mean, f.rstd);
  const auto rows = static_cast<std::size_t>(kRows);
  std::vector<float> rstd(rows);
  for (std::size_t r = 0; r < rows; ++r) rstd[r] = 1.0F / std::sqrt(d.variance.data_as<float>()[r] + kEps);
  struct Out {
    const char* name;
    const float* got;
    const float* want;
    std::size_t n;
    OutputKind kind;
  };
  const auto data = static_cast<std::size_t>(d.x.numel());
  const auto params = static_cast<std::size_t>(d.weight.numel());
  const Out outs[] = {{"y", d.y.data_as<float>(), f.y.data_as<float>(), data, OutputKind::y},
                      {"mean", d.mean.data_as<float>(), f.mean.data_as<float>(), rows, OutputKind::stat},
                      {"rstd", rstd.data(), f.rstd.data_as<float>(), rows, OutputKind::stat},
                      {"dx", d.dx.data_as<float>(), g.dx.data_as<float>(), data, OutputKind::dx},
                      {"dweight", d.dweight.data_as<float>(), g.dweight.data_as<float>(), params, OutputKind::dw},
                      {"dbias", d.dbias.data_as<float>(), g.dbias.data_as<float>(), params, OutputKind::dw}};
  double worst = 0;
  for (const Out& o : outs) {
    const double e = max_err(o.got, o.want, o.n, tolerance(o.kind, DType::f32));
    char line[64];
    std::snprintf(line, sizeof(line), "%s%s err=%.3g", report.empty() ? "" : " ", o.name, e);
    report += line;
    worst = std::max(worst, e);
  }
  return worst;
}

struct CheckResult {
  double err = 0;
  std::string report;
};
std::map<std::int64_t, CheckResult> g_checks;  // per hidden: each case is checked once
bool g_check_failed = false;
int g_threads = 0;

void run_case(benchmark::State& state, const std::string& dir, std::int64_t hidden, DType dtype) {
  std::unique_ptr<OneDnnLayerNorm> d;
  try {
    d = std::make_unique<OneDnnLayerNorm>(hidden, dtype);
  } catch (const dnnl::error& e) {
    state.SkipWithError(
        (std::string("oneDNN refuses: ") + e.what() + " (status " + status_name(e.status) + ")").c_str());
    return;
  }
  if (dtype == DType::f32) {
    auto it = g_checks.find(hidden);
    if (it == g_checks.end()) {
      CheckResult c;
      c.err = check_against_opreg(*d, c.report);
      std::fprintf(stderr, "check layer_norm f32 %lldx%lld against opreg: %s -> %s\n", static_cast<long long>(kRows),
                   static_cast<long long>(hidden), c.report.c_str(), c.err <= 1.0 ? "pass" : "FAIL");
      g_check_failed = g_check_failed || !(c.err <= 1.0);
      it = g_checks.emplace(hidden, c).first;
    }
    if (!(it->second.err <= 1.0)) {
      state.SkipWithError(("oneDNN differs from opreg: " + it->second.report).c_str());
      return;
    }
    state.counters["check_err"] = it->second.err;
  }
  const bool forward = dir == "fwd";
  if (forward) {
    d->forward();  // warm: page faults, oneDNN's scratchpad
  } else {
    d->backward();
  }
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    if (forward) {
      d->forward();
    } else {
      d->backward();
    }
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  // opreg's byte model of the same problem with parameters in the data's dtype, as bench_cpu_ops
  // runs it: for f32 exactly oneDNN's bytes; for bf16 oneDNN's f32 parameters move 2 bytes more per
  // parameter element than the model counts.
  const std::uint64_t bytes =
      bytes_moved("layer_norm", forward ? Direction::fwd : Direction::bwd, Shape{kRows, hidden}, dtype, dtype);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["GBps"] = static_cast<double>(bytes) * static_cast<double>(state.iterations()) / seconds / 1e9;
  const auto& pd = forward ? static_cast<const dnnl::primitive_desc&>(d->fwd_pd) : d->bwd_pd;
  state.SetLabel(std::string("onednn ") + pd.impl_info_str() + " threads=" + std::to_string(g_threads));
}

void register_all() {
  for (const std::string dir : {"fwd", "bwd"}) {
    for (const DType dtype : {DType::bf16, DType::f32}) {
      for (std::int64_t hidden = 1024; hidden <= 32768; hidden *= 2) {
        const std::string name = dir + "/layer_norm/" + std::string(to_string(dtype)) + "/" + std::to_string(hidden);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [dir, hidden, dtype](benchmark::State& s) { run_case(s, dir, hidden, dtype); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.3);
      }
    }
  }
}

constexpr const char* kUsage =
    "peer_onednn_cpu: oneDNN's layer normalization (forward training and backward, f32; bf16 where oneDNN\n"
    "implements it) on bench_cpu_ops's shapes and case names, checked against opreg's cpu layer_norm first.\n"
    "usage: peer_onednn_cpu [--threads N] [google benchmark flags, e.g. --benchmark_filter=fwd/layer_norm/f32/4096\n"
    "                        --benchmark_format=json --benchmark_repetitions=3]\n"
    "  --threads N   oneDNN's OpenMP thread count (default: opreg's: OPREG_NUM_THREADS or the machine's cores)\n"
    "Exit status 1 when oneDNN's results differ from opreg's, 2 for bad arguments.\n";

}  // namespace
}  // namespace opreg::bench

int main(int argc, char** argv) {
  using namespace opreg::bench;
  int threads = opreg::default_registry().config().num_threads;
  if (threads <= 0) threads = opreg::cpu::machine_threads();
  // Takes --threads out of argv before Google Benchmark sees it.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::string value;
    if (arg == "--threads" && i + 1 < argc) {
      value = argv[++i];
    } else if (arg.rfind("--threads=", 0) == 0) {
      value = arg.substr(10);
    } else if (arg == "--threads") {
      std::fprintf(stderr, "peer_onednn_cpu: --threads needs a value\n%s", kUsage);
      return 2;
    } else {
      argv[kept++] = argv[i];
      continue;
    }
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n < 1 || n > 1024) {
      std::fprintf(stderr, "peer_onednn_cpu: --threads %s: want a whole number from 1 to 1024\n", value.c_str());
      return 2;
    }
    threads = static_cast<int>(n);
  }
  argc = kept;
  g_threads = set_onednn_threads(threads);
  const dnnl_version_t* v = dnnl_version();
  benchmark::AddCustomContext("onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                            std::to_string(v->patch) + " (" + (v->hash != nullptr ? v->hash : "?") +
                                            ")");
  benchmark::AddCustomContext("onednn_cpu_runtime", runtime_name(v->cpu_runtime));
  benchmark::AddCustomContext("onednn_threads", std::to_string(g_threads));
  benchmark::AddCustomContext("onednn_isa", isa_name(dnnl::get_effective_cpu_isa()));
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return g_check_failed ? 1 : 0;
}
