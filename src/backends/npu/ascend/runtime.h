// The host emulator of an Ascend vector-core launch: the per-core state the device API works on
// (Unified Buffer arena, buffer records, counters, the cost model's timeline), the launch itself
// (blocks in waves over the vector cores, on host threads, in a shuffled seeded order, with
// SyncAll), and the counters a launch reports. Kernels do not include this directly: they include
// ascend/kernel_operator.h and use the Ascend C names.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/npu/ascend/types.h"
#include "backends/npu/profile.h"

namespace opreg::npu {

// What one launch did, summed over its blocks.
struct Counters {
  std::uint64_t gm_read = 0;              // bytes GM -> UB (DataCopy, DataCopyPad, GlobalTensor::GetValue)
  std::uint64_t gm_write = 0;             // bytes UB -> GM (atomic adds included)
  std::uint64_t dma_in = 0;               // MTE2 instructions
  std::uint64_t dma_out = 0;              // MTE3 instructions
  std::uint64_t dma_blocks = 0;           // bursts (blockCount summed)
  std::uint64_t vector_instructions = 0;  // each at most 255 repeats
  std::uint64_t vector_repeats = 0;       // 256 bytes each
  std::uint64_t bank_conflicts = 0;       // vector cycles lost to UB bank-group conflicts
  std::uint64_t dma_overhead = 0;         // DMA engine cycles lost to set-up and unaligned GM rows
  std::uint64_t scalar_accesses = 0;      // GetValue / SetValue on UB or GM
  std::uint64_t scalar_fallbacks = 0;     // vector ops on a dtype the vector unit lacks, run element by element
  std::uint64_t atomic_adds = 0;          // MTE3 copies in atomic-add mode
  std::uint64_t atomic_bytes = 0;
  std::uint64_t truncated_copies = 0;  // DataCopy lengths rounded down to 32 bytes
  std::uint64_t truncated_bytes = 0;
  std::uint64_t sync_alls = 0;
  void add(const Counters& other);
};

struct LaunchCounters {
  std::string kernel;
  std::string profile;
  std::int64_t block_dim = 0;  // 0: nothing was launched (an empty problem)
  std::int64_t cores = 0;      // vector cores of the profile
  std::int64_t waves = 0;
  std::int64_t idle_cores = 0;  // in the last wave
  std::uint64_t ub_size = 0;
  std::uint64_t ub_peak = 0;  // the largest UB high-water mark of any core
  Counters counters;
  bool l2_resident = false;  // the launch's GM working set fits the L2
  double l2_fraction = 0;    // the part of it the cost model finds in L2 (1 when it fits)
  double est_us = 0;         // the cost model's kernel time (device side, emulated)
  // The launch whose outputs the user got, when these counters are another program's that ran
  // beside it on scratch (gpu_port: the port's counters, the native kernel's values); "" none.
  std::string values_from;
  double mte_us = 0;         // busy time of the critical core's GM port (MTE2 + MTE3)
  double vec_us = 0;         // busy time of its vector unit
  std::uint64_t seed = 0;    // the block order's seed
  double ub_ratio() const { return ub_size == 0 ? 0.0 : static_cast<double>(ub_peak) / static_cast<double>(ub_size); }
  // " block_dim=40 waves=1 ... est_us=31.2": the keys `opreg run` appends to its result line.
  std::string note() const;
};

// A kernel argument in GM: named, so that an out-of-bounds access can say which tensor it hit.
struct GmArg {
  const char* name;
  const void* data;
  std::size_t bytes;
  // The kernel writes it: a launch that faults (device_fault) leaves it poisoned, as a kernel the
  // device stopped mid-way leaves its outputs.
  bool output = false;
};

namespace detail {

enum class BufState : std::uint8_t { none, free, allocated, enqueued, dequeued };

// The pipes strict mode tells apart (indices into PipeState), and "no write yet".
inline constexpr std::uint8_t kPipeS = 0;
inline constexpr std::uint8_t kPipeV = 1;
inline constexpr std::uint8_t kPipeMte2 = 2;
inline constexpr std::uint8_t kPipeMte3 = 3;
inline constexpr std::uint8_t kNoPipe = 4;
inline constexpr int kEventIds = 8;  // eventID 0..7 on A2/A3/950 [S25]

// One UB allocation made by TPipe::InitBuffer (a queue buffer or a TBuf). Records live in the
// core, so that a LocalTensor outliving its pipe finds a changed generation rather than freed
// memory.
struct Buffer {
  std::uint32_t offset = 0;
  std::uint32_t bytes = 0;
  std::uint32_t generation = 0;
  BufState state = BufState::none;  // none: a TBuf (no state machine)
  AscendC::TPosition position = AscendC::TPosition::VECCALC;
  const void* owner = nullptr;  // the queue or TBuf
  // The cost model's scoreboard: when the last write into the buffer completes, and when the
  // last read of it does (a new write must wait for both).
  double write_done = 0;
  double read_done = 0;
  // Strict mode's hazard record (see PipeState): the pipe and instruction number of the last
  // write, the pipes a queue synchronised that write to, the last read by V and by MTE3 (scalar
  // reads block the scalar unit, MTE2 never reads UB), and the API that wrote.
  std::uint32_t w_seq = 0;
  std::uint8_t w_pipe = kNoPipe;
  std::uint8_t w_synced = 0;
  std::uint32_t r_seq_v = 0;
  std::uint32_t r_seq_mte3 = 0;
  const char* w_api = "";
};

inline constexpr int kMaxBuffers = 64;               // TPipe: at most 64 buffers in all [S20]
inline constexpr int kMaxQueBuffersPerPosition = 8;  // at most 8 queue buffers per TPosition on A2 [S20]

// Strict mode's view of a core's pipes: instructions are numbered in issue order (`seq`);
// synced[a][b] = n means pipe b has waited for every instruction of pipe a numbered below n (a
// WaitFlag of an event set after them, or a barrier). `pending` holds, per (source, target) pipe
// pair and eventID, the number a SetFlag captured (0: not set). `gm` holds GM ranges MTE3 wrote.
struct PipeState {
  struct GmWrite {
    std::uintptr_t lo = 0;
    std::uintptr_t hi = 0;
    std::uint32_t seq = 0;
  };
  static constexpr int kGmWrites = 8;
  std::uint32_t seq = 0;
  std::uint32_t v_barriers = 0;  // PipeBarrier<PIPE_V> (or PIPE_ALL) so far: Core::v_epoch
  std::uint32_t synced[4][4] = {};
  std::uint32_t pending[4][4][kEventIds] = {};
  GmWrite gm[kGmWrites] = {};
  int gm_count = 0;
  void barrier_all() {
    for (auto& row : synced) {
      for (auto& v : row) v = seq + 1;
    }
    gm_count = 0;
    ++v_barriers;
  }
};

// A core's clock in the cost model, in nanoseconds from the start of the launch. Instructions
// are issued in program order by the scalar unit (`issue`), run on their pipe when their
// operands are ready. MTE2 (GM -> UB) and MTE3 (UB -> GM) are separate pipes, each one transfer
// at a time at its own rate; from HBM the core's share of the memory bandwidth is one for both
// (`mem`: what reads and writes have used of it), from L2 each direction has its own rate.
struct Timeline {
  double issue = 0;
  double mte2 = 0;
  double mte3 = 0;
  double mem = 0;
  double vec = 0;
  double port_busy = 0;  // MTE2 and MTE3 busy time, summed
  double vec_busy = 0;
  double end() const;
  void start_at(double t);
};

class Launch;
class HostPool;

// A vector core during a launch. The arena and the buffer records stay with the core across
// launches; the rest is reset by each block.
struct Core {
  int index = 0;
  std::byte* ub = nullptr;
  std::uint32_t ub_size = 0;
  std::array<Buffer, kMaxBuffers> buffers{};
  Buffer loose{};  // timing record of tensors made with SetAddr (no buffer behind them)
  bool pipe_alive = false;
  std::uint32_t ub_top = 0;
  std::uint64_t ub_peak = 0;
  Launch* launch = nullptr;
  std::int64_t block = -1;
  std::int64_t blocks_run = 0;  // in this launch
  bool atomic_add = false;
  bool strict = true;      // the pipe synchronisation rules (Emulator::set_strict)
  bool approx_math = false;  // Emulator::set_approx_math
  // No auto-sync (Emulator::set_auto_sync(false)): a vector instruction that reads what an earlier
  // one wrote needs PipeBarrier<PIPE_V> between them; off for a program triton-ascend compiled.
  bool manual_sync = false;
  // Its record: which UB bytes (a bit per 2 bytes) vector instructions wrote since the barrier
  // numbered v_epoch (PipeState::v_barriers), the words of v_written touched, the last writer.
  std::vector<std::uint64_t> v_written;
  std::uint32_t v_epoch = 0;
  std::size_t v_from = 0;
  std::size_t v_to = 0;
  const char* v_api = "";
  const char* launch_profile = "";           // the profile's name, for messages
  std::uint32_t max_ext_block_count = 4095;  // DataCopyExtParams.blockCount: 65535 on the 950PR [S9]
  bool reduce_tree_across_repeats = false;   // ReduceSum's method 1 (950PR) or 2 (A2/A3) [S23]
  void* tpipe = nullptr;   // the live TPipe (GetTPipePtr)
  // The block's KERNEL_TASK_TYPE_DEFAULT (0: none declared, compiled as KERNEL_TYPE_AIV_ONLY),
  // else the declared AscendC::KernelMetaType + 1.
  std::uint8_t kernel_type = 0;
  PipeState pipes;
  Counters counters;
  Timeline time;
  // This wave's DMA cost (ns per byte, a core's share of the memory bandwidth) and clock.
  double in_ns_per_byte = 0;
  double out_ns_per_byte = 0;
  double mem_ns_per_byte = 0;  // the core's share of HBM, reads and writes together (0: L2-resident)
  double cycle_ns = 1;
  int bank_groups = 0;  // the profile's UB bank groups (0: conflicts not charged)
  bool instr_costs = false;  // the profile's per-instruction vector costs (InstrCost)
  bool native_bf16_int64 = false;  // the profile's vector unit computes on bf16 and int64
  double gm_unaligned_rate = 1;  // the profile's: a DMA row from GM not 512-byte aligned
};

// The core the calling host thread is emulating; an opreg::Error outside a launch.
Core& core();
inline thread_local Core* t_core = nullptr;
inline Core& current() {
  Core* c = t_core;
  return c != nullptr ? *c : core();
}

// Throws opreg::Error (internal) prefixed with the kernel, block and core.
[[noreturn]] void kernel_fail(const Core& core, const std::string& message);
// A fault the device raises at run time in a kernel that compiled (an address past the UB): the
// launch fails once with the runtime's error (ErrorKind::device), the other blocks are stopped
// and the launch's output arguments are poisoned (all bits set). `error_str` is the device's
// errorStr, `detail` where the emulator saw it.
[[noreturn]] void device_fault(const Core& core, std::string_view error_str, const std::string& detail);
std::string_view kernel_name(const Core& core);
std::int64_t block_dim(const Core& core);
// The kernel argument containing [p, p + bytes), or nullptr.
const GmArg* find_arg(const Core& core, const void* p, std::size_t bytes);
void sync_all(Core& core);
// The running block is a program triton-ascend compiled (gpu_port): its syncs are the
// compiler's, so the no-auto-sync rule does not apply to it.
inline void triton_compiled(Core& core) { core.manual_sync = false; }
// KERNEL_TASK_TYPE_DEFAULT: the kernel type the running block declared.
void declare_kernel_type(Core& core, AscendC::KernelMetaType type);
std::mutex& atomic_mutex(Core& core);
// Logs `message` once per launch and kernel (the emulator's warnings: truncated copies).
void warn_once(Core& core, std::string_view key, const std::string& message);

// ---- UB bank conflicts [S30]. A2/A3's UB is 48 banks of 128 rows x 32 B in 16 bank groups; the
// 32-byte block at UB offset o lies in group (o / 32) % 16 (bank 16 * (o / 64 KiB) + group, as the
// page's examples place 0x10000, 0x10020 and 0x20020 in banks 16, 17 and 33). Per cycle the vector
// unit reads one block from each group and writes one into each, 512 bytes each way: a repeat
// (8 blocks of each operand) takes as many cycles as its busiest group has block reads, or block
// writes. Two sources of a binary instruction thus run at one cycle a repeat only when their 16
// blocks fall in 16 different groups (offsets 256 B apart modulo 512 B); at the same offset
// modulo 512 B every group is read twice, two cycles a repeat; 8 blocks of one operand in one
// group (a block stride of 16) take 8. Masked-off blocks are charged as accessed.

// An operand's blocks: block k of repeat r at UB offset first + (r * rep + k * blk) * 32 (the
// count form's operands are contiguous: blk 1, rep 8).
struct BlockWalk {
  std::uint64_t first = 0;
  std::uint64_t blk = 1;
  std::uint64_t rep = 8;
  std::uint64_t blocks = 8;  // a repeat's blocks (4 for the 16-bit side of a Cast)
};

// Cycles of `repeats` repeats over a UB of `groups` bank groups (0: one cycle a repeat).
inline std::uint64_t repeat_cycles(int groups, std::uint64_t repeats, const BlockWalk* dst, const BlockWalk* src0,
                                   const BlockWalk* src1) {
  if (groups <= 0 || groups > 64 || repeats == 0) return repeats;
  const auto g = static_cast<std::uint64_t>(groups);
  // The groups' pattern repeats with period `groups` in r: count each residue once.
  const std::uint64_t distinct = repeats < g ? repeats : g;
  std::uint64_t total = 0;
  for (std::uint64_t r = 0; r < distinct; ++r) {
    std::uint8_t reads[64] = {};
    std::uint8_t writes[64] = {};
    std::uint64_t busiest = 1;
    const auto walk = [&](const BlockWalk* w, std::uint8_t* count) {
      if (w == nullptr) return;
      for (std::uint64_t k = 0; k < w->blocks; ++k) {
        const std::uint64_t group = (w->first / 32 + r * w->rep + k * w->blk) % g;
        const std::uint64_t n = ++count[group];
        if (n > busiest) busiest = n;
      }
    };
    walk(src0, reads);
    walk(src1, reads);
    walk(dst, writes);
    total += busiest * ((repeats - r + g - 1) / g);  // repeats r, r + g, r + 2g, ...
  }
  return total;
}

void vector_time(Core& c, double cycles, Buffer* w, Buffer* r0, Buffer* r1);

// A vector instruction's own cost on the A2/A3 profiles [S33]: cycles from issue to its first
// repeat (`startup`, per instruction of at most 255 repeats) and the unit's cycles per repeat
// (`per_repeat`: 1 for the arithmetic, whose repeats the UB's bank groups pace instead, more for
// the transcendental, division and cross-lane reduction instructions). The profiles without a
// source (Profile::instr_costs false) take one cycle a repeat and no start-up.
struct InstrCost {
  double startup = 0;
  double per_repeat = 1;
};
// The cost of instruction `api` on float (half: false) or 16-bit elements (true).
InstrCost instr_cost(std::string_view api, bool half);

// Charges `instructions` instructions of `repeats` repeats in all whose operands' blocks walk as
// given (nullptr: no such operand): per repeat the larger of the instruction's own cycles and the
// bank groups' (the cycles lost to bank conflicts counted), plus each instruction's start-up.
inline void charge_vector(Core& c, std::uint64_t repeats, std::uint64_t instructions, InstrCost cost, Buffer* w,
                          const BlockWalk* dst, Buffer* r0, const BlockWalk* src0, Buffer* r1,
                          const BlockWalk* src1) {
  if (!c.instr_costs) cost = {};
  const std::uint64_t banked = repeat_cycles(c.bank_groups, repeats, dst, src0, src1);
  const double own = cost.per_repeat * static_cast<double>(repeats);
  const double body = static_cast<double>(banked) > own ? static_cast<double>(banked) : own;
  if (static_cast<double>(banked) > own) c.counters.bank_conflicts += static_cast<std::uint64_t>(static_cast<double>(banked) - own);
  vector_time(c, body + cost.startup * static_cast<double>(instructions), w, r0, r1);
}

// The scoreboard (see Timeline): a vector instruction of `cycles` reading r0, r1 and writing w.
inline void vector_time(Core& c, double cycles, Buffer* w, Buffer* r0, Buffer* r1) {
  double start = c.time.issue > c.time.vec ? c.time.issue : c.time.vec;
  for (const Buffer* r : {r0, r1}) {
    if (r != nullptr && r->write_done > start) start = r->write_done;
  }
  if (w != nullptr) {
    if (w->read_done > start) start = w->read_done;
    if (w->write_done > start) start = w->write_done;
  }
  const double dur = cycles * c.cycle_ns;
  const double end = start + dur;
  c.time.vec = end;
  c.time.vec_busy += dur;
  for (Buffer* r : {r0, r1}) {
    if (r != nullptr && r->read_done < end) r->read_done = end;
  }
  if (w != nullptr) w->write_done = end;
}

}  // namespace detail

// One emulated device: the profile, the UB arenas of its vector cores, and the launch machinery.
class Emulator {
 public:
  explicit Emulator(DeviceModel model);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  const DeviceModel& model() const { return model_; }
  const Profile& profile() const { return *model_.profile; }
  std::uint64_t ub_bytes() const { return model_.ub_bytes; }
  int vector_cores() const { return model_.profile->vector_cores; }

