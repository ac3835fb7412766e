// `opreg bench`'s data: the records it measures, written in Liger-Kernel's benchmark schemas (the
// JSON list of BenchmarkData records, the CSV of BenchmarkDataCSVRow rows, both from Liger's
// benchmark/scripts/utils.py) with opreg's extra fields, and another such CSV read back for
// --compare.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench.h"

namespace opreg::cli {

// One hidden size of a record.
struct BenchPoint {
  std::int64_t hidden = 0;
  // ok: timed; fallback: the device had no variant, the cpu ran it (not timed); failed: the
  // check against the reference failed (not timed); error: the case could not run (note says why)
  std::string status = "ok";
  std::string note;
  double ms_20 = 0, ms_50 = 0, ms_80 = 0;  // NaN unless ok
  std::uint64_t bytes = 0;                 // the byte model's, for the case's shape
  int runs = 0;                            // timed runs
};

// One line of a plot: an op, a mode, a dtype, a device and a provider over the hidden sizes.
struct BenchRecord {
  std::string kernel_name;  // the op's base name
  std::string provider;     // opreg:<variant> (full: opreg:<fwd variant>+<bwd variant>), or a peer's
  BenchMode mode = BenchMode::forward;
  std::string dtype;     // bf16, f16, f32
  std::string device;    // npu:0 (empty for rows read from another CSV)
  std::string gpu_name;  // the device's name
  bool emulated = false;
  std::string timer;        // the clock's method
  bool estimate = false;    // the times are a model's estimate
  double ceiling_gbps = 0;  // the device's, 0: unknown
  std::string config;       // extra_benchmark_config_str, e.g. {"M": 2048, "dtype": "torch.bfloat16"}
  std::string timestamp;    // "%Y-%m-%d %H:%M:%S", local time, as Liger writes it
  std::string version;      // the liger_version column: the provider's version
  std::vector<BenchPoint> points;
};

double gbps(const BenchPoint& point, double ms);  // bytes / ms, NaN when not timed

// DIR/benchmark_data.json: a list of records with Liger's keys and opreg's extra ones.
void write_bench_json(const std::string& path, const std::vector<BenchRecord>& records);
// DIR/all_benchmark_data.csv: Liger's header, then opreg's extra columns.
void write_bench_csv(const std::string& path, const std::vector<BenchRecord>& records);

// The speed rows (ms) of `path`, a CSV of Liger's schema, for `ops` whose x is the hidden size,
// as one-point records with bytes from opreg's byte model (shape: M rows x hidden; dtype from the
// config's "dtype"). `skipped` gets one line per reason with its count. Throws opreg::Error for
// a file that cannot be read or lacks Liger's columns.
std::vector<BenchRecord> read_compare_csv(const std::string& path, const std::vector<std::string>& ops,
                                          std::vector<std::string>& skipped);

}  // namespace opreg::cli
