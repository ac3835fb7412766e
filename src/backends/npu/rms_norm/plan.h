// rms_norm on the npu: the UB layout of each kernel (what the planner sizes and the kernel
// allocates), the plan a variant's supports() makes and its kernel runs, and the variants'
// supports() over the family's descriptor (src/ops/families.h: RowNormFwd / RowNormBwd, one for
// rms_norm and fused_add_rms_norm).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "backends/npu/gpu_port.h"
#include "backends/npu/profile.h"
#include "backends/npu/tiling.h"
#include "ops/families.h"

namespace opreg::npu::rms_norm {

// single_pass: whole rows in UB; chunked: BLOCK_SIZE_SUB chunks of a row, two passes; atomic
// (backward only): whole rows when they fit, else chunks, with dW reduced by atomic-add DMA.
enum class Impl : std::uint8_t { single_pass, chunked, atomic };
std::string_view to_string(Impl impl);

// The problem as the planner sees it: x's dtype, the weight's (x's when there is none), rows x
// cols, and whether it is fused_add_rms_norm's (a residual in and s out, fwd; ds_out in, bwd).
struct RowNormSizes {
  family::Elem x = family::Elem::f32;
  family::Elem w = family::Elem::f32;
  bool has_weight = true;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool fused = false;
};
RowNormSizes sizes_of(const family::RowNormFwd& d);
RowNormSizes sizes_of(const family::RowNormBwd& d);

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
FwdLayout fwd_layout(family::Elem x, bool has_weight, bool fused = false, bool short_row_path = false);

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
inline bool exact_dw(family::Elem x, bool has_weight) { return x == family::Elem::f32 && has_weight; }
BwdLayout bwd_layout(family::Elem x, bool has_weight, bool fused = false);

// What a variant's supports() decides and its kernel runs (plain data: the choice cache keeps it).
struct FwdPlan {
  Impl impl = Impl::single_pass;
  Tiles tiles;
};
struct BwdPlan {
  Impl impl = Impl::single_pass;
  Tiles tiles;
  ReduceFit reduce;  // the dW column reduction after SyncAll (each core sums its columns in core order)
};
// `why` (optional) gets the planner's line: the tiling, or why it does not fit.
FwdPlan plan_fwd(Impl impl, const RowNormSizes& sizes, const DeviceModel& device, std::string* why = nullptr);
BwdPlan plan_bwd(Impl impl, const RowNormSizes& sizes, const DeviceModel& device, std::string* why = nullptr);

// The variants' supports(), both directions (FwdPlan for RowNormFwd, BwdPlan for RowNormBwd):
// plans on the device's model and says what it planned or why it refuses.
template <Impl I, class Desc, class Plan>
Verdict supports(const Desc& d, const DeviceModel& device, Plan& plan);

// The kernels' launches (fwd.cpp, bwd.cpp): each runs the plan its variant's supports() made on
// the emulator of the call's context and leaves its counters as the emulator's last launch. The
// backward's scratch (the [cores x hidden] dW partials, ...) comes from the backend's workspace.
void run_fwd(const family::RowNormFwd& d, const FwdPlan& plan, const KernelContext& ctx);
void run_bwd(const family::RowNormBwd& d, const BwdPlan& plan, const KernelContext& ctx);

// gpu_port (forced only): the GPU kernel's shape on Ascend (gpu_port.h). Its tiles: the row of
// every tensor the Triton program loads or stores (fwd: x, residual, weight, y, s; bwd: dy,
// ds_out, x, weight, dx and the float dW row it accumulates).
// Desc: RowNormFwd or RowNormBwd.
template <class Desc>
Verdict port_supports(const Desc& d, const DeviceModel& device, gpu_port::Summary& port);
// Forced: the port's launch (which fails where the device does), then, where the device took it,
// the result from the npu's own kernel (single_pass, or chunked for a row UB cannot hold).
template <class Desc>
void port_run(const Desc& d, const gpu_port::Summary& port, const KernelContext& ctx);

}  // namespace opreg::npu::rms_norm
