// The launch: blocks in waves over the vector cores, each on a host thread, admitted to run in a
// shuffled seeded order; SyncAll; the per-launch counters and the cost model's totals.
#include "backends/npu/ascend/runtime.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <cstring>
#include <exception>
#include <numeric>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "registry/fail.h"
#include "registry/splitmix.h"

namespace opreg::npu {
namespace detail {
namespace {

// A launch that was aborted by another block's error unwinds its blocks with this.
struct Aborted {};

// What device_fault throws: the runtime's error, marked so that the launch poisons its outputs.
class DeviceFault : public Error {
 public:
  using Error::Error;
};

std::string block_list(const std::vector<std::int64_t>& blocks) {
  std::string out;
  for (std::size_t i = 0; i < blocks.size() && i < 8; ++i) out += fmt::format("{}{}", i == 0 ? "" : ", ", blocks[i]);
  if (blocks.size() > 8) out += fmt::format(" and {} more", blocks.size() - 8);
  return out;
}

}  // namespace

// The host threads blocks run on, kept between waves and launches: a wave of n blocks needs n
// threads at once (its blocks may wait for each other in SyncAll), and creating them per wave
// would cost more than most small launches' whole emulation.
class HostPool {
 public:
  ~HostPool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // Runs job(i) for i in [0, n), each on a thread of its own, and waits for all of them.
  void run(int n, const std::function<void(int)>& job) {
    std::unique_lock lock(mutex_);
    while (static_cast<int>(threads_.size()) < n) {
      const int index = static_cast<int>(threads_.size());
      threads_.emplace_back([this, index, seen = generation_] { work(index, seen); });
    }
    job_ = &job;
    count_ = n;
    remaining_ = n;
    ++generation_;
    work_.notify_all();
    done_.wait(lock, [&] { return remaining_ == 0; });
    job_ = nullptr;
  }

 private:
  void work(int index, std::uint64_t seen) {
    std::unique_lock lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= count_) continue;
      const std::function<void(int)>* job = job_;
      lock.unlock();
      (*job)(index);
      lock.lock();
      if (--remaining_ == 0) done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  int count_ = 0;
  int remaining_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

double Timeline::end() const { return std::max({issue, mte2, mte3, vec}); }
void Timeline::start_at(double t) { issue = mte2 = mte3 = mem = vec = t; }

// One launch in flight. Blocks of a wave run on host threads of their own, but only `permits`
// of them at a time, admitted in the order of `queue_`: the wave's shuffled block order first,
// then, after each SyncAll, the waiting blocks reshuffled. With one permit the whole execution
// order is a function of the seed.
class Launch {
 public:
  Launch(Emulator& em, std::string_view kernel, std::int64_t block_dim, std::span<const GmArg> args,
         const std::function<void()>& body, std::uint64_t seed, int permits)
      : em_(em),
        kernel_(kernel),
        block_dim_(block_dim),
        args_(args.begin(), args.end()),
        body_(body),
        rng_{seed},
        seed_(seed),
        permits_(permits) {}

  LaunchCounters run();
  void sync_all(Core& core);
  void warn_once(std::string_view key, const std::string& message);

  std::string_view kernel() const { return kernel_; }
  std::int64_t block_dim() const { return block_dim_; }
  const std::vector<GmArg>& args() const { return args_; }
  std::mutex& atomic_mutex() { return atomic_mutex_; }

 private:
  void run_wave(int count);
  void run_block(std::int64_t block, Core& core);
  void acquire(std::unique_lock<std::mutex>& lock, std::int64_t block);
  void abort_with(std::exception_ptr error);
  void set_rates(int active);

  Emulator& em_;
  std::string kernel_;
  std::int64_t block_dim_;
  std::vector<GmArg> args_;
  const std::function<void()>& body_;
  SplitMix rng_;
  std::uint64_t seed_;
  double l2_fraction_ = 0;  // the working set's part in L2: min(1, L2 / working set); 1: L2-resident

