// `opreg bench`'s JSON and CSV (see bench_output.h).
#include "bench_output.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "opreg/ops.h"
#include "registry/fail.h"

namespace opreg::cli {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Liger's BenchmarkDataCSVRow, in its order, then opreg's columns.
constexpr std::string_view kLigerColumns[] = {"kernel_name", "kernel_provider", "kernel_operation_mode",
                                              "metric_name", "metric_unit",     "x_name",
                                              "x_label",     "x_value",         "y_value_50",
                                              "y_value_20",  "y_value_80",      "extra_benchmark_config_str",
                                              "gpu_name",    "timestamp",       "liger_version"};
constexpr std::string_view kExtraColumns[] = {"device",       "emulated",         "timer",   "estimate",
                                              "status",       "gbps_50",          "gbps_20", "gbps_80",
                                              "ceiling_gbps", "ceiling_fraction", "note"};

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += fmt::format("\\u{:04x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A number as JSON has it (17 significant digits round-trip a double), null when not finite.
std::string json_number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

// RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled.
std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Liger writes a missing value as Python's float('nan'): "nan".
std::string csv_number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "nan"; }

double ms_or_nan(const BenchPoint& p, double ms) { return p.status == "ok" ? ms : kNaN; }

// What a path that is not a regular file is, for the errors.
std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

[[noreturn]] void cannot_write(const std::string& out_dir, const std::string& path, std::string_view why) {
  fail(ErrorKind::invalid_argument, "bench: --out {}: cannot write {}: {}", out_dir, path, why);
}

// Opens `path` for writing without truncating it and without blocking (a FIFO in its place fails
// with ENXIO or is refused below); `created`: whether this call made the file.
int open_output(const std::string& out_dir, const std::string& path, bool& created) {
  constexpr int kFlags = O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  int fd = ::open(path.c_str(), kFlags | O_CREAT | O_EXCL, 0666);
  created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = ::open(path.c_str(), kFlags);
  if (fd < 0) cannot_write(out_dir, path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = fmt::format("not a regular file ({})", file_kind(st.st_mode));
    ::close(fd);
    cannot_write(out_dir, path, why);
  }
  return fd;
}

}  // namespace

OutputFile::OutputFile(const std::string& out_dir, const std::string& path) : path_(path) {
  fd_ = open_output(out_dir, path, created_);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (created_ && !written_) ::unlink(path_.c_str());
}

