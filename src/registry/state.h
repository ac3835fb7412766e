// The registry's private state: what registration publishes and dispatch reads. Internal to
// src/registry (one concern a file: state.cpp publishes and reclaims, registration.cpp
// registers, inference.cpp names and infers devices, config.cpp validates and applies OPREG_*,
// dispatch.cpp chooses and calls, default_registry.cpp builds the process-wide one).
//
// Concurrency model. Everything a call reads lives in an immutable State, published through one
// atomic pointer. Registration and configuration take a mutex, build a new State (sharing the
// op tables they did not touch) and publish it. A reader holds a State only inside a
// ReadSection (reclaim.h: a per-thread counter, no lock, no shared write, no allocation), and
// an unpublished State is freed once every thread that was inside a section when it was
// unpublished has left it. The per-problem choice cache is the only mutable part of a State;
// its slots are sequence-locked atomics.
#pragma once

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opreg/registry.h"
#include "registry/reclaim.h"

namespace opreg::detail {

inline constexpr int kPlanWords = static_cast<int>(kPlanBytes / 8);

struct VariantEntry {
  const VariantInfo* info = nullptr;  // interned: lives as long as the registry (RegistryCore::intern)
  const OpDef* op = nullptr;
  Function<Verdict(const void*, const DeviceProps&)> supports;
  std::shared_ptr<const void> run;
  void (*invoke)(const void* run, const void* args, const KernelContext& ctx, const void* plan) = nullptr;
  void* user = nullptr;
  Forcing forcing = Forcing::skip_supports;
  std::uint64_t token = 0;
  std::uint64_t order = 0;  // ties in priority: an override keeps the place of what it shadows
};

struct BackendRecord {
  BackendId id = 0;
  std::string name;
  std::shared_ptr<Backend> backend;
  Availability availability;
  std::vector<DeviceProps> props;
  std::vector<void*> default_streams;
  int priority = 0;
  FallbackPolicy default_fallback = FallbackPolicy::error;
  std::vector<std::string> env_vars;
  std::string site;
  std::uint64_t token = 0;
  // false: registered while OPREG_DISABLE named it, so not probed (a disabled backend loads
  // nothing: no OpenCL for xpu); the configuration that enables it probes it.
  bool probed = true;
};

// Probes `rec`'s backend and reads its devices' properties into it (availability, props,
// streams); a bad setting (an invalid_argument error) propagates, anything else makes the
// backend unavailable with the reason.
void probe_backend(BackendRecord& rec);

// Whether `config` disables the backend of that name (OPREG_DISABLE).
bool disables_backend(const Config& config, std::string_view name);

// Before backends register: the OPREG_DISABLE list they are registered under (so a disabled one
// is not probed), without validating or applying the rest of the configuration, which
// reload_config does once they are registered. For default_registry().
void preset_disable(Registry& registry, std::vector<std::string> disable);

// One cached choice. A reader takes a snapshot between two equal even sequence numbers.
struct CacheSlot {
  std::atomic<std::uint64_t> seq{0};
  std::atomic<int> size{0};
  std::array<std::atomic<std::uint64_t>, kKeyWords> words{};
  std::atomic<const VariantEntry*> choice{nullptr};  // nullptr: no variant accepted
  std::atomic<const KernelContext*> ready{nullptr};  // the choice's on the key's device
  std::atomic<int> plan_words{0};                     // the choice's plan (0: none)
  std::array<std::atomic<std::uint64_t>, kPlanWords> plan{};
};

// ProblemKey::hash, inline for the entry points' path by problem: a rotate and an xor per word, one
// multiply at the end. Only a slot of a small table is chosen with it (the whole key is compared),
// so a collision costs a miss, never a wrong answer.
// (Word by word, so that a key's maker can hash as it writes: hash_word per word from 0, then
// hash_finish with the key's size.)
[[gnu::always_inline]] inline std::uint64_t hash_word(std::uint64_t h, std::uint64_t word) {
  return ((h << 23) | (h >> 41)) ^ word;
}
[[gnu::always_inline]] inline std::uint64_t hash_finish(std::uint64_t h, int size) {
  return (h ^ static_cast<std::uint64_t>(size)) * 0x9E3779B97F4A7C15ULL;  // high bits depend on every bit
}
[[gnu::always_inline]] inline std::uint64_t key_hash(const ProblemKey& key) {
  std::uint64_t h = 0;
  for (int i = 0; i < key.size; ++i) h = hash_word(h, key.words[static_cast<std::size_t>(i)]);
  return hash_finish(h, key.size);
}

// The key's bits of a call's tensors, in the op's order (dispatch.cpp's build_key and the entry
// points' path by problem make keys with it, so that both find each other's choices): presence,
// contiguity, and 7 bits a tensor for its dtype and the log2 of its data alignment capped at 64
// bytes (what vector loads and the NPU's 32-byte block copies care about), nine to a word. An
// undefined tensor is a default one (f32, no data, contiguous): its bits are the same on every
// call and `defined` tells it apart.
struct TensorBits {
  std::uint64_t defined = 0;
  std::uint64_t contiguous = 0;
  std::array<std::uint64_t, 2> packed{};
  static constexpr int kPerWord = 9;
  [[gnu::always_inline]] void add(int i, const Tensor& t) {
    contiguous |= static_cast<std::uint64_t>(t.is_contiguous()) << i;
    add_contiguous(i, t);
  }
  // add() of a tensor the caller knows to be contiguous or undefined (then `contiguous` is left
  // as it is, and start_key must be given contiguous == defined).
  [[gnu::always_inline]] void add_contiguous(int i, const Tensor& t) {
    defined |= static_cast<std::uint64_t>(t.defined()) << i;
    const auto address = reinterpret_cast<std::uintptr_t>(t.data()) | 64U;
    const std::uint64_t bits =
        static_cast<std::uint64_t>(t.dtype()) | static_cast<std::uint64_t>(__builtin_ctzll(address)) << 4;
    packed[static_cast<std::size_t>(i / kPerWord)] |= bits << (7 * (i % kPerWord));
  }
  // The key's leading words: word 0 the device, presence, contiguity and the first tensor's rank;
  // then dtypes and alignments; then the first (defined) tensor's shape. At most 3 + kMaxDims
  // words: within kKeyWords. Returns their hash_word chain.
  [[gnu::always_inline]] std::uint64_t start_key(ProblemKey& key, Device device, int tensors,
                                                 const Tensor& first) const {
    const int ndim = first.ndim();
    const std::uint64_t contiguous_defined = contiguous & defined;
    const std::uint64_t word0 = static_cast<std::uint64_t>(device.backend) |
                                static_cast<std::uint64_t>(static_cast<std::uint16_t>(device.index)) << 8 |
                                defined << 24 | contiguous_defined << 40 | static_cast<std::uint64_t>(ndim) << 56;
    key.words[0] = word0;
    key.words[1] = packed[0];
    std::uint64_t h = hash_word(hash_word(0, word0), packed[0]);
    int size = 2;
    if (tensors > kPerWord) {
      key.words[static_cast<std::size_t>(size++)] = packed[1];
      h = hash_word(h, packed[1]);
    }
    const std::span<const std::int64_t> dims = first.shape().dims();
    for (int d = 0; d < ndim; ++d) {
      const auto w = static_cast<std::uint64_t>(dims[d]);
      key.words[static_cast<std::size_t>(size + d)] = w;
      h = hash_word(h, w);
    }
    key.size = size + ndim;
    return h;
  }
};

struct Lookup {
  bool hit = false;
  const VariantEntry* choice = nullptr;
  const KernelContext* ready = nullptr;
  const void* plan = nullptr;  // into the caller's PlanCopy, or nullptr
};

// A plan copied out of the cache (or made by a miss) for one call.
struct PlanCopy {
  alignas(8) std::array<std::uint64_t, kPlanWords> words;
  PlanCopy() {}  // words stay uninitialised: only the plan's are written and read
};

struct ChoiceCache {
  static constexpr int kSlotBits = 7;
  static constexpr std::size_t kSlots = std::size_t{1} << kSlotBits;
  std::array<CacheSlot, kSlots> slots;
  static std::size_t index(std::uint64_t hash) { return static_cast<std::size_t>(hash >> (64 - kSlotBits)); }

