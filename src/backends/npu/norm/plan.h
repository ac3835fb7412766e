// layer_norm and group_norm on the npu: the problem as the kernels see it, their UB layouts (what
// the planner sizes and the kernels allocate) and the plan a variant's supports() makes and its
// kernel runs.
//
// Both ops normalise `sets` contiguous sets (families.h's NormSets). The kernels copy a set as R
// DMA rows of L elements, each row landing 32-byte padded in UB:
//   row mode (spread 1 and one group: every layer_norm): R = 1 and L = the
//     set's channels; the weight and bias are per element (a vector row in UB);
//   channel mode (group_norm with spread != 1 or several groups): R = the group's channels and L = the spatial size,
//     so every channel starts a UB row (32-byte aligned whatever HW is, 1, 3 or 7), and a tile
//     that crosses channel boundaries takes gamma and beta per row from the resident [C] params.
// Sets are split contiguously across min(cores, sets) blocks, never more than the vector cores
// whatever N x groups is.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "backends/npu/gpu_port.h"
#include "backends/npu/profile.h"
#include "backends/npu/tiling.h"
#include "ops/families.h"
#include "opreg/variants.h"

namespace opreg::npu::norm {

// single_pass: whole sets in UB, several a tile; chunked: a set too large for UB walked in pieces
// (DMA rows of it, or BLOCK_SIZE_SUB chunks of one row), twice; gpu_port (forced only): what the
// GPU-oriented Triton kernel does on Ascend, one block per set and the whole set in UB.
enum class Impl : std::uint8_t { single_pass, chunked, gpu_port };
std::string_view to_string(Impl impl);

// The two ops of the family: the same descriptor and kernels, their own names and messages (and
// gpu_port's live tiles: Liger's layer_norm and group_norm kernels load different tensors).
enum class NormOp : std::uint8_t { layer_norm, group_norm };

// The problem as the planner and the kernels see it.
struct NormSizes {
  family::Elem x = family::Elem::f32;
  family::Elem p = family::Elem::f32;  // weight's and bias's dtype (f32 when there is neither)
  bool has_weight = false;
  bool has_bias = false;  // forward: a bias; backward: a dbias wanted
  bool layer = true;      // layer_norm (for names and messages)
  std::int64_t sets = 0;
  std::int64_t groups = 1;
  std::int64_t channels = 0;
  std::int64_t spread = 1;

  // Row mode needs one weight slice for every set: layer_norm, or group_norm of one group and
  // one spatial element; everything else copies channels as DMA rows.
  bool channel_mode() const { return spread != 1 || groups > 1; }
  std::int64_t dma_rows() const { return channel_mode() ? channels : 1; }  // R
  std::int64_t row_len() const { return channel_mode() ? spread : channels; }  // L
  std::int64_t size() const { return channels * spread; }
  std::int64_t params() const { return groups * channels; }
};
NormSizes sizes_of(const family::NormFwd& d, NormOp op);
NormSizes sizes_of(const family::NormBwd& d, NormOp op);

// The forward's UB: x in and y out (queues), x as float and y as float (16-bit x only: a float x
// is used in place and y's own tile takes the float work), row mode's weight and bias slices or
// channel mode's resident [C] params (16-bit params arrive through `p_raw`), the statistics of the
// sets in flight (mean, M2 then rstd, the power of two that scaled an overflowing set), ReduceSum's
// output and work.
struct FwdLayout {
  UbItem x, y, xf, yf, wf, bf, wc, bc, p_raw, mean, m2, scale, rstd, acc, work;
  std::array<UbItem, 15> items() const { return {x, y, xf, yf, wf, bf, wc, bc, p_raw, mean, m2, scale, rstd, acc, work}; }
};
FwdLayout fwd_layout(const NormSizes& s);

// The backward's UB: dy, x in and dx out (queues), their float copies (16-bit), a float temporary,
// the weight (row slice or resident [C]), the core's dW / dB partials (row mode: a slice and the
// partial of the current block of sets; channel mode: [C] each), the sets' mean, rstd and the two
// coefficients, ReduceSum's output and work.
// Row mode with f32 x sums dW and dB exactly (compensated.h): the partials are (hi, lo) pairs,
// the block partials' buffers holding lo, and the exact products take a fixed scratch.
struct BwdLayout {
  UbItem dy, x, dx, dyf, xf, t, wf, dwp, dwb, dbp, dbb, wc, dwc, dbc, p_raw, mean, rstd, c1, c2, acc, work, exact;
  std::array<UbItem, 22> items() const {
    return {dy, x, dx, dyf, xf, t, wf, dwp, dwb, dbp, dbb, wc, dwc, dbc, p_raw, mean, rstd, c1, c2, acc, work, exact};
  }
};
inline bool exact_params(const NormSizes& s) { return s.x == family::Elem::f32 && !s.channel_mode(); }
BwdLayout bwd_layout(const NormSizes& s);

// After SyncAll each core sums its share of the param columns over the per-core partials
// (tiling.h's reduce_layout).

// A set's pieces (chunked): `piece_rows` DMA rows of full width each, or, when one row does not
// fit (piece_rows 0), BLOCK_SIZE_SUB chunks of one row; in flat order within the set.
struct Piece {
  std::int64_t row0 = 0, rows = 1, col0 = 0, width = 0;
};

struct NormPlan {
  // rows = sets; rows_per_tile = DMA rows of a tile; block_size = its width (gpu_port: the GPU
  // kernel's BLOCK_SIZE); block_size_sub / chunks: a row's chunks (chunked, piece_rows 0);
  // stat_rows = sets whose statistics are held at once.
  Tiles tiles;
  std::int64_t dma_rows = 1;       // R
  std::int64_t row_len = 0;        // L
  std::int64_t sets_per_tile = 0;  // single_pass
  std::int64_t piece_rows = 0;     // chunked: DMA rows a piece (0: pieces are chunks of a row)
  std::int64_t pieces = 1;         // pieces a set
  ReduceFit reduce;               // backward: the param reduction's step after SyncAll
  std::int32_t live_tiles = 0;  // gpu_port: the GPU kernel's f32 tiles
  Impl impl = Impl::single_pass;

