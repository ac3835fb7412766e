// The seeds' GPU kernels as they run on Ascend (issues 19, 39): what Liger-Kernel's GPU Triton
// kernels (src/liger_kernel/ops/{rms_norm,fused_add_rms_norm,layer_norm,group_norm,geglu,swiglu}.py,
// not its _ascend backend) do when triton-ascend compiles them for an Ascend NPU, read at Liger's
// commit kLigerCommit: each op's grid, BLOCK_SIZE and its caps, rows per program, the tiles every
// program keeps live in UB, and the multi-buffer rule of a named triton-ascend (kMultibufferDouble,
// kMultibufferPrune; OPREG_NPU_TRITON_MULTIBUFFER picks one).
//
// Variants named npu.<op>.<dir>.gpu_port are never chosen (their supports() refuses, naming the
// numbers). Forced, they fail where the device or Liger's host code does, each once and before
// anything runs: Liger's own RuntimeError (calculate_settings: a row past 65536), triton-ascend's
// `grid should be less than 65536!` (check_grid_size, the grid's product past 65535) and
// BiShengIR's compile-time `ub overflow, requires N bits while M bits available!` (the program's
// live tiles past UB). Where the port fits, the result comes from the npu's own kernel and then
// the port's program (emulate(): Ascend C-style code doing the Triton program's DMAs and vector
// work, one block per program) runs on scratch outputs, so the result line reports the port's
// counters and est_us. docs/backends/npu_gpu_port.md says what is derived from where.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "opreg/variants.h"

namespace opreg::npu {
class Emulator;
struct GmArg;
}  // namespace opreg::npu

namespace opreg::npu::gpu_port {

// linkedin/Liger-Kernel at ead96b61 (2026-08-21, main after v0.8.2; it pins triton-ascend 3.2.2
// for NPU, #1392): the commit every grid and cap here is read from.
inline constexpr std::string_view kLigerCommit = "ead96b618e5c67bddc6a6e9bcb99bfe6b5ab661c";

// triton-ascend's multi-buffer rule. doubled: triton-ascend 3.2.2 (Liger's pin), `multibuffer`
// on by default off the 910_95 (--enable-auto-multi-buffer), every loaded tile allocated twice
// (issue #302's maintainer: 48000 x 32 bits x 2). pruned: triton-ascend PR #1458 (merged
// 2026-08-10, "UB Overflow estimate"): estimated UB over capacity drops multi_buffer marks,
// largest first, until it fits; no triton-ascend release carrying it was found (main after
// 2026-08-10).
enum class Multibuffer : std::uint8_t { doubled, pruned };
std::string_view to_string(Multibuffer rule);
// OPREG_NPU_TRITON_MULTIBUFFER: `double` (the default) or `prune`; anything else is an error.
Multibuffer multibuffer_from_env();

// One tile of a program: `elems` elements of `bits` each. loaded: a tl.load's destination (the
// ones multi-buffering doubles). role: what the emulated program does with it.
enum class Role : std::uint8_t {
  row_in,    // loaded per row (row tile, masked to the real row)
  param_in,  // loaded once per program (weight, bias)
  row_out,   // stored per row
  prog_out,  // accumulated over the program's rows, stored once at its end (a float dW row)
  work,      // a float temporary the program computes in (16-bit inputs: their f32 copy)
};
struct Tile {
  const char* name = "";
  std::uint32_t bits = 0;  // 0: the tile does not exist (no weight, no residual)
  Role role = Role::row_in;
  std::uint8_t arg = 0;  // row_in / param_in / row_out / prog_out: index into launch's args
  bool pruned = false;   // a loaded tile the prune rule left single-buffered (size())
  bool loaded() const { return role == Role::row_in || role == Role::param_in; }
};
inline constexpr int kMaxTiles = 10;

// The Triton program's per-element work on one row (counted from Liger's kernel source: the
// elementwise float operations, the tl.sum reductions, the exp/reciprocal/rsqrt each
// transcendental takes on the vector unit).
struct Work {
  std::int32_t binary = 0;          // elementwise ops (+ - * and scalar forms) per element
  std::int32_t transcendental = 0;  // Exp, Reciprocal, Rsqrt per element
  std::int32_t reduces = 0;         // tl.sum over the row
};

// Plain data (a variant's plan).
struct Port {
  std::string kernel;           // Liger's kernel, e.g. "_rms_norm_backward_kernel"
  std::string grid_text;        // "(2048,)", "(40,)", "(128, 512)"
  std::int64_t programs = 0;    // the grid's product
  std::int64_t rows = 0;        // rows (or sets) the launch covers
  std::int64_t cols = 0;        // the real row's elements
  std::int64_t block_size = 0;  // BLOCK_SIZE
  std::int64_t block_rows = 1;  // BLOCK_ROW (rms_norm's block kernels), else 1
  // The rows of program p: first = p * first_mul, then every `step` rows while below
  // min(rows, first + span).
  std::int64_t first_mul = 1, step = 1, span = 1;
  std::int64_t chunks = 1;  // BLOCK_SIZE pieces a row takes (group_norm's tl.range loops), else 1
  std::array<Tile, kMaxTiles> tiles{};
  int tile_count = 0;
  Work work;
  Multibuffer rule = Multibuffer::doubled;
  std::int64_t single_bits = 0;   // the live set, every tile once
  std::int64_t doubled_bits = 0;  // every loaded tile twice
  std::int64_t live_bits = 0;     // what the rule leaves: the compiler's requirement
  int pruned = 0;                 // loaded tiles the prune rule single-buffered
  std::int64_t ub_bits = 0;
  std::string host_error;  // Liger's own host-side refusal, raised before any launch ("" none)
  bool emulated = true;    // false: the port's program is not emulated for this op (group_norm)

