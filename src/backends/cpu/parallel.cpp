// The worker pool behind run_items (see parallel.h).
//
// One word of state coordinates a job: the job's generation (bits 16..31), whether it is open
// for workers to join (bit 15) and how many workers are inside it (bits 0..14). A worker joins
// with one compare-exchange that succeeds only while the job is open, so the caller, once it
// has closed the job, waits exactly for the workers that are inside it (each finishing the one
// item it holds) and never for a worker that is still asleep or waiting for a core.
#include "backends/cpu/parallel.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace opreg::cpu {
namespace {

constexpr std::uint32_t kOpen = 1U << 15;
constexpr std::uint32_t kActive = kOpen - 1;
constexpr std::uint32_t kGeneration = ~((1U << 16) - 1);
constexpr std::uint32_t kGenerationStep = 1U << 16;
// How long an idle worker keeps looking for the next job before it sleeps, in pause
// instructions (a few tens of microseconds): the phases of one kernel follow each other within
// that, so a worker stays awake across them, and between calls it gives its core back.
constexpr int kSpins = 4000;
// Workers the pool will ever start (OPREG_NUM_THREADS may ask for more; the rest run nothing).
constexpr int kMaxWorkers = kActive;

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

struct Job {
  void (*body)(void*, std::int64_t, int) = nullptr;
  void* arg = nullptr;
  std::int64_t items = 0;
  int team = 1;
  std::atomic<std::int64_t> next{0};
  std::atomic<int> joined{0};

  void work(int slot) {
    for (std::int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < items;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      body(arg, i, slot);
    }
  }
};

class Pool {
 public:
  // Never destroyed: workers may still be asleep in it when the process exits.
  static Pool& instance() {
    static Pool* pool = new Pool;
    return *pool;
  }

  // One caller at a time; another one meanwhile runs its job alone.
  bool try_claim() { return !busy_.exchange(true, std::memory_order_acquire); }
  void release() { busy_.store(false, std::memory_order_release); }

  // The claimer's job: open it, work on it, close it, wait for the workers inside.
  void run(Job& job) {
    grow(job.team - 1);
    job_ = &job;
    std::uint32_t s = state_.load(std::memory_order_relaxed);  // closed, nobody inside
    s = ((s & kGeneration) + kGenerationStep) | kOpen;
    state_.store(s, std::memory_order_release);
    state_.notify_all();
    job.work(0);
    s = state_.fetch_and(~kOpen, std::memory_order_acq_rel) & ~kOpen;
    for (int spin = 0; (s & kActive) != 0; ++spin) {
      if (spin < kSpins) {
        relax();
      } else {
        state_.wait(s, std::memory_order_acquire);
      }
      s = state_.load(std::memory_order_acquire);
    }
  }

 private:
  void grow(int wanted) {
    wanted = std::min(wanted, kMaxWorkers);
    while (workers_ < wanted) {
      try {
        // The generation before the job it is started for, so that it joins that job.
        std::thread(&Pool::worker, this, state_.load(std::memory_order_relaxed) & kGeneration).detach();
      } catch (...) {
        return;  // no more threads to be had: the team runs with fewer
      }
      ++workers_;
    }
  }

  void worker(std::uint32_t last) {
    for (;;) {
      std::uint32_t s = state_.load(std::memory_order_acquire);
      for (int spin = 0; (s & kOpen) == 0 || (s & kGeneration) == last; ++spin) {
        if (spin < kSpins) {
          relax();
        } else {
          state_.wait(s, std::memory_order_acquire);
        }
        s = state_.load(std::memory_order_acquire);
      }
      if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed)) continue;
      last = s & kGeneration;
      Job& job = *job_;  // published before the job opened; stays alive while we are counted
      const int slot = 1 + job.joined.fetch_add(1, std::memory_order_relaxed);
      if (slot < job.team) job.work(slot);
      const std::uint32_t before = state_.fetch_sub(1, std::memory_order_acq_rel);
      if ((before & kActive) == 1 && (before & kOpen) == 0) state_.notify_all();  // the caller waits
    }
  }

  std::atomic<bool> busy_{false};
  std::atomic<std::uint32_t> state_{0};
  Job* job_ = nullptr;
  int workers_ = 0;  // touched only by the claimer
};

}  // namespace

int machine_threads() {
  static const int count = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return count;
}

int team_size(int threads, std::int64_t elements) {
  if (elements < kSerialBelow) return 1;
  const std::int64_t wanted = threads > 0 ? threads : machine_threads();
  return static_cast<int>(std::max<std::int64_t>(1, std::min(wanted, elements / kMinPerThread)));
}

void run_items(int team, std::int64_t items, void (*body)(void*, std::int64_t, int), void* arg) {
  Pool& pool = Pool::instance();
  if (team <= 1 || items <= 1 || !pool.try_claim()) {
    for (std::int64_t i = 0; i < items; ++i) body(arg, i, 0);
    return;
  }
  Job job;
  job.body = body;
  job.arg = arg;
  job.items = items;
  job.team = team;
  pool.run(job);
  pool.release();
}

}  // namespace opreg::cpu