  [[gnu::always_inline]] Lookup find(const ProblemKey& key, std::uint64_t hash, PlanCopy& plan) const {
    const CacheSlot& slot = slots[index(hash)];
    const std::uint64_t s1 = slot.seq.load(std::memory_order_acquire);
    if (s1 == 0 || (s1 & 1U) != 0) return {};
    bool same = slot.size.load(std::memory_order_relaxed) == key.size;
    if (same) {
      std::uint64_t differ = 0;
      for (int i = 0; i < key.size; ++i) {
        differ |= slot.words[static_cast<std::size_t>(i)].load(std::memory_order_relaxed) ^
                  key.words[static_cast<std::size_t>(i)];
      }
      same = differ == 0;
    }
    const VariantEntry* choice = slot.choice.load(std::memory_order_relaxed);
    const KernelContext* ready = slot.ready.load(std::memory_order_relaxed);
    const int words = slot.plan_words.load(std::memory_order_relaxed);
    for (int i = 0; i < words && i < kPlanWords; ++i) {
      plan.words[static_cast<std::size_t>(i)] = slot.plan[static_cast<std::size_t>(i)].load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (!same || slot.seq.load(std::memory_order_relaxed) != s1) return {};
    return {true, choice, ready, words > 0 ? plan.words.data() : nullptr};
  }

  void insert(const ProblemKey& key, std::uint64_t hash, const VariantEntry* choice, const KernelContext* ready,
              const PlanData& plan) {
    CacheSlot& slot = slots[index(hash)];
    std::uint64_t s = slot.seq.load(std::memory_order_relaxed);
    if ((s & 1U) != 0 || !slot.seq.compare_exchange_strong(s, s + 1, std::memory_order_acquire)) return;
    std::atomic_thread_fence(std::memory_order_release);
    slot.size.store(key.size, std::memory_order_relaxed);
    for (int i = 0; i < key.size; ++i) {
      slot.words[static_cast<std::size_t>(i)].store(key.words[static_cast<std::size_t>(i)],
                                                    std::memory_order_relaxed);
    }
    slot.choice.store(choice, std::memory_order_relaxed);
    slot.ready.store(ready, std::memory_order_relaxed);
    const int words = static_cast<int>((plan.size + 7) / 8);
    slot.plan_words.store(words, std::memory_order_relaxed);
    for (int i = 0; i < words; ++i) {
      std::uint64_t w;
      std::memcpy(&w, plan.bytes.data() + 8 * i, sizeof w);
      slot.plan[static_cast<std::size_t>(i)].store(w, std::memory_order_relaxed);
    }
    slot.seq.store(s + 2, std::memory_order_release);
  }
};

struct BackendTable {
  std::vector<const VariantEntry*> order;     // enabled variants, in choice order
  std::vector<const VariantEntry*> disabled;  // by OPREG_DISABLE, for explanations
  const VariantEntry* forced = nullptr;       // by OPREG_FORCE_VARIANT
  const VariantEntry* fast = nullptr;         // the choice whatever the problem: no cache needed
  // Unless the backend is disabled: each variant of `order` on each device with the KernelContext
  // a call passes on the device's default stream (contexts[position * devices + index]), made
  // when the table is, so that a call need not fill one in.
  std::vector<KernelContext> contexts;
  std::size_t devices = 0;
  const KernelContext* fast_contexts = nullptr;      // `fast`'s, when there is one
  std::size_t fast_devices = 0;                      // `devices` where fast_contexts is set, else 0
  mutable std::atomic<ChoiceCache*> cache{nullptr};  // made on the first miss
  ~BackendTable() { delete cache.load(); }

