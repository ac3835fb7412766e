// Reader records and the writer's side of reclamation (see reclaim.h).
#include "registry/reclaim.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

namespace opreg::detail {
namespace {

// The record of a thread whose sections fence (no membarrier); t_reader stays nullptr there.
thread_local ReaderRecord* t_fenced_reader = nullptr;

struct Readers {
  std::mutex mutex;
  ReaderRecord* head = nullptr;
  pthread_key_t exit_key{};
  bool expedited = false;  // membarrier(PRIVATE_EXPEDITED) is registered for this process

  Readers() {
    expedited = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    // The key's destructor returns a thread's record when the thread exits.
    pthread_key_create(&exit_key, [](void* record) {
      auto* r = static_cast<ReaderRecord*>(record);
      t_reader = nullptr;
      t_fenced_reader = nullptr;
      Readers& self = readers();
      std::lock_guard lock(self.mutex);
      r->in_use = false;
    });
  }

  static Readers& readers() {
    static Readers* instance = new Readers();  // never destroyed: threads may exit after main
    return *instance;
  }
};

}  // namespace

ReaderRecord* attach_reader() {
  Readers& all = Readers::readers();
  ReaderRecord* r = nullptr;
  {
    std::lock_guard lock(all.mutex);
    for (ReaderRecord* p = all.head; p != nullptr && r == nullptr; p = p->next) {
      if (!p->in_use) r = p;
    }
    if (r == nullptr) {
      r = new ReaderRecord();
      r->next = all.head;
      all.head = r;
    }
    r->in_use = true;
  }
  r->fence = !all.expedited;
  pthread_setspecific(all.exit_key, r);
  (r->fence ? t_fenced_reader : t_reader) = r;
  return r;
}

ReaderRecord* enter_fenced() {
  ReaderRecord* r = t_fenced_reader;
  if (r == nullptr) r = attach_reader();
  r->word.store(r->word.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (r->fence) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_signal_fence(std::memory_order_seq_cst);  // attached just now: t_reader is set
  }
  return r;
}

ReaderSnapshot readers_inside() {
  Readers& all = Readers::readers();
  if (all.expedited) {
    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with the readers' fences
  }
  ReaderSnapshot inside;
  std::lock_guard lock(all.mutex);
  for (const ReaderRecord* p = all.head; p != nullptr; p = p->next) {
    const std::uint64_t word = p->word.load(std::memory_order_acquire);
    if ((word & kDepthMask) != 0) inside.emplace_back(p, word);
  }
  return inside;
}

bool all_left(const ReaderSnapshot& snapshot) {
  // Left the outermost section: the count above the depth moved on (the depth alone can
  // change while the thread stays inside).
  for (const auto& [record, word] : snapshot) {
    if ((record->word.load(std::memory_order_acquire) >> 16) == (word >> 16)) return false;
  }
  return true;
}

}  // namespace opreg::detail
