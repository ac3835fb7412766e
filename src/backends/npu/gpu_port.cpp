#include "backends/npu/gpu_port.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "backends/npu/ascend/kernel_operator.h"
#include "backends/npu/ascend/runtime.h"
#include "registry/env.h"
#include "registry/fail.h"

namespace opreg::npu::gpu_port {

std::string_view to_string(Multibuffer rule) { return rule == Multibuffer::doubled ? "double" : "prune"; }

Multibuffer multibuffer_from_env() {
  const std::optional<std::string> value = env_value("OPREG_NPU_TRITON_MULTIBUFFER");
  if (!value || *value == "double") return Multibuffer::doubled;
  if (*value == "prune") return Multibuffer::pruned;
  fail(ErrorKind::invalid_argument,
       "OPREG_NPU_TRITON_MULTIBUFFER={}: not a multi-buffer rule of the npu's gpu_port; accepted: double "
       "(triton-ascend 3.2.2: every loaded tile twice), prune (triton-ascend PR #1458: multi-buffering dropped, "
       "largest tile first, while UB would overflow)",
       *value);
}

std::int64_t next_pow2(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

void calculate_settings(Port& port, std::int64_t n) {
  port.block_size = next_pow2(std::max<std::int64_t>(n, 1));
  if (port.block_size > 65536) {
    port.host_error = fmt::format(
        "RuntimeError: Cannot launch Triton kernel since n = {} exceeds the recommended Triton blocksize = 65536.", n);
  }
}

namespace {
std::int64_t tile_bits(const Port& p, const Tile& t) {
  if (t.bits == 0) return 0;
  if (t.role == Role::param_in || t.role == Role::prog_out) return p.block_size * t.bits;  // one row
  return p.block_size * p.block_rows * t.bits;
}
}  // namespace

bool Port::doubled(int tile) const {
  const Tile& t = tiles[static_cast<std::size_t>(tile)];
  return t.bits != 0 && t.loaded() && !t.pruned;
}

std::int64_t reduce_bits(const Port& p) {
  if (p.work.reduces == 0) return 0;
  // tl.sum's scratch: what Ascend C's ReduceSum needs (ReduceSumWorkElems) and 8 floats for the
  // result; the compiler's own reduction buffer is assumed to be of this size.
  const std::int64_t n = p.block_size * p.block_rows;
  return (((n + 63) / 64 + 7) / 8 * 8 + 8) * 32;
}

void size(Port& port, std::int64_t ub_bytes) {
  port.ub_bits = ub_bytes * 8;
  port.single_bits = reduce_bits(port);
  port.doubled_bits = port.single_bits;
  std::vector<int> loaded;  // the loaded tiles, largest first (ties: the earlier first)
  for (int i = 0; i < port.tile_count; ++i) {
    Tile& t = port.tiles[static_cast<std::size_t>(i)];
    const std::int64_t b = tile_bits(port, t);
    port.single_bits += b;
    port.doubled_bits += t.loaded() ? 2 * b : b;
    t.pruned = false;
    if (t.loaded() && b > 0) loaded.push_back(i);
  }
  port.pruned = 0;
  port.live_bits = port.doubled_bits;
  if (port.rule == Multibuffer::pruned) {
    // PR #1458's pass: while the estimate is over capacity, the largest multi-buffered
    // allocation loses its second buffer.
    const auto bits_of = [&](int i) { return tile_bits(port, port.tiles[static_cast<std::size_t>(i)]); };
    std::stable_sort(loaded.begin(), loaded.end(), [&](int a, int b) { return bits_of(a) > bits_of(b); });
    for (const int i : loaded) {
      if (port.live_bits <= port.ub_bits) break;
      port.live_bits -= bits_of(i);
      port.tiles[static_cast<std::size_t>(i)].pruned = true;
      ++port.pruned;
    }
  }
}

Verdict refuse(const Port& port, std::string_view op_dir) {
  return Verdict::reject(fmt::format(
      "never chosen: Liger-Kernel's GPU kernel {} on Ascend (grid {} = {} programs, BLOCK_SIZE {}{}, live tiles {} "
      "bits of UB's {} with multibuffer {}{}{}{}); forced, it fails where the device does; npu.{}'s other variants "
      "tile for UB",
      port.kernel, port.grid_text, port.programs, port.block_size,
      port.block_rows > 1 ? fmt::format(" x BLOCK_ROW {}", port.block_rows) : std::string(), port.live_bits,
      port.ub_bits, to_string(port.rule), port.pruned > 0 ? fmt::format(" ({} tiles pruned)", port.pruned) : "",
      port.grid_ok() ? "" : ", a grid past 65535", port.host_error.empty() ? "" : ", refused by Liger's host code",
      op_dir));
}

void check(const Port& port, std::string_view op_dir) {
  if (!port.host_error.empty()) {
    // Liger's Python refuses before it launches anything (ops/utils.py calculate_settings).
    fail(ErrorKind::unsupported, "{} [Liger-Kernel {} host code, npu.{}.gpu_port (emulated)]", port.host_error,
         kLigerCommit.substr(0, 8), op_dir);
  }
  if (!port.grid_ok()) {
    // triton-ascend's launcher checks the grid's product before the launch [T2].
    const std::int64_t grid[] = {port.programs};
    try {
      grid_blocks(grid);
    } catch (const Error& e) {
      fail(ErrorKind::unsupported, "{} [triton-ascend launching {} (emulated): grid {} = {} programs]", e.what(),
           port.kernel, port.grid_text, port.programs);
    }
  }
  if (!port.ub_ok()) {
    // triton-ascend's compiler (BiShengIR) plans the program's UB and refuses, once, before
    // anything runs; its text [T1][T3].
    fail(ErrorKind::unsupported,
         "ub overflow, requires {} bits while {} bits available! (possible reason: tiling basic block is too large or "
         "block number is more than what user expect due to multi-buffer feature is enabled and some ops need extra "
         "local buffer.) [triton-ascend compiling {} (emulated): BLOCK_SIZE {}, multibuffer {}{}, before the launch of "
         "{} programs]",
         port.live_bits, port.ub_bits, port.kernel, port.block_size, to_string(port.rule),
         port.pruned > 0 ? fmt::format(" ({} tiles pruned)", port.pruned) : "", port.programs);
  }
}

namespace {

// What the program reads of the plan (plain data, as a tiling struct in GM would be).
struct PortTiling {
  std::int64_t rows, cols, block_size, block_rows, first_mul, step, span, chunks;
  std::int32_t tile_count;
  Tile tiles[kMaxTiles];
  std::uint8_t buffers[kMaxTiles];  // 1 or 2 (multi-buffered)
  Work work;
};

inline constexpr int kMaxArgs = 8;

// ascend-c: begin
using namespace AscendC;

// One Triton program of the port, as the compiled program runs it on a vector core: its tiles
// allocated at once (loaded tiles twice where multi-buffered, alternating row by row), each row's
// masked loads (the tile filled with `other` on the vector unit, then the real row copied in: a
// masked tl.load with `other` makes MTE2 wait for V [S16]), the row's float work over the whole
// BLOCK_SIZE tile (Triton computes masked lanes too), its stores (the real row), and a float dW row
// accumulated over the program's rows and stored at its end.
class KernelGpuPort {
 public:
  __aicore__ explicit KernelGpuPort(const PortTiling& t) : t_(t) {}

  __aicore__ void Init(GM_ADDR* gm, uint64_t* gm_bytes) {
    for (int32_t i = 0; i < t_.tile_count; ++i) {
      const Tile& tile = t_.tiles[i];
      if (tile.bits == 0) continue;
      const int64_t bytes = Bytes(tile);
      pipe_.InitBuffer(buf_[i], static_cast<uint32_t>(bytes * t_.buffers[i]));
      if (tile.role != Role::work) gm_[i].SetGlobalBuffer(gm[tile.arg], gm_bytes[tile.arg]);
    }
    const int64_t elems = t_.block_size * t_.block_rows;
    work_elems_ = static_cast<uint32_t>(elems);
    if (t_.work.reduces > 0) pipe_.InitBuffer(red_, static_cast<uint32_t>((ReduceSumWorkElems(work_elems_) + 8) * 4));
  }

  __aicore__ void Process() {
    const int64_t first = static_cast<int64_t>(GetBlockIdx()) * t_.first_mul;
    const int64_t end = t_.rows < first + t_.span ? t_.rows : first + t_.span;
    for (int32_t i = 0; i < t_.tile_count; ++i) {
      const Tile& tile = t_.tiles[i];
      if (tile.bits == 0) continue;
      if (tile.role == Role::param_in) Load(i, 0, 0, 1);
      if (tile.role == Role::prog_out) Duplicate(buf_[i].Get<float>(), 0.0f, static_cast<uint32_t>(t_.block_size));
    }
    int64_t iteration = 0;
    for (int64_t row = first; row < end; row += t_.step) {
      const int64_t rows = t_.block_rows < end - row ? t_.block_rows : end - row;
      for (int64_t chunk = 0; chunk < t_.chunks; ++chunk) {
        Row(row, rows, chunk, iteration);
        ++iteration;
      }
    }
    kernel_sync<HardEvent::V_MTE3>();
    for (int32_t i = 0; i < t_.tile_count; ++i) {
      if (t_.tiles[i].bits != 0 && t_.tiles[i].role == Role::prog_out)
        Store(i, static_cast<int64_t>(GetBlockIdx()), 1, 0, 0);
    }
  }

 private:
  __aicore__ int64_t Bytes(const Tile& tile) const {
    const int64_t rows = tile.role == Role::param_in || tile.role == Role::prog_out ? 1 : t_.block_rows;
    return rows * Pitch(tile);
  }
  // A tile row's bytes in UB: BLOCK_SIZE elements, 32-byte aligned.
  __aicore__ int64_t Pitch(const Tile& tile) const { return (t_.block_size * tile.bits / 8 + 31) / 32 * 32; }
  // The real part of chunk `chunk` of a row, in elements.
  __aicore__ int64_t Width(int64_t chunk) const {
    const int64_t left = t_.cols - chunk * t_.block_size;
    return left < t_.block_size ? left : t_.block_size;
  }
  __aicore__ LocalTensor<uint8_t> Slot(int32_t i, int64_t iteration) {
    LocalTensor<uint8_t> all = buf_[i].Get<uint8_t>();
    const int64_t bytes = Bytes(t_.tiles[i]);
    return all[static_cast<uint64_t>(t_.buffers[i] > 1 ? (iteration % 2) * bytes : 0)];
  }
  // DataCopyPad of `rows` real rows (of `Width(chunk)` elements) into the tile, rows BLOCK_SIZE
  // apart in UB.
  // Copying in, srcStride is the GM gap (bytes) and dstStride the UB gap (32-byte blocks); out,
  // the other way round.
  __aicore__ DataCopyExtParams Params(int32_t i, int64_t rows, int64_t chunk, bool in) const {
    const Tile& tile = t_.tiles[i];
    const int64_t len = Width(chunk) * tile.bits / 8;
    const int64_t landed = (len + 31) / 32 * 32;
    const auto gm_gap = static_cast<uint32_t>(rows > 1 ? t_.cols * tile.bits / 8 - len : 0);
    const auto ub_gap = static_cast<uint32_t>(rows > 1 ? (Pitch(tile) - landed) / 32 : 0);
    return {static_cast<uint16_t>(rows), static_cast<uint32_t>(len), in ? gm_gap : ub_gap, in ? ub_gap : gm_gap, 0};
  }
  __aicore__ void Load(int32_t i, int64_t row, int64_t chunk, int64_t rows, int64_t iteration = 0) {
    LocalTensor<uint8_t> tile = Slot(i, iteration);
    // `other=0`: the vector unit fills the whole tile, then MTE2 copies the real row over it.
    Duplicate(tile.ReinterpretCast<float>(), 0.0f, static_cast<uint32_t>(Bytes(t_.tiles[i]) / 4));
    kernel_sync<HardEvent::V_MTE2>();
    const int64_t at = (row * t_.cols + chunk * t_.block_size) * t_.tiles[i].bits / 8;
    DataCopyPad(tile, gm_[i][static_cast<uint64_t>(at)], Params(i, rows, chunk, true), DataCopyPadExtParams<uint8_t>{});
  }
  __aicore__ void Store(int32_t i, int64_t row, int64_t rows, int64_t chunk, int64_t iteration) {
    const int64_t at = (row * t_.cols + chunk * t_.block_size) * t_.tiles[i].bits / 8;
    DataCopyPad(gm_[i][static_cast<uint64_t>(at)], Slot(i, iteration), Params(i, rows, chunk, false));
  }
  // The float view the row's work runs on: the first 32-bit row tile, else the work tile.
  __aicore__ LocalTensor<float> Acc(int64_t iteration) {
    for (int32_t i = 0; i < t_.tile_count; ++i) {
      if (t_.tiles[i].bits == 0) continue;
      if (t_.tiles[i].role == Role::work) return buf_[i].Get<float>();
    }
    for (int32_t i = 0; i < t_.tile_count; ++i) {
      if (t_.tiles[i].bits == 32 && t_.tiles[i].role == Role::row_in)
        return Slot(i, iteration).ReinterpretCast<float>();
    }
    return buf_[0].Get<float>();  // not reached: every port has a float row
  }

  __aicore__ void Row(int64_t row, int64_t rows, int64_t chunk, int64_t iteration) {
    for (int32_t i = 0; i < t_.tile_count; ++i) {
      if (t_.tiles[i].bits != 0 && t_.tiles[i].role == Role::row_in) Load(i, row, chunk, rows, iteration);
    }
    kernel_sync<HardEvent::MTE2_V>();
    const LocalTensor<float> acc = Acc(iteration);
    const uint32_t n = work_elems_;
    // 16-bit loads are computed in float: one Cast per loaded 16-bit row.
    for (int32_t i = 0; i < t_.tile_count; ++i) {
      if (t_.tiles[i].bits == 16 && t_.tiles[i].role == Role::row_in) {
        Cast(acc, Slot(i, iteration).ReinterpretCast<half>(), RoundMode::CAST_NONE, n);
      }
    }
    // The row's elementwise work, its transcendentals, and each tl.sum with the scalar it gives
    // back to the program (rstd, mean, the dot product), read by the scalar unit.
    // (The values are the scratch's: only the instructions and their sizes are the program's.)
    for (int32_t k = 0; k < t_.work.reduces; ++k) {
      const LocalTensor<float> red = red_.Get<float>();
      ReduceSum(red, acc, red[8], n);
      kernel_sync<HardEvent::V_S>();
      static_cast<void>(red.GetValue(0));
      kernel_sync<HardEvent::S_V>();
    }
    for (int32_t k = 0; k < t_.work.transcendental; ++k) Exp(acc, acc, n);
    for (int32_t k = 0; k < t_.work.binary; ++k) Muls(acc, acc, 1.0f, n);
    for (int32_t i = 0; i < t_.tile_count; ++i) {
      if (t_.tiles[i].bits == 0) continue;
      if (t_.tiles[i].role == Role::prog_out)
        Add(buf_[i].Get<float>(), buf_[i].Get<float>(), acc, static_cast<uint32_t>(t_.block_size));
      if (t_.tiles[i].role != Role::row_out) continue;
      if (t_.tiles[i].bits == 16) {
        Cast(Slot(i, iteration).ReinterpretCast<half>(), acc, RoundMode::CAST_RINT, n);
      } else {
        Muls(Slot(i, iteration).ReinterpretCast<float>(), acc, 1.0f, n);
      }
    }
    kernel_sync<HardEvent::V_MTE3>();
    for (int32_t i = 0; i < t_.tile_count; ++i) {
      if (t_.tiles[i].bits != 0 && t_.tiles[i].role == Role::row_out) Store(i, row, rows, chunk, iteration);
    }
    kernel_sync<HardEvent::MTE3_V>();
  }

  template <HardEvent event>
  __aicore__ void kernel_sync() {
    const auto id = static_cast<event_t>(GetTPipePtr()->FetchEventID(event));
    SetFlag<event>(id);
    WaitFlag<event>(id);
  }

  const PortTiling& t_;
  TPipe pipe_;
  TBuf<TPosition::VECCALC> buf_[kMaxTiles];
  TBuf<TPosition::VECCALC> red_;
  GlobalTensor<uint8_t> gm_[kMaxTiles];
  uint32_t work_elems_ = 0;
};

__global__ __aicore__ void gpu_port_program(GM_ADDR* gm, uint64_t* gm_bytes, const PortTiling& tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
  KernelGpuPort op(tiling);
  op.Init(gm, gm_bytes);
  op.Process();
}
// ascend-c: end

}  // namespace

void emulate(Emulator& emulator, const std::string& name, const Port& port, std::span<const GmArg> args) {
  PortTiling t{};
  t.rows = port.rows;
  t.cols = port.cols;
  t.block_size = port.block_size;
  t.block_rows = port.block_rows;
  t.first_mul = port.first_mul;
  t.step = port.step;
  t.span = port.span;
  t.chunks = port.chunks;
  t.tile_count = port.tile_count;
  t.work = port.work;
  for (int i = 0; i < port.tile_count; ++i) {
    t.tiles[i] = port.tiles[static_cast<std::size_t>(i)];
    t.buffers[i] = port.doubled(i) ? 2 : 1;
  }
  GM_ADDR gm[kMaxArgs] = {};
  std::uint64_t gm_bytes[kMaxArgs] = {};
  for (std::size_t i = 0; i < args.size() && i < kMaxArgs; ++i) {
    gm[i] = static_cast<GM_ADDR>(const_cast<void*>(args[i].data));
    gm_bytes[i] = args[i].bytes;
  }
  // The native kernel that computed the outputs ran just before: the call's counters and time
  // are the port's, labelled with where the values came from.
  const std::optional<LaunchCounters> values = emulator.last_launch();
  // A Triton program: the compiler inserts its syncs, so the no-auto-sync rule is not its.
  emulator.launch(name, port.programs, args, [&] {
    npu::detail::triton_compiled(npu::detail::current());
    gpu_port_program(gm, gm_bytes, t);
  });
  if (values) emulator.counters_beside(*values);
}

}  // namespace opreg::npu::gpu_port