  // v's context on device `index` (v from `order`); nullptr where there are none.
  const KernelContext* ready(const VariantEntry* v, int index) const {
    for (std::size_t k = 0; k < order.size() && !contexts.empty(); ++k) {
      if (order[k] == v) return &contexts[k * devices + static_cast<std::size_t>(index)];
    }
    return nullptr;
  }
};

struct OpTable {
  std::array<std::unique_ptr<BackendTable>, kMaxBackends> backends;
  // Owns what the backend tables point to, so a variant unregistered meanwhile outlives every
  // State that can still choose it.
  std::vector<std::shared_ptr<const VariantEntry>> entries;
};

struct State {
  std::array<std::shared_ptr<const OpTable>, kMaxOps> ops;
  std::array<std::shared_ptr<const BackendRecord>, kMaxBackends> backends;
  std::array<FallbackPolicy, kMaxBackends> fallback{};
  std::array<bool, kMaxBackends> disabled{};
  std::vector<std::pair<std::string, std::string>> absent;  // built-in backends not built: name, why
  Config config;
};

struct InfoLess {
  bool operator()(const std::unique_ptr<const VariantInfo>& a, const std::unique_ptr<const VariantInfo>& b) const;
};

struct RegistryCore {
  Registry* registry = nullptr;  // the one this is the core of: what kernels are told
  std::mutex mutex;  // registration, configuration, publication
  std::atomic<const State*> current{nullptr};
  std::unique_ptr<const State> published;  // owns `current`
  // Unpublished States: `unpublished` since the last grace period began, then in `retiring`
  // until the readers inside at its start have left (reclaim()).
  struct Retiring {
    ReaderSnapshot waiting;
    std::vector<std::unique_ptr<const State>> states;
  };
  std::vector<std::unique_ptr<const State>> unpublished;
  std::vector<Retiring> retiring;
  // Freed when the WriteLock is released.
  std::vector<std::unique_ptr<const State>> garbage;
  std::vector<std::shared_ptr<VariantEntry>> garbage_entries;
  std::array<std::shared_ptr<const BackendRecord>, kMaxBackends> backends;
  // The backend that last held each id: its id is not reused while its tensors are alive.
  std::array<std::shared_ptr<Backend>, kMaxBackends> previous_holder;
  std::vector<std::pair<std::string, std::string>> absent;
  std::map<std::string, std::vector<std::shared_ptr<VariantEntry>>> variants;  // name -> override stack
  // Every distinct VariantInfo registered, so that the pointers DispatchResult and choose() hand
  // out stay valid for the registry's lifetime; registering the same variant again (a plugin or
  // test that comes and goes) reuses its record, so this grows with distinct variants only.
  std::set<std::unique_ptr<const VariantInfo>, InfoLess> infos;
  Config config;
  std::uint64_t next_token = 1;

