// Safe reclamation of published registry States without a lock, a reference count or an
// allocation on the read side.
//
// Every thread that reads a State does so inside a ReadSection. Sections nest (a fallback
// dispatches again, a kernel may call another op), and each thread has one word: the nesting
// depth in its low 16 bits and, above them, how many outermost sections it has left. A writer
// that has unpublished some States asks which threads are inside right now (readers_inside())
// and frees those States once each of those threads has left that outermost section (its
// count moved on); threads outside cannot hold them, since they load the newer State when they
// enter.
//
// That "will load the newer State" needs the reader's store of its odd number ordered before
// its load of the State pointer, a store-load order x86 and Arm do not give for free. Rather
// than a fence on every call, the writer pays: Linux's membarrier(PRIVATE_EXPEDITED) runs a full
// barrier on every thread of the process that is running, so either the writer sees the
// reader's odd number or the reader sees the new State. Where membarrier is missing (old
// kernels, some sandboxes) readers fence instead, chosen once per thread.
//
// Readers are process-wide (one record per thread, reused after the thread exits), so one
// section covers every registry a thread reads, and writers of any registry see every reader.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

namespace opreg::detail {

inline constexpr std::uint64_t kDepthMask = 0xffff;

struct ReaderRecord {
  // Sections left << 16 | depth. Written by the owning thread only, read by writers.
  alignas(64) std::atomic<std::uint64_t> word{0};
  bool fence = false;                            // no membarrier: fence on entry instead
  ReaderRecord* next = nullptr;                  // all records, never freed
  bool in_use = false;                           // owned by a live thread (under the list's mutex)
};

// The calling thread's record when its sections need no fence; nullptr until its first section,
// and for good where membarrier is missing (those threads take enter_fenced()). The default TLS
// model, not initial-exec: an initial-exec variable makes all of libopreg's thread-local block
// (the static CUDA runtime's 4 KiB-aligned one too) static TLS, which a library loaded after
// start-up (Python's import) cannot get. With GCC the library uses TLS descriptors
// (-mtls-dialect=gnu2, src/CMakeLists.txt): for a library loaded at start-up the access is a
// call that returns the offset, a few instructions.
inline constinit thread_local ReaderRecord* t_reader = nullptr;

// Cold: gives the calling thread a record (and, on first use in the process, registers for
// membarrier and the thread-exit hook that returns records).
ReaderRecord* attach_reader();
// Cold: enters a section of a thread without t_reader: attaches it on its first section, and
// fences where membarrier is missing. Returns the thread's record.
ReaderRecord* enter_fenced();

class ReadSection {
 public:
  // Inline always: the dispatch path's cost is counted in instructions (docs/perf.md).
  [[gnu::always_inline]] ReadSection() : reader_(t_reader) {
    if (reader_ == nullptr) [[unlikely]] {
      reader_ = enter_fenced();
      return;
    }
    reader_->word.store(reader_->word.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order
  }
  [[gnu::always_inline]] ~ReadSection() {
    // Release: a writer that sees the new word may free what this section read.
    const std::uint64_t w = reader_->word.load(std::memory_order_relaxed);
    reader_->word.store((w & kDepthMask) == 1 ? w + kDepthMask : w - 1, std::memory_order_release);
  }
  ReadSection(const ReadSection&) = delete;
  ReadSection& operator=(const ReadSection&) = delete;

 private:
  ReaderRecord* reader_;
};

// The threads inside a section now, with their words, after a process-wide barrier: what a
// writer waits on before freeing what it unpublished before the call. Cold; takes a lock.
using ReaderSnapshot = std::vector<std::pair<const ReaderRecord*, std::uint64_t>>;
ReaderSnapshot readers_inside();
// True once every thread of the snapshot has left the section it was in.
bool all_left(const ReaderSnapshot& snapshot);

}  // namespace opreg::detail
