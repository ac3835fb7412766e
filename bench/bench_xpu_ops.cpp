// Every op direction on the xpu backend's OpenCL CPU device (PoCL: emulated, a CPU running the
// OpenCL C kernels, not an Intel GPU) beside the cpu backend, same problem, same run: for each
// case the two are timed alternately, rep by rep, so both see the same load; the table gives
// each one's median wall time and the ratio xpu / cpu.
//
// Problems come from the shared problem factory (src/ops/problem.h: seeded inputs, parameters in
// x's dtype); shapes are rows x hidden, and for group_norm N = 32, C = hidden / 32, HW = rows
// with 32 groups (the same element count). Each xpu call is followed by a synchronize of its
// queue (launches are asynchronous); the context (program build, kernel warm-up) and one call
// of each problem happen before timing.
//
// Threads: the cpu backend uses OPREG_NUM_THREADS (default 2 here: the machine's threads);
// PoCL's pthread device runs work-groups on its own pool, POCL_MAX_PTHREAD_COUNT (default: every
// core). Both are printed.
//
// usage: bench_xpu_ops [--rows 1024,4096] [--hidden 1024,4096,16384] [--dtype bf16,f16,f32]
//                      [--op rms_norm.fwd,...] [--reps 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "opreg/ops.h"
#include "bench_xpu_common.h"
#include "opreg/registry.h"
#include "ops/problem.h"

namespace {

using namespace opreg;
using opreg::bench::xpu_cpu_device;
using Clock = std::chrono::steady_clock;

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

ProblemSpec spec_for(const std::string& op, std::int64_t rows, std::int64_t hidden, DType dtype) {
  ProblemSpec spec;
  spec.op = op;
  spec.dtype = dtype;
  spec.wdtype = dtype;
  if (op.rfind("group_norm", 0) == 0) {
    spec.shape = Shape{32, hidden / 32, rows};
    spec.groups = 32;
  } else {
    spec.shape = Shape{rows, hidden};
  }
  return spec;
}

double seconds_of(Problem& p, std::string* variant) {
  const auto t0 = Clock::now();
  const DispatchResult r = p.run();
  p.synchronize();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (variant != nullptr) *variant = r.variant != nullptr ? r.variant->name : "?";
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> rows_list{"1024"};
  std::vector<std::string> hidden_list{"1024", "4096", "16384"};
  std::vector<std::string> dtypes{"bf16", "f16", "f32"};
  std::vector<std::string> ops;
  int reps = 5;
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(
        "usage: bench_xpu_ops [--rows 1024,4096] [--hidden 1024,4096,16384] [--dtype bf16,f16,f32]\n"
        "                     [--op rms_norm.fwd,...] [--reps 5]\n"
        "Every op direction on the xpu OpenCL CPU device (PoCL, emulated) beside the cpu backend:\n"
        "median wall ms of alternating reps and the ratio xpu / cpu. Defaults: the values shown,\n"
        "rows 1024, every op fwd and bwd.\n");
    return 0;
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "bench_xpu_ops: %s needs a value (--help for the usage)\n", argv[argc - 1]);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--rows") {
      rows_list = split(value);
    } else if (flag == "--hidden") {
      hidden_list = split(value);
    } else if (flag == "--dtype") {
      dtypes = split(value);
      for (const std::string& dt : dtypes) {
        if (dt != "bf16" && dt != "f16" && dt != "f32") {
          std::fprintf(stderr, "bench_xpu_ops: --dtype %s: accepted bf16, f16, f32\n", dt.c_str());
          return 2;
        }
      }
    } else if (flag == "--op") {
      ops = split(value);
    } else if (flag == "--reps") {
      reps = std::max(1, std::atoi(value.c_str()));
    } else {
      std::fprintf(stderr, "bench_xpu_ops: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (ops.empty()) {
    for (const char* dir : {"fwd", "bwd"}) {
      for (const std::string_view base : op_names()) ops.push_back(std::string(base) + "." + dir);
    }
  }
  Device xpu;
  std::string xpu_label;
  if (!xpu_cpu_device(&xpu, &xpu_label)) {
    std::fprintf(stderr, "bench_xpu_ops: no xpu OpenCL CPU device (PoCL) here; see `opreg devices`\n");
    return 3;
  }
  const char* pocl_threads = std::getenv("POCL_MAX_PTHREAD_COUNT");
  std::printf("xpu: %s, PoCL CPU device (emulated), PoCL threads %s\n", xpu_label.c_str(),
              pocl_threads != nullptr ? pocl_threads : "default (one per core)");
  std::printf("cpu: opreg cpu backend, threads %d (0 = the machine's)\n", default_registry().config().num_threads);
  std::printf("median of %d alternating reps, wall ms\n\n", reps);
  std::printf("| op | dtype | shape | xpu ms | cpu ms | xpu / cpu | xpu variant |\n| --- | --- | --- | --- | --- | --- | --- |\n");
  for (const std::string& op : ops) {
    for (const std::string& dt : dtypes) {
      const DType dtype = parse_dtype(dt);  // one of the three --dtype accepts
      for (const std::string& r : rows_list) {
        for (const std::string& h : hidden_list) {
          const ProblemSpec spec = spec_for(op, std::atoll(r.c_str()), std::atoll(h.c_str()), dtype);
          Problem on_xpu(default_registry(), spec, xpu);
          Problem on_cpu(default_registry(), spec, Device{});
          std::string variant;
          seconds_of(on_xpu, &variant);
          seconds_of(on_cpu, nullptr);
          std::vector<double> tx;
          std::vector<double> tc;
          for (int i = 0; i < reps; ++i) {
            tx.push_back(seconds_of(on_xpu, nullptr));
            tc.push_back(seconds_of(on_cpu, nullptr));
          }
          const double mx = median(tx) * 1e3;
          const double mc = median(tc) * 1e3;
          std::printf("| %s | %s | %s | %.2f | %.2f | %.2fx | %s |\n", op.c_str(), dt.c_str(), spec.shape.str().c_str(),
                      mx, mc, mx / mc, variant.c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
