// rms_norm on the npu: the UB layout of each kernel (what the planner sizes and the kernel
// allocates) and the plan a variant's supports() and its kernel share.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "backends/npu/profile.h"
#include "backends/npu/tiling.h"
#include "opreg/ops.h"
#include "ops/families.h"

namespace opreg::npu::rms {

// single_pass: whole rows in UB; chunked: BLOCK_SIZE_SUB chunks of a row, two passes; atomic
// (backward only): whole rows when they fit, else chunks, with dW reduced by atomic-add DMA.
enum class Impl : std::uint8_t { single_pass, chunked, atomic };
std::string_view to_string(Impl impl);

// The problem as the planner sees it, from the row-norm descriptor (src/ops/families.h): x's
// dtype, the weight's (x's when there is none), and rows x cols.
struct Problem {
  DType x = DType::f32;
  DType w = DType::f32;
  bool has_weight = true;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool fused = false;  // fused_add_rms_norm: a residual in and s out (fwd), ds_out in (bwd)
};
Problem problem_of(const family::RowNormFwd& d);
Problem problem_of(const family::RowNormBwd& d);

// The forward's UB: x in and y out (queues), x as float and x^2 then y as float (16-bit x: float
// x uses its own tiles), the weight as (offset + w) in float, the row sums and rstd of the rows
// in flight with the power of two that scaled a row whose squares overflow, ReduceSum's work.
// fused_add_rms_norm adds the residual in and s out (queues): s = x + residual is formed in x's
// float tile (the residual's float copy goes through the squares' tile) and normalised from UB.
// Short rows (kShortRow floats or fewer, one vector repeat) add rstd broadcast to one 32-byte
// block a row (Brcb), which y = x * rstd reads with block stride 0.
inline constexpr std::int64_t kShortRow = 64;
inline bool short_rows(std::int64_t cols) { return cols > 0 && cols <= kShortRow; }
struct FwdLayout {
  UbItem x, res, y, s, xf, sq, wf, sums, scale, rstd, rstd_blocks, acc, work;
  std::array<UbItem, 13> items() const {
    return {x, res, y, s, xf, sq, wf, sums, scale, rstd, rstd_blocks, acc, work};
  }
};
FwdLayout fwd_layout(DType x, bool has_weight, bool fused = false, bool short_row_path = false);

// The backward's UB: dy, x in and dx out (queues), dy and x as float (16-bit x), a float
// temporary, (offset + w), the core's dW partial and the partial of its current block of rows,
// per-row rstd, dot and coefficient, ReduceSum's work. fused_add_rms_norm adds ds_out in (a
// queue; its float copy goes through the temporary once dx is formed).
// An f32 dweight is accumulated exactly (compensated.h): the partial is a (hi, lo) pair, the
// block partial's buffer holding lo, and the exact products take a fixed scratch.
struct BwdLayout {
  UbItem dy, ds, x, dx, dyf, xf, t, wf, dwp, blk, rstd, dot, coeff, acc, work, exact;
  std::array<UbItem, 16> items() const {
    return {dy, ds, x, dx, dyf, xf, t, wf, dwp, blk, rstd, dot, coeff, acc, work, exact};
  }
};
// Whether the backward's dweight is accumulated exactly: f32 activations with a weight.
inline bool exact_dw(DType x, bool has_weight) { return x == DType::f32 && has_weight; }
BwdLayout bwd_layout(DType x, bool has_weight, bool fused = false);

// After SyncAll, each core sums its columns of the [cores x hidden] partials in core order
// (tiling.h's reduce_layout).

// What a variant's supports() decides and its kernel runs (plain data: the choice cache keeps it).
struct FwdPlan {
  Impl impl = Impl::single_pass;
  Tiles tiles;
};
struct BwdPlan {
  Impl impl = Impl::single_pass;
  Tiles tiles;
  std::int64_t reduce_width = 0;  // columns a step of the dW column reduction takes
  int reduce_depth = 2;
};
// `why` (optional) gets the planner's line: the tiling, or why it does not fit.
FwdPlan plan_fwd(Impl impl, const Problem& problem, const DeviceModel& device, std::string* why = nullptr);
BwdPlan plan_bwd(Impl impl, const Problem& problem, const DeviceModel& device, std::string* why = nullptr);

// What casting `none` rounds (offset + w) to: the weight's dtype, as the reference defines it
// (src/ops/reference; PyTorch's rule); with an f32 weight `none` equals `llama`.
DType none_scale_dtype(DType x, DType w);

}  // namespace opreg::npu::rms