  std::mutex mutex_;
  std::condition_variable cv_;
  int permits_;
  std::deque<std::int64_t> queue_;
  std::vector<std::int64_t> waiting_;  // blocks in SyncAll
  std::vector<int> wave_cores_;        // core of each block slot of the current wave
  int wave_size_ = 0;
  int finished_ = 0;
  std::uint64_t generation_ = 0;
  bool aborted_ = false;
  std::exception_ptr error_;
  std::mutex atomic_mutex_;
  std::set<std::string, std::less<>> warned_;
};

LaunchCounters Launch::run() {
  const Profile& p = em_.profile();
  const int cores = p.vector_cores;
  // The working set decides where the cost model reads from: a launch whose GM arguments fit
  // the L2 is assumed to find them there (benchmarks rerun on the same tensors, as [P1] did).
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> spans;
  for (const auto& a : args_) {
    const auto lo = reinterpret_cast<std::uintptr_t>(a.data);
    spans.emplace_back(lo, lo + a.bytes);
  }
  std::sort(spans.begin(), spans.end());
  std::uint64_t working_set = 0;
  std::uintptr_t reach = 0;
  for (const auto& [lo, hi] : spans) {
    const std::uintptr_t from = std::max(lo, reach);
    if (hi > from) working_set += hi - from;
    reach = std::max(reach, hi);
  }
  // A working set larger than the L2 finds the L2's worth of it there and the rest in HBM
  // (assumed: a rerun keeps that part, rather than LRU's none).
  l2_fraction_ = working_set == 0 ? 1.0 : std::min(1.0, static_cast<double>(p.l2_bytes) / static_cast<double>(working_set));

  for (int c = 0; c < cores; ++c) {
    Core& core = em_.cores_[static_cast<std::size_t>(c)];
    core.launch = this;
    core.blocks_run = 0;
    core.counters = {};
    core.time = {};
    core.ub_peak = 0;
    core.cycle_ns = 1.0 / p.clock_ghz;
    core.bank_groups = p.ub_bank_groups;
    core.instr_costs = p.instr_costs;
    core.native_bf16_int64 = p.native_bf16_int64;
    core.gm_unaligned_rate = p.gm_unaligned_rate;
    core.launch_profile = p.name;
    core.reduce_tree_across_repeats = std::string_view(p.name).starts_with("Ascend950");
    core.max_ext_block_count = std::string_view(p.name).starts_with("Ascend950") ? 65535 : 4095;
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(block_dim_));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  rng_.shuffle(order.begin(), order.end());
  for (std::int64_t first = 0; first < block_dim_ && !aborted_; first += cores) {
    const int count = static_cast<int>(std::min<std::int64_t>(cores, block_dim_ - first));
    queue_.assign(order.begin() + first, order.begin() + first + count);
    run_wave(count);
  }
  for (int c = 0; c < cores; ++c) em_.cores_[static_cast<std::size_t>(c)].launch = nullptr;
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const DeviceFault&) {
      for (const GmArg& a : args_) {
        if (a.output && a.data != nullptr) std::memset(const_cast<void*>(a.data), 0xFF, a.bytes);
      }
      throw;
    }
  }