void OutputFile::write(std::string_view text) {
  auto lost = [&](int err) { fail(ErrorKind::internal, "bench: cannot write {}: {}", path_, std::strerror(err)); };
  if (fd_ < 0) lost(EBADF);
  written_ = true;  // from here on the file is this run's, whatever happens
  if (::ftruncate(fd_, 0) != 0) lost(errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pwrite(fd_, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) lost(n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) lost(errno);
}

void probe_output(const std::string& out_dir, const std::string& path) {
  bool created = false;
  const int fd = open_output(out_dir, path, created);
  ::close(fd);
  if (created) ::unlink(path.c_str());
}

double gbps(const BenchPoint& point, double ms) {
  if (point.status != "ok" || !(ms > 0)) return kNaN;
  return static_cast<double>(point.bytes) / (ms * 1e6);
}

std::string bench_json(const std::vector<BenchRecord>& records) {
  std::string out = "[";
  for (std::size_t r = 0; r < records.size(); ++r) {
    const BenchRecord& rec = records[r];
    auto list = [&](auto&& value) {
      std::vector<std::string> items;
      for (const auto& p : rec.points) items.push_back(value(p));
      return fmt::format("[{}]", fmt::join(items, ", "));
    };
    auto ms = [&](double BenchPoint::*field) {
      return list([&](const BenchPoint& p) { return json_number(ms_or_nan(p, p.*field)); });
    };
    auto rate = [&](double BenchPoint::*field) {
      return list([&](const BenchPoint& p) { return json_number(gbps(p, p.*field)); });
    };
    out += r == 0 ? "\n" : ",\n";
    out += "  {\n";
    out += fmt::format("    \"kernel_name\": {},\n", json_string(rec.kernel_name));
    out += fmt::format("    \"kernel_provider\": {},\n", json_string(rec.provider));
    out += "    \"metric_name\": \"speed\",\n    \"metric_unit\": \"ms\",\n";
    out += fmt::format("    \"gpu_name\": {},\n", json_string(rec.gpu_name));
    out += "    \"x_name\": \"H\",\n    \"x_label\": \"hidden size\",\n";
    out += fmt::format("    \"x_values\": {},\n", list([](const BenchPoint& p) { return std::to_string(p.hidden); }));
    out += fmt::format("    \"y_values_50\": {},\n", ms(&BenchPoint::ms_50));
    out += fmt::format("    \"y_values_20\": {},\n", ms(&BenchPoint::ms_20));
    out += fmt::format("    \"y_values_80\": {},\n", ms(&BenchPoint::ms_80));
    out += fmt::format("    \"timestamp\": {},\n", json_string(rec.timestamp));
    out += fmt::format("    \"kernel_operation_mode\": {},\n", json_string(to_string(rec.mode)));
    out += fmt::format("    \"extra_benchmark_config_str\": {},\n", json_string(rec.config));
    out += fmt::format("    \"liger_version\": {},\n", json_string(rec.version));
    out += fmt::format("    \"device\": {},\n", json_string(rec.device));
    out += fmt::format("    \"dtype\": {},\n", json_string(rec.dtype));
    out += fmt::format("    \"emulated\": {},\n", rec.emulated ? "true" : "false");
    out += fmt::format("    \"timer\": {},\n", json_string(rec.timer));
    out += fmt::format("    \"estimate\": {},\n", rec.estimate ? "true" : "false");
    out += fmt::format("    \"gbps_values_50\": {},\n", rate(&BenchPoint::ms_50));
    out += fmt::format("    \"gbps_values_20\": {},\n", rate(&BenchPoint::ms_20));
    out += fmt::format("    \"gbps_values_80\": {},\n", rate(&BenchPoint::ms_80));
    out += fmt::format("    \"ceiling_gbps\": {},\n", json_number(rec.ceiling_gbps > 0 ? rec.ceiling_gbps : kNaN));
    out += fmt::format("    \"ceiling_fraction_50\": {},\n", list([&](const BenchPoint& p) {
                         return json_number(rec.ceiling_gbps > 0 ? gbps(p, p.ms_50) / rec.ceiling_gbps : kNaN);
                       }));
    out += fmt::format("    \"bytes\": {},\n", list([](const BenchPoint& p) { return std::to_string(p.bytes); }));
    out += fmt::format("    \"runs\": {},\n", list([](const BenchPoint& p) { return std::to_string(p.runs); }));
    out += fmt::format("    \"status\": {},\n", list([](const BenchPoint& p) { return json_string(p.status); }));
    out += fmt::format("    \"notes\": {}\n", list([](const BenchPoint& p) { return json_string(p.note); }));
    out += "  }";
  }
  out += records.empty() ? "]\n" : "\n]\n";
  return out;
}

std::string bench_csv(const std::vector<BenchRecord>& records) {
  std::string out;
  std::vector<std::string_view> header(std::begin(kLigerColumns), std::end(kLigerColumns));
  header.insert(header.end(), std::begin(kExtraColumns), std::end(kExtraColumns));
  out += fmt::format("{}\n", fmt::join(header, ","));
  for (const BenchRecord& rec : records) {
    for (const BenchPoint& p : rec.points) {
      const double g50 = gbps(p, p.ms_50);
      const std::string cells[] = {csv_field(rec.kernel_name),
                                   csv_field(rec.provider),
                                   std::string(to_string(rec.mode)),
                                   "speed",
                                   "ms",
                                   "H",
                                   "hidden size",
                                   std::to_string(p.hidden),
                                   csv_number(ms_or_nan(p, p.ms_50)),
                                   csv_number(ms_or_nan(p, p.ms_20)),
                                   csv_number(ms_or_nan(p, p.ms_80)),
                                   csv_field(rec.config),
                                   csv_field(rec.gpu_name),
                                   csv_field(rec.timestamp),
                                   csv_field(rec.version),
                                   csv_field(rec.device),
                                   rec.emulated ? "1" : "0",
                                   csv_field(rec.timer),
                                   rec.estimate ? "1" : "0",
                                   csv_field(p.status),
                                   csv_number(g50),
                                   csv_number(gbps(p, p.ms_20)),
                                   csv_number(gbps(p, p.ms_80)),
                                   csv_number(rec.ceiling_gbps > 0 ? rec.ceiling_gbps : kNaN),
                                   csv_number(rec.ceiling_gbps > 0 ? g50 / rec.ceiling_gbps : kNaN),
                                   csv_field(p.note)};
      out += fmt::format("{}\n", fmt::join(cells, ","));
    }
  }
  return out;
}

namespace {

// RFC 4180 records: quoted fields may hold commas, doubled quotes and line breaks. `lines` gets
// the line (from 1) on which each record starts.
std::vector<std::vector<std::string>> parse_csv(const std::string& text, std::vector<std::size_t>& lines) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  bool any = false;  // the current row has begun
  std::size_t line = 1;
  std::size_t row_line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        line += c == '\n' || (c == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'));
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++line;
      if (any || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
        lines.push_back(row_line);
      }
      row.clear();
      field.clear();
      any = false;
      row_line = line;
    } else {
      field += c;
      any = true;
    }
  }
  if (any || !field.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
    lines.push_back(row_line);
  }
  return rows;
}

