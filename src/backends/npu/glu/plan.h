// geglu and swiglu on the npu: the UB layout of each kernel (what the planner sizes and the kernel
// allocates) and the plan a variant's supports() and its kernel share.
//
// Three ways of cutting the same element-wise work into tiles, one kernel body (kernels.cpp):
//   flat      the tensors as one array of n elements in tiles of whole 512-byte lines, the tiles
//             grid-strided over the cores (Liger's current NPU design); tile size from the planner.
//   sub_block the tensors as rows x hidden, each core a contiguous range of rows, every row in
//             BLOCK_SIZE_SUB column chunks (the seeds' design: Liger's first NPU geglu).
//   gpu_port  the GPU kernel as triton-ascend would run it: one block per row, BLOCK_SIZE the next
//             power of two of the row, the whole row live in UB with multibuffer doubling each
//             loaded tile. Never chosen; forced, it fails as the device does on long rows (ub
//             overflow) and on more than 65535 rows (the grid error).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "backends/npu/gpu_port.h"
#include "backends/npu/profile.h"
#include "backends/npu/tiling.h"
#include "ops/families.h"
#include "opreg/variants.h"

namespace opreg::npu::glu {

enum class Impl : std::uint8_t { flat, sub_block, gpu_port };
std::string_view to_string(Impl impl);

// The gate: gelu_tanh (geglu) or silu (swiglu).
enum class Act : std::uint8_t { gelu, silu };
std::string_view to_string(Act act);

// The problem as the planner sees it: a's dtype, its element count and its rows x hidden (hidden =
// the last dim; a 1-D tensor is one row).
struct GluSizes {
  family::Elem x = family::Elem::f32;
  std::int64_t n = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool backward = false;
};
GluSizes sizes_of(const family::GluFwd& d);
GluSizes sizes_of(const family::GluBwd& d);

// The forward's UB: a, b in and c out (queues of x's dtype), a as float and one float temporary
// (the gate, then b as float). 28 B an element for f32 and 20 for 16-bit types double-buffered,
// CANN SwiGLU's own figures.
// Its tiles are whole 512-byte lines, so every buffer starts where the one before left it modulo
// 512 B; two 256-byte pads move c (and t when a_f32 is there) to the other half of the UB's bank
// groups, so that the binary instructions' two sources (a and t, c and b; a_f32 and t) never share
// a bank group (docs/backends/npu.md, UB bank groups [S30]).
struct FwdLayout {
  UbItem a, b, pad_c, c, af, pad_t, t;
  std::array<UbItem, 7> items() const { return {a, b, pad_c, c, af, pad_t, t}; }
};
FwdLayout fwd_layout(family::Elem x);

// The backward's UB: dc, a, b in and da, db out (queues), a as float, the sigmoid, and two float
// temporaries that an f32 kernel keeps in its da and db tiles (the slope and the gate's value).
struct BwdLayout {
  UbItem dc, a, b, da, db, af, s, slope, value;
  std::array<UbItem, 9> items() const { return {dc, a, b, da, db, af, s, slope, value}; }
};
BwdLayout bwd_layout(family::Elem x);

// What a variant's supports() decides and its kernel runs (plain data: the choice cache keeps it).
struct GluPlan {
  Impl impl = Impl::flat;
  bool backward = false;
  bool fits = false;
  int depth = 1;
  std::int64_t n = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t block_dim = 0;  // 0: nothing to launch (sub_block: contiguous row ranges)
  std::int64_t tile = 0;       // elements a tile buffer holds (its capacity)
  std::int64_t line = 0;       // elements of one DataCopyPad block when a tile takes several
  std::int64_t tiles = 0;      // flat: tiles in all; sub_block: BLOCK_SIZE_SUB chunks of a row
  std::int64_t ub_used = 0;    // bytes of the layout at this tile (gpu_port: the live set)
  std::int64_t ub_bytes = 0;
};

// `why` (optional) gets one line on the tiling, or on why it does not fit.
GluPlan plan(Impl impl, const GluSizes& sizes, const DeviceModel& device, std::string* why = nullptr);

// The variants' supports() (Desc: GluFwd or GluBwd): plans on the device's model and says what it
// planned or why it refuses; gpu_port always refuses, with what it would do.
Verdict verdict(Act act, const GluPlan& plan, std::string why);
template <Act A, Impl I, class Desc>
Verdict supports(const Desc& d, const DeviceModel& device, GluPlan& plan) {
  std::string why;
  plan = glu::plan(I, sizes_of(d), device, &why);
  return verdict(A, plan, std::move(why));
}

// The kernels' launches (kernels.cpp): each runs the plan its variant's supports() made on the
// emulator of the call's context; a forced gpu_port first launches the GPU kernel's grid, which
// fails where the device does.
template <Act A>
void run_fwd(const family::GluFwd& d, const GluPlan& plan, const KernelContext& ctx);
template <Act A>
void run_bwd(const family::GluBwd& d, const GluPlan& plan, const KernelContext& ctx);

// gpu_port: Liger-Kernel's GPU geglu / swiglu kernel as triton-ascend launches it (gpu_port.h).
gpu_port::Port port_of(Act act, const GluSizes& sizes, const DeviceModel& device);

}  // namespace opreg::npu::glu