  LaunchCounters out;
  out.kernel = kernel_;
  out.profile = p.name;
  out.block_dim = block_dim_;
  out.cores = cores;
  out.waves = (block_dim_ + cores - 1) / cores;
  out.idle_cores = out.waves * cores - block_dim_;
  out.ub_size = em_.ub_bytes();
  out.l2_resident = l2_fraction_ >= 1.0;
  out.l2_fraction = l2_fraction_;
  out.seed = seed_;
  double critical = 0;
  for (int c = 0; c < cores; ++c) {
    const Core& core = em_.cores_[static_cast<std::size_t>(c)];
    out.counters.add(core.counters);
    out.ub_peak = std::max(out.ub_peak, core.ub_peak);
    if (core.blocks_run > 0 && core.time.end() >= critical) {
      critical = core.time.end();
      out.mte_us = core.time.port_busy / 1000.0;
      out.vec_us = core.time.vec_busy / 1000.0;
    }
  }
  out.est_us = cost_constants().launch_floor_us + critical / 1000.0;
  return out;
}

// Each core's share of the memory bandwidth: the aggregate (HBM, or L2 for a resident working
// set) split over the wave's active cores, at most what one core's DMA moves per cycle by the
// ini. The ini's L2 rates are taken per AI core and scaled by the calibrated efficiency; the
// HBM aggregate is the profile's figure, shared by reads and writes.
void Launch::set_rates(int active) {
  const Profile& p = em_.profile();
  const double eta = cost_constants().l2_efficiency;
  // From L2 and from HBM, each direction: min(the core's ini rate, the aggregate / active cores).
  const double l2_in = eta * p.l2_read_bpc * p.clock_ghz;
  const double l2_out = eta * p.l2_write_bpc * p.clock_ghz;
  const double l2_in_ns = 1.0 / std::min(l2_in, l2_in * p.ai_cores / active);
  const double l2_out_ns = 1.0 / std::min(l2_out, l2_out * p.ai_cores / active);
  const double hbm_in_ns = 1.0 / std::min(p.ddr_read_bpc * p.clock_ghz, p.hbm_gbps / active);
  const double hbm_out_ns = 1.0 / std::min(p.ub_to_ddr_bpc * p.clock_ghz, p.hbm_gbps / active);
  // A byte comes from L2 with probability l2_fraction_, else from HBM, whose share of the
  // bandwidth reads and writes use together (the `mem` timeline).
  const double f = l2_fraction_;
  for (int c = 0; c < active; ++c) {
    Core& core = em_.cores_[static_cast<std::size_t>(c)];
    core.in_ns_per_byte = f * l2_in_ns + (1 - f) * hbm_in_ns;
    core.out_ns_per_byte = f * l2_out_ns + (1 - f) * hbm_out_ns;
    core.mem_ns_per_byte = (1 - f) * active / p.hbm_gbps;
  }
}

void Launch::run_wave(int count) {
  wave_size_ = count;
  finished_ = 0;
  waiting_.clear();
  set_rates(count);
  if (count == 1) {
    run_block(queue_.front(), em_.cores_[0]);
    return;
  }
  const std::vector<std::int64_t> blocks(queue_.begin(), queue_.end());
  em_.pool_->run(
      count, [&](int s) { run_block(blocks[static_cast<std::size_t>(s)], em_.cores_[static_cast<std::size_t>(s)]); });
}

void Launch::run_block(std::int64_t block, Core& core) {
  t_core = &core;
  core.block = block;
  core.atomic_add = false;
  core.strict = em_.strict();
  core.approx_math = em_.approx_math();
  core.manual_sync = !em_.auto_sync();
  std::fill(core.v_written.begin(), core.v_written.end(), 0);  // no-auto-sync's record (v_order)
  core.v_from = core.v_written.size();
  core.v_to = 0;
  core.v_epoch = 0;
  core.pipes = PipeState{};
  core.kernel_type = 0;
  // A core's next block starts when its previous one ended, after the per-block overhead.
  if (core.blocks_run > 0) core.time.start_at(core.time.end() + cost_constants().block_overhead_us * 1000.0);
  ++core.blocks_run;
  try {
    {
      std::unique_lock lock(mutex_);
      acquire(lock, block);
    }
    body_();
    std::unique_lock lock(mutex_);
    ++permits_;
    ++finished_;
    if (!waiting_.empty() && !aborted_) {
      const std::string waiting = block_list(waiting_);
      lock.unlock();
      kernel_fail(core, fmt::format("returned while blocks {} wait in SyncAll: every block of a launch must reach "
                                    "each SyncAll, or the device hangs",
                                    waiting));
    }
    cv_.notify_all();
  } catch (const Aborted&) {
  } catch (...) {
    abort_with(std::current_exception());
  }
  core.block = -1;
  t_core = nullptr;
}

void Launch::acquire(std::unique_lock<std::mutex>& lock, std::int64_t block) {
  cv_.wait(lock, [&] { return aborted_ || (permits_ > 0 && !queue_.empty() && queue_.front() == block); });
  if (aborted_) throw Aborted{};
  queue_.pop_front();
  --permits_;
}

void Launch::abort_with(std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  if (!error_) error_ = std::move(error);
  aborted_ = true;
  ++permits_;
  cv_.notify_all();
}

void Launch::sync_all(Core& core) {
  if (core.kernel_type != 1 + AscendC::KERNEL_TYPE_MIX_AIV_1_0) {
    // The hard SyncAll is a cross-core instruction only a mix kernel is built with: the
    // toolchain's kernel type decides which cores start and how they are synchronised.
    kernel_fail(core, fmt::format("SyncAll in a kernel of type {}: hard synchronisation across cores needs "
                                  "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0) in the kernel",
                                  core.kernel_type == 0 ? "KERNEL_TYPE_AIV_ONLY (none declared)"
                                                        : "KERNEL_TYPE_AIV_ONLY"));
  }
  const int cores = em_.profile().vector_cores;
  if (block_dim_ > cores) {
    kernel_fail(core, fmt::format("SyncAll with block_dim {} above the {} vector cores of {}: blocks of later waves "
                                  "cannot start before the first wave ends, and the first wave waits for them in "
                                  "SyncAll (the device hangs); launch at most {} blocks",
                                  block_dim_, cores, em_.profile().name, cores));
  }
  std::unique_lock lock(mutex_);
  ++permits_;  // a block waiting in the barrier lets another run
  if (finished_ > 0) {
    --permits_;
    lock.unlock();
    kernel_fail(core, fmt::format("SyncAll after {} block(s) of the launch already returned without reaching it: the "
                                  "device hangs",
                                  finished_));
  }
  ++core.counters.sync_alls;
  core.pipes.barrier_all();  // SyncAll waits for every pipe of the core first
  waiting_.push_back(core.block);
  const std::uint64_t generation = generation_;
  if (static_cast<int>(waiting_.size()) == wave_size_) {
    // Everyone is here (and no core runs): the barrier ends when the slowest core arrives.
    double t = 0;
    for (int c = 0; c < wave_size_; ++c) t = std::max(t, em_.cores_[static_cast<std::size_t>(c)].time.end());
    t += cost_constants().sync_all_us * 1000.0;
    for (int c = 0; c < wave_size_; ++c) em_.cores_[static_cast<std::size_t>(c)].time.start_at(t);
    rng_.shuffle(waiting_.begin(), waiting_.end());
    queue_.insert(queue_.end(), waiting_.begin(), waiting_.end());
    waiting_.clear();
    ++generation_;
  }
  cv_.notify_all();
  cv_.wait(lock, [&] { return aborted_ || generation_ != generation; });
  if (aborted_) throw Aborted{};
  acquire(lock, core.block);
}

void Launch::warn_once(std::string_view key, const std::string& message) {
  std::lock_guard lock(mutex_);
  if (!warned_.emplace(key).second) return;
  std::fprintf(stderr, "opreg: npu (emulated): warning: %s\n", message.c_str());
}

Core& core() {
  if (t_core == nullptr) {
    fail(ErrorKind::internal,
         "Ascend C device API called outside a kernel launch (no current vector core): call it "
         "from the body given to Emulator::launch");
  }
  return *t_core;
}

void kernel_fail(const Core& core, const std::string& message) {
  if (core.launch == nullptr) fail(ErrorKind::internal, "npu kernel: {}", message);
  fail(ErrorKind::internal, "npu kernel {} (emulated), block {} of {} on vector core {}: {}", core.launch->kernel(),
       core.block, core.launch->block_dim(), core.index, message);
}

InstrCost instr_cost(std::string_view api, bool half) {
  // The A2/A3 vector instructions' measured profiles, cycles = start-up + slope x repeats, from
  // pto-isa's cost model (cce_cycle_profiles.csv: vadd 5.9 + 2.07, vadds 6 + 1, vmul 6.9 + 2.13,
  // vmuls 7 + 1, vmax/vmin 4 + 2, vmaxs/vmins 4 + 1, vabs 4 + 1, vexp 12 + 2 (f16 12 + 4), vln
  // 14 + 2 (14 + 4), vsqrt 13 + 2 (13 + 4), vrsqrt 4.8 + 1.06, vdiv 13 + 4 (13 + 8), vector_dup
  // 1 + 1, vbrcb 1 + 1, vcadd 20 + 7 (23 + 7), vcmax 8 + 7 (9 + 7), vgather 5 + 12 (7 + 24)) [S33]. The binary
  // instructions' slope of 2 is what the bank groups give two sources at one offset modulo 512 B
  // [S30], which the profile does not state; the model charges the unit 1 a repeat and lets the
  // bank groups set the rest. Reciprocal is charged as vdiv (the ISA derives vrec from it).
  struct Entry {
    std::string_view api;
    InstrCost f32;
    InstrCost f16;
  };
  static constexpr Entry kTable[] = {
      {"Add", {6, 1}, {6, 1}},          {"Sub", {6, 1}, {6, 1}},          {"Mul", {7, 1}, {7, 1}},
      {"Max", {4, 1}, {4, 1}},          {"Min", {4, 1}, {4, 1}},          {"Adds", {6, 1}, {6, 1}},
      {"Muls", {7, 1}, {7, 1}},         {"Maxs", {4, 1}, {4, 1}},         {"Mins", {4, 1}, {4, 1}},
      {"Abs", {4, 1}, {4, 1}},          {"Exp", {12, 2}, {12, 4}},        {"Ln", {14, 2}, {14, 4}},
      {"Sqrt", {13, 2}, {13, 4}},       {"Rsqrt", {5, 1}, {5, 1}},        {"Reciprocal", {13, 4}, {13, 8}},
      {"Div", {13, 4}, {13, 8}},        {"Duplicate", {1, 1}, {1, 1}},    {"Brcb", {1, 1}, {1, 1}},
      {"ReduceSum", {20, 7}, {23, 7}},  {"WholeReduceSum", {20, 7}, {23, 7}}, {"ReduceMax", {8, 7}, {9, 7}},
      {"Gather", {5, 12}, {7, 24}},
  };
  for (const Entry& e : kTable) {
    if (e.api == api) return half ? e.f16 : e.f32;
  }
  return {};
}

void device_fault(const Core& core, std::string_view error_str, const std::string& detail) {
  // The runtime's code and texts for a vector core's exception (ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
  // 507035, acl_base.h; the errorStr and retCode as the device's plog prints them [S32]).
  throw DeviceFault(ErrorKind::device,
                    fmt::format("npu runtime error 507035 (ACL_ERROR_RT_VECTOR_CORE_EXCEPTION): {} Kernel task happen "
                                "error, retCode=0x31, [vector core exception]. [npu kernel {} (emulated), block {} of {} "
                                "on vector core {}: {}; the launch's outputs are left poisoned]",
                                error_str, kernel_name(core), core.block, block_dim(core), core.index, detail));
}

std::string_view kernel_name(const Core& core) { return core.launch != nullptr ? core.launch->kernel() : ""; }
std::int64_t block_dim(const Core& core) { return core.launch != nullptr ? core.launch->block_dim() : 0; }

const GmArg* find_arg(const Core& core, const void* p, std::size_t bytes) {
  if (core.launch == nullptr) return nullptr;
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& a : core.launch->args()) {
    const auto base = reinterpret_cast<std::uintptr_t>(a.data);
    if (lo >= base && lo - base <= a.bytes && bytes <= a.bytes - (lo - base)) return &a;
  }
  return nullptr;
}

