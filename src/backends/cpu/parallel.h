// The cpu kernels' threads: a small pool of workers that block when idle, and the rule that
// sizes a team by the work.
//
// Why not OpenMP: an OpenMP team's threads spin at its barriers, and a problem split statically
// waits for its slowest thread. On a machine where another process keeps a core busy, the
// thread on that core gets half of it and holds everyone up (256x4096 bf16 took 31 ms where the
// serial loop takes 1). Here the caller works too, items are handed out one at a time, a worker
// that has not arrived yet is simply not waited for, and an idle worker sleeps in the kernel
// after a short spin.
#pragma once

#include <cstdint>

namespace opreg::cpu {

// Problems below this many elements run on the calling thread: waking a worker costs more than
// they take (measured with bench/bench_cpu_busy: see docs/perf.md).
inline constexpr std::int64_t kSerialBelow = 1 << 15;
// Each thread of a team gets at least this many elements.
inline constexpr std::int64_t kMinPerThread = 1 << 14;

// The threads this process may run on (its CPU affinity), at least 1.
int machine_threads();

// The team for a problem of `elements`: 1 below kSerialBelow, else `threads` (0: machine_threads())
// capped by elements / kMinPerThread.
int team_size(int threads, std::int64_t elements);

// Runs body(job, item, slot) for every item in [0, items) on the calling thread (slot 0) and up
// to team - 1 pool workers (slots 1 .. team - 1), and returns when every item is done. A team of
// one, a single item, or a pool already busy with another caller's job runs everything on the
// calling thread. Items are taken one at a time from a shared counter.
void run_items(int team, std::int64_t items, void (*body)(void* job, std::int64_t item, int slot), void* job);

}  // namespace opreg::cpu