  // gpu_port: the live UB set in bits, triton-ascend's multibuffer doubling each tile.
  std::int64_t live_bits() const { return tiles.block_size * 32 * live_tiles * 2; }

  Piece piece(std::int64_t i) const {
    if (piece_rows > 0) {
      const std::int64_t r0 = i * piece_rows;
      return {r0, std::min(piece_rows, dma_rows - r0), 0, row_len};
    }
    const std::int64_t chunk = tiles.block_size_sub;
    const std::int64_t c0 = (i % tiles.chunks) * chunk;
    return {i / tiles.chunks, 1, c0, std::min(chunk, row_len - c0)};
  }
  // Elements of the set before piece i (pieces go in flat order).
  std::int64_t before(std::int64_t i) const {
    const Piece p = piece(i);
    return p.row0 * row_len + p.col0;
  }
};

NormPlan plan_fwd(Impl impl, const NormSizes& sizes, const DeviceModel& device, std::string* why = nullptr);
// gpu_port: Liger-Kernel's GPU layer_norm / group_norm kernel as triton-ascend launches it
// (gpu_port.h).
gpu_port::Port port_of(const NormSizes& sizes, bool backward, const DeviceModel& device);
NormPlan plan_bwd(Impl impl, const NormSizes& sizes, const DeviceModel& device, std::string* why = nullptr);

// The variants' supports(), both directions: plans on the device's model and says what it
// planned or why it refuses (gpu_port always refuses, naming the GPU kernel's numbers).
template <NormOp Op, Impl I, class Desc>
Verdict supports(const Desc& d, const DeviceModel& device, NormPlan& plan) {
  std::string why;
  constexpr bool kBwd = std::is_same_v<Desc, family::NormBwd>;
  plan = (kBwd ? plan_bwd : plan_fwd)(I, sizes_of(d, Op), device, &why);
  if (I != Impl::gpu_port && plan.tiles.fits) return {true, std::move(why)};
  return Verdict::reject(std::move(why));
}

// The kernels' launches (fwd.cpp, bwd.cpp): each runs the plan its variant's supports() made on
// the emulator of the call's context. A forced gpu_port first launches what the GPU kernel's
// shape launches on the device (one block per set, the whole set in UB), which fails where the
// device fails; where it would run, the result comes from single_pass (or chunked).
template <NormOp Op>
void run_fwd(const family::NormFwd& d, const NormPlan& plan, const KernelContext& ctx);
template <NormOp Op>
void run_bwd(const family::NormBwd& d, const NormPlan& plan, const KernelContext& ctx);

}  // namespace opreg::npu::norm