// The contents of --compare's file: a regular file (a FIFO would block, a device such as /dev/zero
// never ends) of at most kMaxCompareBytes.
std::string read_compare_file(const std::string& path) {
  auto refuse = [&](std::string_view why) { fail(ErrorKind::invalid_argument, "bench: --compare {}: {}", path, why); };
  auto check = [&](const struct stat& st) {
    if (!S_ISREG(st.st_mode)) {
      refuse(fmt::format("not a regular file ({}); give a CSV file of Liger-Kernel's benchmark schema",
                         file_kind(st.st_mode)));
    }
    if (static_cast<std::uint64_t>(st.st_size) > kMaxCompareBytes) {
      refuse(fmt::format("{} bytes, more than the {} (64 MiB) accepted", st.st_size, kMaxCompareBytes));
    }
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) refuse(fmt::format("cannot open it: {}", std::strerror(errno)));
  check(st);
  // O_NONBLOCK: should the path become a FIFO between stat and open, opening does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) refuse(fmt::format("cannot open it: {}", std::strerror(errno)));
  std::string text;
  try {
    if (::fstat(fd, &st) != 0) refuse(fmt::format("cannot read it: {}", std::strerror(errno)));
    check(st);
    text.resize(static_cast<std::size_t>(st.st_size) + 1);
    std::size_t done = 0;
    while (true) {
      if (done == text.size()) {
        if (done > kMaxCompareBytes) {
          refuse(fmt::format("more than the {} bytes (64 MiB) accepted (it grew while read)", kMaxCompareBytes));
        }
        text.resize(std::min<std::size_t>(text.size() * 2, kMaxCompareBytes + 1));
      }
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) refuse(fmt::format("cannot read it: {}", std::strerror(errno)));
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    text.resize(done);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return text;
}

// The value of "key" in a config string as Python's json.dumps writes it ({"M": 2048, "dtype":
// "torch.bfloat16"}): a string without its quotes, or a number's text.
std::optional<std::string> config_value(std::string_view config, std::string_view key) {
  const std::string quoted_key = fmt::format("\"{}\"", key);
  const auto at = config.find(quoted_key);
  if (at == std::string_view::npos) return std::nullopt;
  auto pos = config.find(':', at + quoted_key.size());
  if (pos == std::string_view::npos) return std::nullopt;
  pos = config.find_first_not_of(' ', pos + 1);
  if (pos == std::string_view::npos) return std::nullopt;
  if (config[pos] == '"') {
    const auto end = config.find('"', pos + 1);
    if (end == std::string_view::npos) return std::nullopt;
    return std::string(config.substr(pos + 1, end - pos - 1));
  }
  const auto end = config.find_first_of(",}", pos);
  std::string value(config.substr(pos, end == std::string_view::npos ? config.npos : end - pos));
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

std::optional<std::int64_t> to_int(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v < 1) return std::nullopt;
  return v;
}

double to_double(const std::string& text) {
  double v = kNaN;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return kNaN;
  return v;
}

}  // namespace

