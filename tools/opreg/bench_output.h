// `opreg bench`'s data: the records it measures, written in Liger-Kernel's benchmark schemas (the
// JSON list of BenchmarkData records, the CSV of BenchmarkDataCSVRow rows, both from Liger's
// benchmark/scripts/utils.py) with opreg's extra fields, and another such CSV read back for
// --compare.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
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

// An output file, opened before the first case so that one that cannot be written (a directory
// in its place, a read-only or missing parent such as /proc/self) is an error before the run,
// not after it; written once at the end. Opening keeps an existing file's contents until
// write(); a file that open() created and nothing wrote is removed again when it goes away.
class OutputFile {
 public:
  // Throws opreg::Error (invalid argument) "bench: --out DIR: cannot write PATH: <the OS's reason>"
  // (or "not a regular file (a FIFO)").
  OutputFile(const std::string& out_dir, const std::string& path);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();
  // Replaces the contents with `text`. Throws opreg::Error (internal: the output is lost, exit 1)
  // naming the file and the OS's reason (no space left, ...).
  void write(std::string_view text);
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  bool created_ = false;
  bool written_ = false;
  std::string path_;
};

// Whether `path` could be written later by another program (the plot script's PNGs): an existing
// regular file opened for writing, else a file created and removed again. Throws as OutputFile.
void probe_output(const std::string& out_dir, const std::string& path);

// DIR/benchmark_data.json: a list of records with Liger's keys and opreg's extra ones.
std::string bench_json(const std::vector<BenchRecord>& records);
// DIR/all_benchmark_data.csv: Liger's header, then opreg's extra columns.
std::string bench_csv(const std::vector<BenchRecord>& records);

// The largest --compare file read: 64 MiB.
inline constexpr std::uint64_t kMaxCompareBytes = std::uint64_t{64} << 20;

// The speed rows (ms) of `path`, a CSV of Liger's schema, for `ops` whose x is the hidden size,
// as one-point records with bytes from opreg's byte model (shape: M rows x hidden; dtype from the
// config's "dtype"). `skipped` gets one line per reason with its count and its first row's line
// (a row whose shape the byte model cannot count, past 2^64 bytes, is one). Throws opreg::Error
// (invalid argument) for a path that is not a regular file (a FIFO, a device, a directory), a
// file over kMaxCompareBytes, one that cannot be read or one that lacks Liger's columns.
std::vector<BenchRecord> read_compare_csv(const std::string& path, const std::vector<std::string>& ops,
                                          std::vector<std::string>& skipped);

}  // namespace opreg::cli
