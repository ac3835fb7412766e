// `opreg run`'s options (see run_options.h).
#include "run_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <utility>

#include "registry/fail.h"

namespace opreg::cli {
namespace {

[[noreturn]] void bad_value(std::string_view option, std::string_view value, std::string_view accepted) {
  bad_option_value("run", option, value, accepted);
}

// One of a fixed set of spellings; the error lists them all.
template <class T>
T pick(std::string_view option, std::string_view text, std::initializer_list<std::pair<std::string_view, T>> choices) {
  std::vector<std::string_view> names;
  for (const auto& [name, value] : choices) {
    if (name == text) return value;
    names.push_back(name);
  }
  bad_value(option, text, fmt::format("{}", fmt::join(names, ", ")));
}

}  // namespace

std::string_view option_value(std::string_view command, std::string_view name,
                              std::optional<std::string_view> inline_value, const std::vector<std::string_view>& args,
                              std::size_t& i) {
  if (inline_value) return *inline_value;
  if (i + 1 == args.size()) throw Usage{fmt::format("{}: {} needs a value", command, name)};
  return args[++i];
}

void bad_option_value(std::string_view command, std::string_view option, std::string_view value,
                      std::string_view accepted) {
  throw Usage{fmt::format("{}: invalid {} '{}'; accepted: {}", command, option, value, accepted)};
}

// A decimal number. One rule for the ends of the range: a value too large for a double is
// refused; one too small (1e-400) is what the nearest double is, 0 or a subnormal, as 4.9e-324 is.
double parse_number_value(std::string_view command, std::string_view option, std::string_view text, double lo,
                          double hi, std::string_view accepted) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool whole = !text.empty() && end == text.data() + text.size();
  if (whole && ec == std::errc::result_out_of_range) {
    value = std::strtod(std::string(text).c_str(), nullptr);  // the syntax is checked: underflow or overflow
  } else if (!whole || ec != std::errc{}) {
    bad_option_value(command, option, text, accepted);
  }
  if (!std::isfinite(value) || value < lo || value > hi) bad_option_value(command, option, text, accepted);
  return value;
}