  std::mutex plugins_mutex;          // one plugin load at a time
  std::vector<std::string> plugins;  // loaded, as resolved paths

  std::mutex log_mutex;
  Function<void(std::string_view)> sink;
  std::mutex seen_mutex;
  std::set<std::vector<std::uint64_t>> seen;  // problems already logged at OPREG_VERBOSE >= 1

  std::atomic<std::uint64_t> fallbacks{0};
  std::atomic<std::uint64_t> misses{0};
  std::array<std::array<std::atomic<std::uint64_t>, kMaxBackends>, kMaxOps> fallbacks_by{};
  std::array<std::array<std::atomic<bool>, kMaxBackends>, kMaxOps> warned{};

  ~RegistryCore();

  void log(std::string_view line) {
    std::lock_guard lock(log_mutex);
    if (sink) {
      sink(line);
    } else {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    }
  }

  // Must hold `mutex`. Rebuilds the tables of `op_id` (or every op for -1), publishes, and frees
  // the unpublished States no reader can hold any more.
  void publish(int op_id);
  void reclaim();
  const VariantInfo* intern(VariantInfo info);
  std::shared_ptr<const OpTable> build_op_table(int op_id, const State& s) const;
  // Throws for a bad setting; returns the names that wait for a backend to register.
  std::vector<std::string> validate(const Config& c) const;
  void unregister(Registration::Kind kind, std::uint64_t token);
  // Must hold `mutex`. Probes the backends registered while disabled that `config` enables.
  void probe_enabled();
  // Takes `mutex`: probes the backend of that name if it was registered unprobed, and publishes.
  void probe_named(std::string_view name);
  const VariantEntry* active_variant(std::string_view name) const {
    auto it = variants.find(std::string(name));
    return it == variants.end() || it->second.empty() ? nullptr : it->second.back().get();
  }
};

// `mutex`, for registration and configuration; what they free is freed after it is released.
class WriteLock {
 public:
  explicit WriteLock(RegistryCore& core) : core_(core), lock_(core.mutex) {}
  ~WriteLock();
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;
  void unlock();  // early (set_config logs after it); frees what was collected

 private:
  RegistryCore& core_;
  std::unique_lock<std::mutex> lock_;
};

// The published State, held for as long as this object lives (which is a ReadSection).
class StateRef {
 public:
  [[gnu::always_inline]] explicit StateRef(const RegistryCore& core)
      : state_(core.current.load(std::memory_order_acquire)) {}
  [[gnu::always_inline]] ~StateRef() {}  // NOLINT(modernize-use-equals-default): the attribute needs a body
  StateRef(const StateRef&) = delete;
  StateRef& operator=(const StateRef&) = delete;
  const State& operator*() const { return *state_; }
  const State* operator->() const { return state_; }

 private:
  ReadSection section_;  // first: entered before the load above
  const State* state_;
};

// ---- Helpers for messages, shared by the files of the registry.

std::string join(const std::vector<std::string>& items, std::string_view sep = ", ");
// The names of the registered backends, in id order.
std::vector<std::string> backend_names(const std::array<std::shared_ptr<const BackendRecord>, kMaxBackends>& slots);
// "cpu, npu, npu:0, cuda (unavailable)": what a device string may name, for errors.
std::string accepted_devices(const State& s);
// The built-in backends this build lacks (declare_absent_backend).
std::vector<std::string> absent_names(const State& s);

// A device string checked for syntax and backend name (inference.cpp has the rules).
struct DeviceText {
  const BackendRecord* backend = nullptr;
  std::string_view index;  // the digits as written ("0" when none were)
};
DeviceText parse_device_text(const State& s, std::string_view text);
// parse_device_text, and the index representable (else missing_device).
Device parse_device_in(const State& s, std::string_view text);
// Throws the device error for a device of `b` that is unavailable or beyond its device count,
// `shown` being how the device is written in the message.
[[noreturn]] void missing_device(const BackendRecord& b, std::string_view shown);

}  // namespace opreg::detail