  // The n-th launch after set_seed shuffles its blocks with mix(seed, n): each launch a new
  // order, the same sequence of orders after the same seed.
  void set_seed(std::uint64_t seed) {
    seed_.store(seed);
    launches_.store(0);
  }
  // How many blocks run on host threads at once (1: one at a time, fully determined by the
  // seed); 0 restores the default, the host's hardware threads.
  void set_host_threads(int threads) { host_threads_.store(threads); }
  // Strict mode (the default): data crosses pipes only over a queue, a SetFlag/WaitFlag pair or
  // a barrier, or the instruction fails naming the missing event. Off: the pipe rules are not
  // checked (alignment and every other rule still are).
  void set_strict(bool strict) { strict_.store(strict); }
  bool strict() const { return strict_.load(); }
  // Approximate math (OPREG_NPU_MATH=approx): Exp, Ln, Sqrt, Rsqrt and Reciprocal return within
  // 2 ulp of the correctly rounded result instead of it, as the device's are not correctly rounded
  // (vector.h's within_2ulp). Off by default.
  void set_approx_math(bool on) { approx_math_.store(on); }
  bool approx_math() const { return approx_math_.load(); }
  // Auto-sync (the default, OPREG_NPU_SYNC=auto): the compiler orders dependent vector
  // instructions, as CANN's auto-sync inserts PipeBarrier<PIPE_V> [S26]. Off (manual): strict mode
  // also requires PipeBarrier<PIPE_V> (or PIPE_ALL) between a vector instruction that writes a
  // buffer and a later one that reads it, as a kernel built without auto-sync does. Programs
  // triton-ascend compiled (triton_compiled) are exempt: the compiler inserts their syncs.
  void set_auto_sync(bool on) { auto_sync_.store(on); }
  bool auto_sync() const { return auto_sync_.load(); }