RunOptions parse_run_args(const std::vector<std::string_view>& args) {
  RunOptions o;
  bool have_op = false;
  // Each option once: a second value would silently replace the first, and a bad first value
  // would never be looked at.
  std::vector<std::pair<std::string_view, std::string_view>> seen;  // option, its argument
  auto once = [&](std::string_view name, std::string_view arg) {
    for (const auto& [option, first] : seen) {
      if (option == name) throw Usage{fmt::format("run: {} is given twice ('{}' and '{}')", name, first, arg)};
    }
    seen.emplace_back(name, arg);
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (!arg.starts_with("-")) {
      if (have_op) throw Usage{fmt::format("run: unexpected argument '{}' (the op is '{}')", arg, o.op)};
      o.op = std::string(arg);
      have_op = true;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    if (name == "--inplace" || name == "--no-weight" || name == "--no-bias" || name == "--transposed") {
      if (inline_value) throw Usage{fmt::format("run: {} takes no value (got '{}')", name, arg)};
      once(name, arg);
      (name == "--inplace"     ? o.inplace
       : name == "--no-weight" ? o.no_weight
       : name == "--no-bias"   ? o.no_bias
                               : o.transposed) = true;
      continue;
    }
    static constexpr std::string_view kValued[] = {"--device", "--dtype",  "--wdtype",  "--shape", "--groups",
                                                   "--eps",    "--offset", "--casting", "--seed",  "--repeat",
                                                   "--tol-scale", "--values", "--rounding", "--kv-heads",
                                                   "--style", "--table"};
    if (std::find(std::begin(kValued), std::end(kValued), name) == std::end(kValued)) {
      throw Usage{fmt::format("run: unknown option '{}'", name)};
    }
    const std::string_view value = option_value("run", name, inline_value, args, i);
    once(name, value);
    if (name == "--device") {
      if (value.empty()) bad_value(name, value, "a device such as cpu, cuda:0, npu (see `opreg devices`)");
      o.device = std::string(value);
    } else if (name == "--dtype") {
      o.dtype = pick<opreg::DType>(
          name, value, {{"f32", opreg::DType::f32}, {"f16", opreg::DType::f16}, {"bf16", opreg::DType::bf16}});
    } else if (name == "--wdtype") {
      o.wdtype_f32 = pick<bool>(name, value, {{"same", false}, {"f32", true}});
    } else if (name == "--shape") {
      try {
        o.shape = opreg::Shape::parse(value);
      } catch (const opreg::Error& e) {
        throw Usage{fmt::format("run: --shape: {}", e.what())};
      }
    } else if (name == "--groups") {
      o.groups = parse_int_value<std::int64_t>("run", name, value, 1, INT64_MAX, "an integer >= 1 that divides C (shape[1])");
    } else if (name == "--eps") {
      o.eps = parse_number_value("run", name, value, 0.0, 1e300, "a number from 0 to 1e300, e.g. 1e-6");
    } else if (name == "--offset") {
      o.offset = parse_number_value("run", name, value, -1e300, 1e300, "a number from -1e300 to 1e300, e.g. 0 or 1");
    } else if (name == "--casting") {
      o.casting = pick<opreg::Casting>(
          name, value,
          {{"llama", opreg::Casting::llama}, {"gemma", opreg::Casting::gemma}, {"none", opreg::Casting::none}});
    } else if (name == "--rounding") {
      o.rounding = pick<opreg::Rounding>(name, value, {{"once", opreg::Rounding::once}, {"torch", opreg::Rounding::torch}});
    } else if (name == "--kv-heads") {
      o.kv_heads = parse_int_value<std::int64_t>("run", name, value, 1, INT64_MAX, "an integer >= 1 (k's head count)");
    } else if (name == "--style") {
      o.style = pick<opreg::RopeStyle>(
          name, value, {{"half", opreg::RopeStyle::half}, {"interleaved", opreg::RopeStyle::interleaved}});
    } else if (name == "--table") {
      o.table = pick<opreg::RopeTable>(name, value,
                                       {{"shared", opreg::RopeTable::shared},
                                        {"batched", opreg::RopeTable::batched},
                                        {"flat", opreg::RopeTable::flat},
                                        {"half", opreg::RopeTable::half},
                                        {"positions", opreg::RopeTable::positions}});
    } else if (name == "--values") {
      o.values = pick<opreg::Values>(name, value,
                                     {{"random", opreg::Values::random},
                                      {"large", opreg::Values::large},
                                      {"equal", opreg::Values::equal},
                                      {"special", opreg::Values::special}});
    } else if (name == "--seed") {
      o.seed = parse_int_value<std::uint64_t>("run", name, value, 0, UINT64_MAX, "an integer from 0 to 2^64-1");
    } else if (name == "--repeat") {
      o.repeat = parse_int_value<std::int64_t>("run", name, value, 1, 100000, "an integer from 1 to 100000");
    } else if (name == "--tol-scale") {
      o.tol_scale =
          parse_number_value("run", name, value, 0.0, HUGE_VAL, "a finite number >= 0 (1: the tolerance table; 0: exact)");
    }
  }
  if (!have_op) throw Usage{"run: no op given; usage: opreg run OP [options], e.g. opreg run rms_norm.fwd"};
  return o;
}


ProblemSpec to_spec(const RunOptions& o) {
  // An option the op does not read is an error rather than silently ignored, so a mistyped
  // experiment (--groups on layer_norm) cannot pass for a measured one. problem_options() also
  // refuses an unknown op (unsupported, listing the defined ones).
  const ProblemOptions uses = problem_options(o.op);
  using Uses = bool ProblemOptions::*;
  auto refuse_unless = [&](bool given, Uses field, std::string_view option) {
    if (!given || uses.*field) return;
    std::vector<std::string> takers;
    for (const auto& op : problem_ops()) {
      if (problem_options(op).*field) takers.push_back(op);
    }
    throw Usage{fmt::format("run: {} does not apply to {} (it applies to {})", option, o.op, fmt::join(takers, ", "))};
  };
  refuse_unless(o.wdtype_f32.has_value(), &ProblemOptions::wdtype, "--wdtype");
  refuse_unless(o.eps.has_value(), &ProblemOptions::eps, "--eps");
  refuse_unless(o.offset.has_value(), &ProblemOptions::offset, "--offset");
  refuse_unless(o.casting.has_value(), &ProblemOptions::casting, "--casting");
  refuse_unless(o.rounding.has_value(), &ProblemOptions::rounding, "--rounding");
  refuse_unless(o.groups.has_value(), &ProblemOptions::groups, "--groups");
  refuse_unless(o.inplace, &ProblemOptions::in_place, "--inplace");
  refuse_unless(o.kv_heads.has_value(), &ProblemOptions::rope, "--kv-heads");
  refuse_unless(o.style.has_value(), &ProblemOptions::rope, "--style");
  refuse_unless(o.table.has_value(), &ProblemOptions::rope, "--table");
  refuse_unless(o.transposed, &ProblemOptions::rope, "--transposed");
  refuse_unless(o.no_weight, &ProblemOptions::weight, "--no-weight");
  refuse_unless(o.no_bias, &ProblemOptions::bias, "--no-bias");
  const bool params = (uses.weight && !o.no_weight) || (uses.bias && !o.no_bias) || uses.rope;
  if (o.wdtype_f32.has_value() && !params) {
    throw Usage{fmt::format("run: --wdtype does not apply: {} runs without a weight{}", o.op,
                            uses.bias ? " or a bias" : "")};
  }
  const bool group_norm = uses.groups;

  ProblemSpec spec;
  spec.op = o.op;
  spec.dtype = o.dtype.value_or(DType::f32);
  spec.wdtype = o.wdtype_f32.value_or(false) ? DType::f32 : spec.dtype;
  spec.shape = o.shape.value_or(group_norm ? Shape{16, 128, 1024} : uses.rope ? Shape{2, 32, 1024, 128} : Shape{4096, 4096});
  if (group_norm) {
    const std::int64_t channels = spec.shape.ndim() >= 2 ? spec.shape[1] : 0;
    spec.groups = o.groups.value_or(channels > 0 && channels % 32 == 0 ? 32 : 1);
  }
  spec.has_weight = !o.no_weight;
  spec.has_bias = !o.no_bias;
  spec.eps = o.eps.value_or(uses.eps_default);
  spec.offset = o.offset.value_or(0.0);
  spec.casting = o.casting.value_or(Casting::llama);
  spec.rounding = o.rounding.value_or(Rounding::once);
  spec.kv_heads = o.kv_heads.value_or(0);
  spec.style = o.style.value_or(RopeStyle::half);
  spec.table = o.table.value_or(RopeTable::shared);
  spec.transposed = o.transposed;
  spec.in_place = o.inplace;
  spec.seed = o.seed.value_or(1);
  spec.values = o.values.value_or(Values::random);
  spec.tol_scale = o.tol_scale.value_or(1.0);
  return spec;
}

}  // namespace opreg::cli
