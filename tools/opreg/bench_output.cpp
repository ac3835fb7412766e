// `opreg bench`'s JSON and CSV (see bench_output.h).
#include "bench_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

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

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) fail(ErrorKind::invalid_argument, "bench: cannot write {}", path);
}

}  // namespace

double gbps(const BenchPoint& point, double ms) {
  if (point.status != "ok" || !(ms > 0)) return kNaN;
  return static_cast<double>(point.bytes) / (ms * 1e6);
}

void write_bench_json(const std::string& path, const std::vector<BenchRecord>& records) {
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
  write_file(path, out);
}

void write_bench_csv(const std::string& path, const std::vector<BenchRecord>& records) {
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
  write_file(path, out);
}

namespace {

// RFC 4180 records: quoted fields may hold commas, doubled quotes and line breaks.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  bool any = false;  // the current row has begun
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
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
      if (any || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
      }
      row.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (any || !field.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
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
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::invalid_argument, "bench: --compare {}: cannot open the file", path);
  std::stringstream text;
  text << in.rdbuf();
  const auto rows = parse_csv(text.str());
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
  std::map<std::string, int> skip_counts;
  std::map<std::string, std::size_t> record_of;
  std::vector<BenchRecord> records;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    auto cell = [&](std::string_view name) -> std::string {
      const auto it = column.find(std::string(name));
      return it != column.end() && it->second < row.size() ? row[it->second] : std::string();
    };
    auto skip = [&](std::string why) { ++skip_counts[std::move(why)]; };
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
    const Shape shape{*m_rows, *hidden};
    const bool fwd = *mode != BenchMode::backward;
    const bool bwd = *mode != BenchMode::forward;
    p.bytes = (fwd ? bytes_moved(op, Direction::fwd, shape, *dtype, *dtype) : 0) +
              (bwd ? bytes_moved(op, Direction::bwd, shape, *dtype, *dtype) : 0);
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
  for (const auto& [why, n] : skip_counts) skipped.push_back(fmt::format("{} row{}: {}", n, n == 1 ? "" : "s", why));
  return records;
}

}  // namespace opreg::cli