  // Runs `body` once per block, block ids 0..block_dim-1 in waves of the vector core count,
  // each block on a core of its own. Launches on one device run one at a time (one stream).
  // Throws opreg::Error for a block_dim outside 1..65535 (the messages users know from
  // triton-ascend and the ACL runtime) and rethrows the first error a block raised.
  LaunchCounters launch(std::string_view kernel, std::int64_t block_dim, std::span<const GmArg> args,
                        const std::function<void()>& body);

  // The last launch's counters (nullopt before the first).
  std::optional<LaunchCounters> last_launch() const;
  // Records counters of a call that launched nothing (an empty problem), so that they replace
  // the last launch's.
  void record(const LaunchCounters& counters);
  // The est_us of every launch (and record()) so far, summed: a benchmark's clock, whose
  // difference over a span counts every launch in it (a backward that launches twice, fwd + bwd).
  double est_us_total() const;
  // The last launch ran on scratch beside `values`, which computed the outputs (gpu_port): its
  // counters say so, and `values`' time leaves est_us_total (the call's time is the last one's).
  void counters_beside(const LaunchCounters& values);

 private:
  friend class detail::Launch;
  DeviceModel model_;
  std::unique_ptr<std::byte, void (*)(void*)> arena_;
  std::unique_ptr<detail::Core[]> cores_;
  std::unique_ptr<detail::HostPool> pool_;
  std::mutex launch_mutex_;
  mutable std::mutex last_mutex_;
  std::optional<LaunchCounters> last_;
  double est_us_total_ = 0;  // under last_mutex_
  std::atomic<std::uint64_t> seed_{0x5EED0A5CE4D0ULL};
  std::atomic<std::uint64_t> launches_{0};
  std::atomic<int> host_threads_{0};
  std::atomic<bool> strict_{true};
  std::atomic<bool> approx_math_{false};
  std::atomic<bool> auto_sync_{true};
};

// triton-ascend's grid rule: up to 3 grid dims whose product is the block count, at most 65535.
// Returns the product or throws the message triton-ascend raises.
std::int64_t grid_blocks(std::span<const std::int64_t> grid);

}  // namespace opreg::npu