void sync_all(Core& core) { core.launch->sync_all(core); }
void declare_kernel_type(Core& core, AscendC::KernelMetaType type) {
  core.kernel_type = static_cast<std::uint8_t>(1 + type);
}
std::mutex& atomic_mutex(Core& core) { return core.launch->atomic_mutex(); }
void warn_once(Core& core, std::string_view key, const std::string& message) {
  core.launch->warn_once(key, fmt::format("npu kernel {}: {}", core.launch->kernel(), message));
}

}  // namespace detail

void Counters::add(const Counters& o) {
  gm_read += o.gm_read;
  gm_write += o.gm_write;
  dma_in += o.dma_in;
  dma_out += o.dma_out;
  dma_blocks += o.dma_blocks;
  vector_instructions += o.vector_instructions;
  vector_repeats += o.vector_repeats;
  bank_conflicts += o.bank_conflicts;
  dma_overhead += o.dma_overhead;
  scalar_accesses += o.scalar_accesses;
  scalar_fallbacks += o.scalar_fallbacks;
  atomic_adds += o.atomic_adds;
  atomic_bytes += o.atomic_bytes;
  truncated_copies += o.truncated_copies;
  truncated_bytes += o.truncated_bytes;
  sync_alls += o.sync_alls;
}

std::string LaunchCounters::note() const {
  if (block_dim == 0) return " block_dim=0 est_us=0";
  const Counters& c = counters;
  return fmt::format(
      " block_dim={} waves={} idle_cores={} ub_peak={} ub_ratio={:.2f} gm_read={} gm_write={} dma={} "
      "vec_repeats={} bank_conflicts={} dma_overhead={} atomic_adds={} scalar_fallbacks={} truncated_copies={} "
      "est_us={:.1f}{}{}",
      block_dim, waves, idle_cores, ub_peak, ub_ratio(), c.gm_read, c.gm_write, c.dma_in + c.dma_out, c.vector_repeats,
      c.bank_conflicts, c.dma_overhead, c.atomic_adds, c.scalar_fallbacks, c.truncated_copies, est_us,
      values_from.empty() ? "" : " values_from=", values_from);
}

