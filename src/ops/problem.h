// One op problem end to end, shared by the conformance harness (tests/conformance), `opreg run`
// and the benchmarks, so that a failing test's reproducer line replays the same numbers:
// seeded random inputs (never zeros) made on the host and copied to the device, outputs
// poisoned (NaN) before each run, the run through a registry, and the check of every output
// against the double-precision reference with the tolerance table below.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "opreg/ops.h"

namespace opreg {

// How the activation inputs (x, residual, dy, ds_out, a, b, dc) are drawn; weights and biases
// are always `random`. The modes besides `random` are the numerical edge cases every kernel
// must get right.
enum class Values : std::uint8_t {
  random,   // uniform in [-2, 2], at least 1/64 away from zero (rope's tables: cos and sin of
            // positions 0 to 2^10 times each pair's frequency)
  large,    // magnitudes in [2^57, 2^60] (f16: [2^12, 2^15]): each square fits f32, a few hundred
            // of them summed do not, so a kernel must accumulate wider or scale (never return 0);
            // rope's tables: positions past 2^20 (large angles)
  equal,    // every normalisation set (a row; group_norm: an (n, group)) holds one value, a
            // dyadic one, so its mean is exact and its variance exactly 0
  special,  // random, with NaN, +Inf and -Inf in the first three rows: they must propagate
};
std::string_view to_string(Values values);
Values parse_values(std::string_view text);  // "random" | "large" | "equal" | "special"

// rope's tables (cos and sin) as a problem lays them out, for q [B, H, T, D]:
enum class RopeTable : std::uint8_t {
  shared,     // [1, T, D], HF's (cos and sin computed for one sequence)
  batched,    // [B, T, D], a row per (b, t)
  flat,       // [T, D]
  half,       // [1, T, D/2], the half-length rows Liger-Kernel reads
  positions,  // [T + 3, D] gathered by position_ids [B, T], out of order
};
std::string_view to_string(RopeTable table);
RopeTable parse_rope_table(std::string_view text);  // the names above

struct ProblemSpec {
  std::string op = "rms_norm.fwd";  // full op name
  DType dtype = DType::f32;         // x (a, dy, ...)
  DType wdtype = DType::f32;        // weight and bias (== dtype or f32); ignored by the glu ops
  Shape shape{4, 8};                // x's shape (a's for the glu ops)
  std::int64_t groups = 1;          // group_norm
  bool has_weight = true;           // the norms: pass a weight (a backward: and take dweight)
  bool has_bias = true;             // layer_norm, group_norm: pass a bias (a backward: take dbias)
  double eps = 1e-6;                // the norms' forward
  double offset = 0.0;              // rms_norm, fused_add_rms_norm
  Casting casting = Casting::llama; // rms_norm, fused_add_rms_norm
  Rounding rounding = Rounding::once; // geglu, swiglu
  std::int64_t kv_heads = 0;          // rope: k's head count (0: q's, shape[1])
  RopeStyle style = RopeStyle::half;  // rope
  RopeTable table = RopeTable::shared;  // rope
  bool transposed = false;  // rope: q, k and their outputs are views of [B, T, H, D] memory (HF's transposes)
  bool in_place = false;            // bwd: dx is dy (glu: da is a and db is b)
  Values values = Values::random;    // the activation inputs
  double tol_scale = 1.0;           // multiplies the tolerance table (0: equal to the reference)
  std::uint64_t seed = 1;

  // The `opreg run` arguments that replay this problem on `device`, e.g.
  // "rms_norm.fwd --device cpu --dtype bf16 --wdtype f32 --shape 3x5 --seed 7".
  std::string cli_args(const std::string& device) const;
};

// What an output is, for the tolerance table.
enum class OutputKind : std::uint8_t { y, dx, dw, stat };
std::string_view to_string(OutputKind kind);

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};
// The one table: per output kind and the problem's dtype (x's). An f32 dweight of an f16
// problem gets the f16 row: its terms carry f16 roundings (llama's x * rstd).
Tolerance tolerance(OutputKind kind, DType dtype);

struct OutputCheck {
  std::string name;  // "dweight"
  OutputKind kind = OutputKind::y;
  DType dtype = DType::f32;  // the output's
  Tolerance tol;             // tolerance(kind, the problem's dtype)
  // max |out - ref| / (atol + rtol |ref|); equal values count 0 (also infinities of one sign, and
  // NaN where the reference is NaN); inf for any other NaN (a poisoned element) or infinity
  double err = 0;
  std::int64_t worst = -1;  // flat index of the worst element (-1: empty)
  std::string at;           // its index, e.g. "3,17"
  double got = 0;
  double want = 0;
};

struct CheckReport {
  std::vector<OutputCheck> outputs;
  double err = 0;  // the largest
  bool pass() const { return err <= 1.0; }
  // "y err=0.31 rstd err=0.02" and, on failure, the worst element of each failing output.
  std::string summary() const;
};

// Input values chosen by the caller instead of `values`: fill(tensor name, flat index) for every
// element of every input but the statistics.
using InputFill = std::function<double(std::string_view tensor, std::int64_t index)>;

// One output, copied to the host.
struct ProblemOutput {
  std::string name;  // y, rstd, dx, dweight, ...
  Tensor value;
};

class Problem {
 public:
  // Makes the inputs (statistics of backward problems come from the reference forward on the
  // same inputs, as a framework would pass them) and the outputs on `device`, for any op of the
  // manifest. Throws opreg::Error for a spec the op's check refuses (same messages as the entry
  // points).
  Problem(Registry& registry, const ProblemSpec& spec, Device device, const InputFill& fill = {});
  ~Problem();
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  const ProblemSpec& spec() const;
  Device device() const;
  // Sets every output element to NaN (a kernel that skips an element then fails the check).
  void poison();
  // Through the registry's choice (Registry::call).
  DispatchResult run(const ExecContext* ctx = nullptr);
  // One named variant (Registry::call_variant): rejected with its reason if its supports()
  // refuses the problem.
  Verdict run_variant(std::string_view variant, const ExecContext* ctx = nullptr);
  // Waits for the device's work on `ctx`'s stream (or the default one).
  void synchronize(const ExecContext* ctx = nullptr);
  // The outputs as they are now, copied to the host (after a synchronize), in the op's order.
  std::vector<ProblemOutput> outputs();
  // Copies the outputs to the host and compares them with the reference.
  CheckReport check();
  // bytes_moved of this problem.
  std::uint64_t bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Every op of the manifest ("rms_norm.fwd", ...), in its order (the tour's).
std::vector<std::string> problem_ops();

// Which ProblemSpec fields an op uses (eps also shapes a backward problem: its statistics come
// from the forward). An unknown op is an opreg::Error (unsupported) listing the known ones.
struct ProblemOptions {
  bool wdtype = false;
  bool weight = false;  // the op takes an optional weight (--no-weight)
  bool bias = false;    // the op takes an optional bias (--no-bias)
  bool groups = false;
  bool eps = false;
  bool offset = false;
  bool casting = false;
  bool rounding = false;
  bool in_place = false;
  bool rope = false;  // kv_heads, style, table, transposed
  double eps_default = 0;  // the op's own default (its argument struct's), for eps-taking ops
};
ProblemOptions problem_options(std::string_view op);

}  // namespace opreg