std::vector<BenchRecord> read_compare_csv(const std::string& path, const std::vector<std::string>& ops,
                                          std::vector<std::string>& skipped) {
  std::vector<std::size_t> lines;
  const auto rows = parse_csv(read_compare_file(path), lines);
  if (rows.empty()) fail(ErrorKind::invalid_argument, "bench: --compare {}: the file is empty", path);
  std::map<std::string, std::size_t> column;
  for (std::size_t i = 0; i < rows[0].size(); ++i) column[rows[0][i]] = i;
  std::vector<std::string_view> missing;
  for (const auto name : kLigerColumns) {
    if (name != "liger_version" && !column.contains(std::string(name))) missing.push_back(name);
  }
  if (!missing.empty()) {
    fail(ErrorKind::invalid_argument, "bench: --compare {}: not a CSV of Liger-Kernel's benchmark schema (no {})", path,
         fmt::join(missing, ", "));
  }
  struct Skips {
    int count = 0;
    std::string first;  // the first such row: its line, and the detail if any
  };
  std::map<std::string, Skips> skip_counts;
  std::map<std::string, std::size_t> record_of;
  std::vector<BenchRecord> records;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    auto cell = [&](std::string_view name) -> std::string {
      const auto it = column.find(std::string(name));
      return it != column.end() && it->second < row.size() ? row[it->second] : std::string();
    };
    auto skip = [&](std::string why, std::string_view detail = {}) {
      Skips& s = skip_counts[std::move(why)];
      if (s.count++ == 0)
        s.first = detail.empty() ? fmt::format("line {}", lines[r]) : fmt::format("line {}: {}", lines[r], detail);
    };
    const std::string op = cell("kernel_name");
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
      skip("kernel_name not among the benchmarked ops");
      continue;
    }
    if (cell("metric_name") != "speed" || cell("metric_unit") != "ms") {
      skip("not a speed in ms");
      continue;
    }
    if (op == "group_norm") {
      skip("group_norm: Liger's x is the channel count, not converted");
      continue;
    }
    if (cell("x_name") != "H" && cell("x_label") != "hidden size") {
      skip(fmt::format("{}: x is not the hidden size (x_name {})", op, cell("x_name")));
      continue;
    }
    const std::string mode_text = cell("kernel_operation_mode");
    std::optional<BenchMode> mode;
    for (const auto m : {BenchMode::forward, BenchMode::backward, BenchMode::full}) {
      if (mode_text == to_string(m)) mode = m;
    }
    const std::string config = cell("extra_benchmark_config_str");
    const auto hidden = to_int(cell("x_value"));
    const auto m_rows = to_int(config_value(config, "M").value_or(""));
    const std::string torch_dtype = config_value(config, "dtype").value_or("");
    std::optional<DType> dtype;
    for (const auto d : {DType::bf16, DType::f16, DType::f32}) {
      const std::string_view torch_name = d == DType::bf16  ? "torch.bfloat16"
                                          : d == DType::f16 ? "torch.float16"
                                                            : "torch.float32";
      if (torch_dtype == torch_name) dtype = d;
    }
    if (!mode || !hidden || !m_rows || !dtype) {
      skip("no mode forward/backward/full, x_value, config M or config dtype (torch.bfloat16/float16/float32)");
      continue;
    }
    BenchPoint p;
    p.hidden = *hidden;
    p.ms_50 = to_double(cell("y_value_50"));
    p.ms_20 = to_double(cell("y_value_20"));
    p.ms_80 = to_double(cell("y_value_80"));
    if (!(p.ms_50 > 0)) {
      skip("no time (y_value_50)");
      continue;
    }
    // M x hidden past int64 elements, or past 2^64 bytes, is one row the byte model cannot count,
    // not the end of the run.
    try {
      const Shape shape{*m_rows, *hidden};
      const std::uint64_t fwd =
          *mode != BenchMode::backward ? bytes_moved(op, Direction::fwd, shape, *dtype, *dtype) : 0;
      const std::uint64_t bwd =
          *mode != BenchMode::forward ? bytes_moved(op, Direction::bwd, shape, *dtype, *dtype) : 0;
      if (__builtin_add_overflow(fwd, bwd, &p.bytes)) {
        fail(ErrorKind::invalid_argument,
             "bytes_moved({} full): shape [{}] ({}): forward and backward move 2^64 bytes or more", op, shape.str(),
             to_string(*dtype));
      }
    } catch (const Error& e) {
      skip(fmt::format("{}: M x x_value too large for opreg's byte model", op), e.what());
      continue;
    }
    p.runs = 0;
    const std::string key =
        fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}", op, cell("kernel_provider"), mode_text, cell("gpu_name"), config);
    auto [it, fresh] = record_of.try_emplace(key, records.size());
    if (fresh) {
      BenchRecord rec;
      rec.kernel_name = op;
      rec.provider = cell("kernel_provider");
      rec.mode = *mode;
      rec.dtype = std::string(to_string(*dtype));
      rec.gpu_name = cell("gpu_name");
      rec.timer = fmt::format("from {}", path);
      rec.config = config;
      rec.timestamp = cell("timestamp");
      rec.version = cell("liger_version");
      records.push_back(std::move(rec));
    }
    auto& points = records[it->second].points;
    if (std::none_of(points.begin(), points.end(), [&](const BenchPoint& q) { return q.hidden == p.hidden; })) {
      points.push_back(p);
    } else {
      skip("a second row for the same provider, mode, GPU, config and x (the first is kept)");
    }
  }
  for (auto& rec : records) {
    std::sort(rec.points.begin(), rec.points.end(), [](const auto& a, const auto& b) { return a.hidden < b.hidden; });
  }
  for (const auto& [why, s] : skip_counts) {
    skipped.push_back(fmt::format("{} row{}: {} (first: {})", s.count, s.count == 1 ? "" : "s", why, s.first));
  }
  return records;
}

}  // namespace opreg::cli