Emulator::Emulator(DeviceModel model) : model_(model), arena_(nullptr, &std::free) {
  const int cores = model_.profile->vector_cores;
  const std::size_t per_core = (model_.ub_bytes + 63) / 64 * 64;
  arena_.reset(static_cast<std::byte*>(std::aligned_alloc(64, per_core * static_cast<std::size_t>(cores))));
  if (!arena_) fail(ErrorKind::device, "npu emulator: cannot allocate {} Unified Buffers of {} bytes", cores, per_core);
  cores_ = std::make_unique<detail::Core[]>(static_cast<std::size_t>(cores));
  pool_ = std::make_unique<detail::HostPool>();
  for (int c = 0; c < cores; ++c) {
    auto& core = cores_[static_cast<std::size_t>(c)];
    core.index = c;
    core.ub = arena_.get() + per_core * static_cast<std::size_t>(c);
    core.ub_size = static_cast<std::uint32_t>(model_.ub_bytes);
  }
}

Emulator::~Emulator() = default;

LaunchCounters Emulator::launch(std::string_view kernel, std::int64_t block_dim, std::span<const GmArg> args,
                                const std::function<void()>& body) {
  if (block_dim < 1 || block_dim > 65535) {
    if (block_dim < 1) {
      fail(ErrorKind::unsupported, "npu kernel {} (emulated): block_dim {}: a launch runs 1 to 65535 blocks", kernel,
           block_dim);
    }
    fail(ErrorKind::unsupported,
         "grid should be less than 65536! You can try \"export TRITON_ALL_BLOCKS_PARALLEL=1\" to avoid this problem. "
         "(npu kernel {} (emulated): block_dim {}; the ACL runtime refuses it as coreDim={} can't be greater than "
         "UINT16_MAX; a launch runs 1 to 65535 blocks: fold the work into fewer blocks, e.g. one per vector core)",
         kernel, block_dim, block_dim);
  }
  std::lock_guard lock(launch_mutex_);
  const std::uint64_t n = launches_.fetch_add(1);
  SplitMix mix{seed_.load() ^ (n * 0xD1B54A32D192ED03ULL)};
  const std::uint64_t seed = mix.next();
  int threads = host_threads_.load();
  if (threads <= 0) threads = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  detail::Launch launch(*this, kernel, block_dim, args, body, seed, threads);
  LaunchCounters counters = launch.run();
  record(counters);
  return counters;
}