  bool grid_ok() const { return programs <= 65535; }
  bool ub_ok() const { return live_bits <= ub_bits; }
  bool runs() const { return host_error.empty() && grid_ok() && ub_ok(); }
  bool doubled(int tile) const;  // whether tile i is allocated twice under the rule (after size())
};

// What a port variant's supports() keeps as its plan (plain data: the choice cache copies it);
// the run builds the Port again from the problem.
struct Summary {
  std::int64_t programs = 0;
  std::int64_t block_size = 0;
  std::int64_t live_bits = 0;
  std::int64_t ub_bits = 0;
};
inline Summary summary(const Port& p) { return {p.programs, p.block_size, p.live_bits, p.ub_bits}; }

// Liger's calculate_settings (ops/utils.py:57-74): BLOCK_SIZE = next_power_of_2(n), a
// RuntimeError past MAX_FUSED_SIZE 65536 (set as the port's host_error).
std::int64_t next_pow2(std::int64_t n);
void calculate_settings(Port& port, std::int64_t n);

// The port's live set under the rule: fills single/doubled/live bits and `pruned`.
void size(Port& port, std::int64_t ub_bytes);

// supports()'s refusal: why the port is never chosen, with its grid and UB numbers.
Verdict refuse(const Port& port, std::string_view op_dir);

// Raises the port's failure, once and before any launch, where it has one: Liger's host error,
// then the grid check (triton-ascend's launcher), then the compile-time UB check. Returns when
// the device would take the launch.
void check(const Port& port, std::string_view op_dir);

// Runs the port's program: `port.programs` blocks, each the Triton program's rows with its tiles
// and DMAs (rows masked to the real row, BLOCK_SIZE tiles), its work per element; `args`: the
// launch's GM tensors (inputs as given, outputs the caller's scratch), indexed by Tile::arg. Its
// counters become the emulator's last launch.
void emulate(Emulator& emulator, const std::string& name, const Port& port, std::span<const GmArg> args);

}  // namespace opreg::npu::gpu_port
