// The harness's one test body and its grid expansion (see harness.h).
#include "conformance/harness.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "registry/fail.h"

namespace opreg::conformance {
namespace {

std::string op_of(const std::string& variant) {
  // <backend>.<op>.<dir>.<impl>
  const auto first = variant.find('.');
  const auto last = variant.rfind('.');
  return variant.substr(first + 1, last - first - 1);
}

std::string offset_str(double offset) {
  std::string s = fmt::format("{}", offset);
  for (char& c : s) {
    if (c == '.' || c == '-') c = 'p';
  }
  return s;
}

// CONFORMANCE_DIGESTS=DIR: each case appends "<test> <FNV-1a of each output's bytes>" to
// DIR/<pid>.txt, so that two builds' outputs can be compared bit for bit (a refactor that must not
// change a kernel: sort and diff the two folders' lines).
void record_digest(Problem& problem) {
  static const char* dir = std::getenv("CONFORMANCE_DIGESTS");
  if (dir == nullptr || *dir == '\0') return;
  const std::vector<ProblemOutput> outputs = problem.outputs();
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string line = fmt::format("{}.{}", info->test_suite_name(), info->name());
  for (const ProblemOutput& out : outputs) {
    std::uint64_t h = 1469598103934665603ull;
    const auto* bytes = static_cast<const unsigned char*>(out.value.data());
    for (std::size_t i = 0; i < out.value.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
    line += fmt::format(" {:016x}", h);
  }
  std::ofstream(fmt::format("{}/{}.txt", dir, ::getpid()), std::ios::app) << line << '\n';
}

}  // namespace

std::vector<Shape> standard_shapes() {
  return {Shape{1, 1}, Shape{3, 5}, Shape{127, 4099}, Shape{2, 200003}, Shape{2, 3, 5, 7}, Shape{0, 7}, Shape{4, 0}};
}

std::vector<GroupShape> standard_group_shapes() {
  return {{Shape{1, 1}, 1},       {Shape{3, 5}, 5},      {Shape{127, 4099}, 1}, {Shape{2, 200003}, 1},
          {Shape{2, 6, 5, 7}, 3}, {Shape{4, 32, 9, 7}, 8}, {Shape{0, 6, 5}, 3},  {Shape{2, 6, 0}, 2}};
}

std::vector<RopeCase> standard_rope_cases() {
  using enum RopeTable;
  return {{Shape{2, 4, 5, 6}, 2, shared, RopeStyle::half, false},
          {Shape{3, 5, 7, 2}, 1, flat, RopeStyle::interleaved, false},
          {Shape{2, 3, 1, 10}, 7, batched, RopeStyle::half, true},
          {Shape{2, 4, 9, 130}, 2, positions, RopeStyle::interleaved, true},
          {Shape{2, 6, 33, 64}, 0, half, RopeStyle::half, false},
          {Shape{3, 2, 17, 24}, 3, positions, RopeStyle::half, false},
          {Shape{1, 1, 2, 100002}, 1, shared, RopeStyle::interleaved, false},
          {Shape{0, 2, 3, 4}, 1, shared, RopeStyle::half, false},
          {Shape{2, 2, 0, 4}, 2, batched, RopeStyle::half, false}};
}

std::vector<std::string> variants_of(const std::string& backend, const std::string& impl) {
  std::vector<std::string> out;
  for (const auto& op : problem_ops()) {
    for (const auto& v : default_registry().variants(op)) {
      if (v.backend == backend && (impl.empty() || v.impl == impl)) out.push_back(v.name);
    }
  }
  return out;
}

std::vector<Case> expand(const Grid& grid, const std::string& device) {
  std::vector<Case> cases;
  for (const auto& variant : grid.variants) {
    const std::string op = op_of(variant);
    const ProblemOptions o = problem_options(op);
    std::vector<std::pair<Shape, std::int64_t>> shapes;
    std::vector<RopeCase> ropes{RopeCase{}};  // one default for the other ops
    if (o.groups) {
      for (const auto& g : grid.group_shapes) shapes.emplace_back(g.shape, g.groups);
    } else if (o.rope) {
      shapes.emplace_back(Shape{}, 1);  // the shape comes with each rope case
      ropes = grid.rope_cases;
    } else {
      for (const auto& s : grid.shapes) shapes.emplace_back(s, 1);
    }
    std::vector<std::pair<Casting, double>> modes{{Casting::llama, 0.0}};
    if (o.casting) modes = grid.rms_modes;
    std::vector<Rounding> roundings{Rounding::once};
    if (o.rounding) roundings = grid.roundings;
    std::vector<bool> in_place{false};
    if (o.in_place && grid.in_place_too) in_place.push_back(true);
    // The parameter combinations this op has, each once.
    std::vector<std::pair<bool, bool>> affine;
    for (auto [w, b] : grid.affine) {
      const std::pair<bool, bool> p{w || !o.weight, b || !o.bias};
      if (std::find(affine.begin(), affine.end(), p) == affine.end()) affine.push_back(p);
    }
    for (const auto& [dtype, wdtype] : grid.dtypes) {
      if (!o.wdtype && wdtype != dtype) continue;
      for (const auto& [shape, groups] : shapes) {
        for (const auto& [casting, offset] : modes) {
          for (Rounding rounding : roundings) {
          for (const auto& [has_weight, has_bias] : affine) {
          for (Values values : grid.values) {
          for (bool ip : in_place) {
          for (const RopeCase& rope : ropes) {
            // Without a weight there is no scale, so no offset (the op's check refuses one).
            if (!has_weight && offset != 0.0) continue;
            Case c;
            c.variant = variant;
            c.device = device;
            c.spec.op = op;
            c.spec.dtype = dtype;
            c.spec.wdtype = o.wdtype ? wdtype : dtype;
            c.spec.shape = shape;
            c.spec.groups = groups;
            c.spec.casting = casting;
            c.spec.rounding = rounding;
            c.spec.offset = offset;
            c.spec.in_place = ip;
            c.spec.has_weight = has_weight;
            c.spec.has_bias = has_bias;
            c.spec.values = values;
            c.spec.seed = grid.seed;
            if (o.rope) {
              c.spec.shape = rope.shape;
              c.spec.kv_heads = rope.kv_heads;
              c.spec.table = rope.table;
              c.spec.style = rope.style;
              c.spec.transposed = rope.transposed;
            }
            cases.push_back(std::move(c));
          }
          }
          }
          }
          }
        }
      }
    }
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const ProblemOptions o = problem_options(c.spec.op);
  // fmt rather than string + string: g++ 12 at -O3 warns (-Wrestrict) inside std::string's
  // operator+ there, a false positive (GCC PR 105329).
  std::string name = fmt::format("{}__{}", c.variant, to_string(c.spec.dtype));
  if (o.wdtype) name += fmt::format("_{}", to_string(c.spec.wdtype));
  name += fmt::format("__{}", c.spec.shape.str());
  if (o.groups) name += fmt::format("_g{}", c.spec.groups);
  if (o.casting) name += fmt::format("__{}_off{}", to_string(c.spec.casting), offset_str(c.spec.offset));
  if (o.rounding && c.spec.rounding != Rounding::once) name += fmt::format("__{}", to_string(c.spec.rounding));
  if (o.rope) {
    name += fmt::format("_kv{}__{}_{}{}", c.spec.kv_heads, to_string(c.spec.table), to_string(c.spec.style),
                        c.spec.transposed ? "_transposed" : "");
  }
  if (!c.spec.has_weight) name += "__noweight";
  if (!c.spec.has_bias) name += "__nobias";
  if (c.spec.values != Values::random) name += fmt::format("__{}", to_string(c.spec.values));
  if (c.spec.in_place) name += "__inplace";
  for (char& ch : name) {
    if (ch == '.') ch = '_';
  }
  return name;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.variant << " on " << c.spec.cli_args(c.device); }

TEST_P(ConformanceTest, MatchesReference) {
  const Case& c = GetParam();
  Registry& registry = default_registry();
  const Device device = registry.parse_device(c.device);
  Problem problem(registry, c.spec, device);
  problem.poison();
  const Verdict verdict = problem.run_variant(c.variant);
  if (!verdict.ok) GTEST_SKIP() << c.variant << " does not take this problem: " << verdict.reason;
  const CheckReport report = problem.check();
  record_digest(problem);
  RecordProperty("err", fmt::format("{:.3g}", report.err));
  EXPECT_TRUE(report.pass()) << c.variant << ": " << report.summary() << "\n  reproduce: OPREG_FORCE_VARIANT="
                             << c.variant << " opreg run " << c.spec.cli_args(c.device);
}

}  // namespace opreg::conformance

namespace opreg::conformance {

std::vector<Case> glu_rounding_cases(const std::vector<std::string>& variants, const std::string& device) {
  std::vector<Case> out;
  for (const auto& variant : variants) {
    const std::string op = op_of(variant);
    if (!problem_options(op).rounding) continue;
    for (DType dtype : {DType::f32, DType::f16}) {
      Case c;
      c.variant = variant;
      c.device = device;
      c.spec.op = op;
      c.spec.dtype = dtype;
      c.spec.wdtype = dtype;
      c.spec.shape = Shape{5, 203};
      c.spec.seed = 21;
      out.push_back(std::move(c));
    }
  }
  return out;
}

namespace {

// f16 inputs where the two modes' roundings differ on many elements and every backend's f32
// activation is within an ulp or two of the reference's: a from -1.5 to 2.5 (cuda's torch-mode
// geglu is eager PyTorch's 0.5 a (1 + tanh(u)), which cancels for a far below -2, as eager's
// does), b and dc from 0.5 to 2.5 on another sequence.
InputFill separating_fill() {
  return [](std::string_view tensor, std::int64_t i) {
    const auto at = static_cast<std::uint64_t>(i);
    if (tensor == "a") return -1.5 + 4.0 * static_cast<double>((at * 2654435761u) % 1000u) / 1000.0;
    return 0.5 + 2.0 * static_cast<double>((at * 40503u + 17u) % 997u) / 997.0;
  };
}

// The outputs of `variant` on `device` for c's problem with `rounding`.
std::vector<ProblemOutput> run_mode(const Case& c, const std::string& variant, const std::string& device,
                                    Rounding rounding, const InputFill& fill) {
  Registry& registry = default_registry();
  ProblemSpec spec = c.spec;
  spec.rounding = rounding;
  Problem problem(registry, spec, registry.parse_device(device), fill);
  problem.poison();
  const Verdict verdict = problem.run_variant(variant);
  if (!verdict.ok) throw Error(ErrorKind::unsupported, verdict.reason);
  problem.synchronize();
  return problem.outputs();
}

bool same_bits(const std::vector<ProblemOutput>& x, const std::vector<ProblemOutput>& y) {
  if (x.size() != y.size()) return false;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const Tensor& a = x[k].value;
    const Tensor& b = y[k].value;
    if (a.nbytes() != b.nbytes() || std::memcmp(a.data(), b.data(), a.nbytes()) != 0) return false;
  }
  return true;
}

// Elements of `x` whose value is not `y`'s (NaN counts as different).
std::int64_t differ(const std::vector<ProblemOutput>& x, const std::vector<ProblemOutput>& y) {
  std::int64_t n = 0;
  for (std::size_t k = 0; k < x.size() && k < y.size(); ++k) {
    const Tensor& a = x[k].value;
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      const std::size_t at = static_cast<std::size_t>(i);
      if (load_as_double(a.data(), a.dtype(), at) != load_as_double(y[k].value.data(), a.dtype(), at)) ++n;
    }
  }
  return n;
}

}  // namespace

// Each mode's outputs are compared bit for bit with the reference variant's on the same inputs:
// equal but for a few elements (where f32 and double land on either side of an f16 rounding
// boundary), while the two modes' references differ on a tenth of the elements at least (a
// second rounding moves the result across a boundary about a fifth of the time).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GluRoundingTest);
TEST_P(GluRoundingTest, ModesRoundWhereTheySay) {
  const Case& c = GetParam();
  const std::string ref = "cpu." + c.spec.op + ".ref";
  try {
    if (c.spec.dtype == DType::f32) {
      const auto once = run_mode(c, c.variant, c.device, Rounding::once, {});
      const auto torch = run_mode(c, c.variant, c.device, Rounding::torch, {});
      EXPECT_TRUE(same_bits(once, torch)) << c.variant << ": rounding once and torch differ in f32";
      return;
    }
    const InputFill fill = separating_fill();
    const auto once = run_mode(c, c.variant, c.device, Rounding::once, fill);
    const auto torch = run_mode(c, c.variant, c.device, Rounding::torch, fill);
    const auto ref_once = run_mode(c, ref, "cpu", Rounding::once, fill);
    const auto ref_torch = run_mode(c, ref, "cpu", Rounding::torch, fill);
    const std::int64_t few = 2 + c.spec.shape.numel() / 100;
    EXPECT_LE(differ(once, ref_once), few) << c.variant << ": rounding once is not the reference's";
    EXPECT_LE(differ(torch, ref_torch), few) << c.variant << ": rounding torch is not the reference's";
    if (c.spec.op == "swiglu.bwd") {  // Liger's swiglu backward: the same rounding points in both modes
      EXPECT_TRUE(same_bits(ref_once, ref_torch));
      EXPECT_TRUE(same_bits(once, torch)) << c.variant << ": the modes have the same rounding points here";
    } else {
      // Inputs that did not separate the modes would make the checks above say nothing.
      EXPECT_GE(differ(ref_torch, ref_once), c.spec.shape.numel() / 10) << "the inputs do not separate the modes";
    }
  } catch (const Error& e) {
    GTEST_SKIP() << c.variant << " does not take this problem: " << e.what();
  }
}

}  // namespace opreg::conformance