std::optional<LaunchCounters> Emulator::last_launch() const {
  std::lock_guard lock(last_mutex_);
  return last_;
}

void Emulator::record(const LaunchCounters& counters) {
  std::lock_guard lock(last_mutex_);
  last_ = counters;
  est_us_total_ += counters.est_us;
}

double Emulator::est_us_total() const {
  std::lock_guard lock(last_mutex_);
  return est_us_total_;
}

void Emulator::counters_beside(const LaunchCounters& values) {
  std::lock_guard lock(last_mutex_);
  if (last_) last_->values_from = values.kernel;
  est_us_total_ -= values.est_us;
}

std::int64_t grid_blocks(std::span<const std::int64_t> grid) {
  if (grid.empty() || grid.size() > 3) {
    fail(ErrorKind::invalid_argument, "npu grid of {} dims: a grid has 1 to 3 dims", grid.size());
  }
  std::int64_t product = 1;
  for (const std::int64_t g : grid) {
    if (g < 1) fail(ErrorKind::invalid_argument, "npu grid dim {}: grid dims are at least 1", g);
    product = product > 65535 ? product : product * g;
  }
  if (product > 65535) {
    fail(ErrorKind::unsupported,
         "grid should be less than 65536! You can try \"export TRITON_ALL_BLOCKS_PARALLEL=1\" to avoid this problem. "
         "(the grid's dims multiply to more than 65535 blocks)");
  }
  return product;
}

}  // namespace opreg::npu
