// The registry: backends, variants, configuration, and the dispatch hot path.
//
// Concurrency model. Everything a call reads lives in an immutable State, published through one
// atomic pointer. Registration and configuration take a mutex, build a new State (sharing the
// op tables they did not touch) and publish it. Old States are retired, not freed, until the
// registry is destroyed: a dispatching thread may still be reading one, and registration is a
// set-up activity, so the memory this keeps (about 2 KiB per change) is the price of a hot path
// with no lock, no reference count and no allocation. The per-problem choice cache is the only
// mutable part of a State; its slots are sequence-locked atomics.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>

#include "backends/builtin.h"
#include "opreg/registry.h"
#include "registry/names.h"
#include "registry/fail.h"

namespace opreg {
namespace detail {

struct VariantEntry {
  VariantInfo info;
  const OpDef* op = nullptr;
  Function<Verdict(const void*, const DeviceProps&)> supports;
  std::shared_ptr<const void> run;
  void (*invoke)(const void* run, const void* args, const KernelContext& ctx) = nullptr;
  void* user = nullptr;
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
};

// One cached choice. A reader takes a snapshot between two equal even sequence numbers.
struct CacheSlot {
  std::atomic<std::uint64_t> seq{0};
  std::atomic<int> size{0};
  std::array<std::atomic<std::uint64_t>, kKeyWords> words{};
  std::atomic<const VariantEntry*> choice{nullptr};  // nullptr: no variant accepted
};

struct Lookup {
  bool hit = false;
  const VariantEntry* choice = nullptr;
};

struct ChoiceCache {
  static constexpr std::size_t kSlots = 128;
  std::array<CacheSlot, kSlots> slots;

  Lookup find(const ProblemKey& key, std::uint64_t hash) const {
    const CacheSlot& slot = slots[hash % kSlots];
    const std::uint64_t s1 = slot.seq.load(std::memory_order_acquire);
    if (s1 == 0 || (s1 & 1U) != 0) return {};
    bool same = slot.size.load(std::memory_order_relaxed) == key.size;
    for (int i = 0; same && i < key.size; ++i) {
      same = slot.words[static_cast<std::size_t>(i)].load(std::memory_order_relaxed) ==
             key.words[static_cast<std::size_t>(i)];
    }
    const VariantEntry* choice = slot.choice.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (!same || slot.seq.load(std::memory_order_relaxed) != s1) return {};
    return {true, choice};
  }

  void insert(const ProblemKey& key, std::uint64_t hash, const VariantEntry* choice) {
    CacheSlot& slot = slots[hash % kSlots];
    std::uint64_t s = slot.seq.load(std::memory_order_relaxed);
    if ((s & 1U) != 0 || !slot.seq.compare_exchange_strong(s, s + 1, std::memory_order_acquire)) return;
    std::atomic_thread_fence(std::memory_order_release);
    slot.size.store(key.size, std::memory_order_relaxed);
    for (int i = 0; i < key.size; ++i) {
      slot.words[static_cast<std::size_t>(i)].store(key.words[static_cast<std::size_t>(i)],
                                                    std::memory_order_relaxed);
    }
    slot.choice.store(choice, std::memory_order_relaxed);
    slot.seq.store(s + 2, std::memory_order_release);
  }
};

struct BackendTable {
  std::vector<const VariantEntry*> order;     // enabled variants, in choice order
  std::vector<const VariantEntry*> disabled;  // by OPREG_DISABLE, for explanations
  const VariantEntry* forced = nullptr;       // by OPREG_FORCE_VARIANT
  const VariantEntry* fast = nullptr;         // the choice whatever the problem: no cache needed
  mutable std::atomic<ChoiceCache*> cache{nullptr};  // made on the first miss
  ~BackendTable() { delete cache.load(); }
};

struct OpTable {
  std::array<std::unique_ptr<BackendTable>, kMaxBackends> backends;
};

struct State {
  std::array<std::shared_ptr<const OpTable>, kMaxOps> ops;
  std::array<std::shared_ptr<const BackendRecord>, kMaxBackends> backends;
  std::array<FallbackPolicy, kMaxBackends> fallback{};
  std::array<bool, kMaxBackends> disabled{};
  std::vector<std::pair<std::string, std::string>> absent;  // built-in backends not built: name, why
  Config config;
};

struct RegistryCore {
  std::mutex mutex;  // registration, configuration, publication
  std::atomic<const State*> current{nullptr};
  std::vector<std::unique_ptr<const State>> retired;
  std::array<std::shared_ptr<const BackendRecord>, kMaxBackends> backends;
  // The backend that last held each id: its id is not reused while its tensors are alive.
  std::array<std::shared_ptr<Backend>, kMaxBackends> previous_holder;
  std::vector<std::pair<std::string, std::string>> absent;
  std::map<std::string, std::vector<std::shared_ptr<VariantEntry>>> variants;  // name -> override stack
  std::vector<std::shared_ptr<VariantEntry>> every_entry;  // kept for retired States
  Config config;
  std::uint64_t next_token = 1;

  std::mutex log_mutex;
  Function<void(std::string_view)> sink;
  std::mutex seen_mutex;
  std::set<std::vector<std::uint64_t>> seen;  // problems already logged at OPREG_VERBOSE >= 1

  std::atomic<std::uint64_t> fallbacks{0};
  std::atomic<std::uint64_t> misses{0};
  std::array<std::array<std::atomic<std::uint64_t>, kMaxBackends>, kMaxOps> fallbacks_by{};
  std::array<std::array<std::atomic<bool>, kMaxBackends>, kMaxOps> warned{};

  const State& state() const { return *current.load(std::memory_order_acquire); }

  void log(std::string_view line) {
    std::lock_guard lock(log_mutex);
    if (sink) {
      sink(line);
    } else {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    }
  }

  // Must hold `mutex`. Rebuilds the tables of `op_id` (or every op for -1) and publishes.
  void publish(int op_id);
  std::shared_ptr<const OpTable> build_op_table(int op_id, const State& s) const;
  // Throws for a bad setting; returns the names that wait for a backend to register.
  std::vector<std::string> validate(const Config& c) const;
  void unregister(Registration::Kind kind, std::uint64_t token);
  const VariantEntry* active_variant(std::string_view name) const {
    auto it = variants.find(std::string(name));
    return it == variants.end() || it->second.empty() ? nullptr : it->second.back().get();
  }
};

void RegistryCore::publish(int op_id) {
  auto s = std::make_unique<State>();
  if (const State* old = current.load(std::memory_order_relaxed)) s->ops = old->ops;
  s->backends = backends;
  s->absent = absent;
  s->config = config;
  for (const auto& b : backends) {
    if (!b) continue;
    s->fallback[b->id] = config.fallback.value_or(b->default_fallback);
    s->disabled[b->id] = std::find(config.disable.begin(), config.disable.end(), b->name) != config.disable.end();
  }
  std::set<int> ops;
  if (op_id >= 0) {
    ops.insert(op_id);
  } else {
    for (int i = 0; i < kMaxOps; ++i) {
      if (s->ops[static_cast<std::size_t>(i)]) ops.insert(i);
    }
    for (const auto& [name, stack] : variants) {
      if (!stack.empty()) ops.insert(stack.back()->op->id);
    }
  }
  for (int id : ops) s->ops[static_cast<std::size_t>(id)] = build_op_table(id, *s);
  // Retire first: if that allocation throws, nothing was published and `s` just goes away.
  retired.push_back(std::move(s));
  current.store(retired.back().get(), std::memory_order_release);
}

std::shared_ptr<const OpTable> RegistryCore::build_op_table(int op_id, const State& s) const {
  auto table = std::make_shared<OpTable>();
  bool any = false;
  for (const auto& [name, stack] : variants) {
    if (stack.empty() || stack.back()->op->id != op_id) continue;
    const VariantEntry* v = stack.back().get();
    BackendId id = 0;
    bool found = false;
    for (const auto& b : s.backends) {
      if (b && b->name == v->info.backend) {
        id = b->id;
        found = true;
      }
    }
    if (!found) continue;  // its backend was unregistered; it comes back if the backend does
    auto& bt = table->backends[id];
    if (!bt) bt = std::make_unique<BackendTable>();
    any = true;
    const auto& cfg = s.config;
    if (std::find(cfg.disable.begin(), cfg.disable.end(), v->info.name) != cfg.disable.end()) {
      bt->disabled.push_back(v);
    } else {
      bt->order.push_back(v);
      if (std::find(cfg.force_variants.begin(), cfg.force_variants.end(), v->info.name) != cfg.force_variants.end()) {
        bt->forced = v;
      }
    }
  }
  if (!any) return nullptr;
  for (auto& bt : table->backends) {
    if (!bt) continue;
    std::stable_sort(bt->order.begin(), bt->order.end(), [](const VariantEntry* a, const VariantEntry* b) {
      return a->info.priority != b->info.priority ? a->info.priority > b->info.priority : a->order < b->order;
    });
    // The choice needs no cache when it cannot depend on the problem; at OPREG_VERBOSE >= 1 the
    // cache path is kept so that the first dispatch of each problem is logged.
    if (s.config.verbose == 0) {
      if (bt->forced != nullptr) {
        bt->fast = bt->forced;
      } else if (!bt->order.empty() && !bt->order.front()->supports) {
        bt->fast = bt->order.front();
      }
    }
  }
  return table;
}

}  // namespace detail

using detail::BackendRecord;
using detail::BackendTable;
using detail::RegistryCore;
using detail::State;
using detail::VariantEntry;

namespace {

std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// The names of the registered backends, in id order (for error messages).
std::vector<std::string> backend_names(const std::array<std::shared_ptr<const BackendRecord>, kMaxBackends>& slots) {
  std::vector<std::string> out;
  for (const auto& b : slots) {
    if (b) out.push_back(b->name);
  }
  return out;
}

std::string describe_tensors(const Registry& r, const TensorList& list) {
  std::string out;
  for (int i = 0; i < list.size(); ++i) {
    const Tensor& t = *list[i].tensor;
    if (!t.defined()) continue;
    if (!out.empty()) out += ' ';
    out += fmt::format("{}={}[{}]@{}", list[i].name, to_string(t.dtype()), t.shape().str(), r.device_name(t.device()));
  }
  return out;
}

void build_key(const detail::OpDef& op, const void* args, Device device, const TensorList& list, ProblemKey& key) {
  std::uint64_t defined = 0;
  std::uint64_t contiguous = 0;
  std::uint64_t dtypes = 0;
  // 3 bits a tensor: log2 of the data's alignment, capped at 64 bytes (what vector loads and the
  // NPU's 32-byte block copies care about), so allocator-aligned tensors share one key.
  std::uint64_t alignment = 0;
  const Tensor* first = nullptr;
  for (int i = 0; i < list.size(); ++i) {
    const Tensor& t = *list[i].tensor;
    if (!t.defined()) continue;
    if (first == nullptr) first = &t;
    defined |= 1ULL << i;
    if (t.is_contiguous()) contiguous |= 1ULL << i;
    dtypes |= static_cast<std::uint64_t>(t.dtype()) << (4 * i);
    const auto address = reinterpret_cast<std::uintptr_t>(t.data()) | 64U;
    alignment |= static_cast<std::uint64_t>(__builtin_ctzll(address)) << (3 * i);
  }
  key.add(static_cast<std::uint64_t>(device.backend) | static_cast<std::uint64_t>(device.index) << 8 |
          defined << 24 | contiguous << 40);
  key.add(dtypes);
  key.add(alignment);
  key.add(static_cast<std::uint64_t>(first->ndim()));
  for (auto d : first->shape().dims()) key.add(static_cast<std::uint64_t>(d));
  for (int i = 0; i < list.size(); ++i) {
    const Tensor& t = *list[i].tensor;
    if (!t.defined() || t.is_contiguous()) continue;
    for (auto st : t.strides()) key.add(static_cast<std::uint64_t>(st));
  }
  op.key(op, args, key);
}

}  // namespace

std::uint64_t ProblemKey::hash() const {
  // Multiply-xorshift per word: enough spread for a 128-slot table, a few cycles per word.
  std::uint64_t h = static_cast<std::uint64_t>(size);
  for (int i = 0; i < size; ++i) {
    h = (h ^ words[static_cast<std::size_t>(i)]) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 32;
  }
  return h;
}

bool operator==(const ProblemKey& a, const ProblemKey& b) {
  return a.size == b.size && a.overflow == b.overflow &&
         std::equal(a.words.begin(), a.words.begin() + a.size, b.words.begin());
}

std::string VariantInfo::tunables_str() const {
  std::string out;
  for (const auto& t : tunables) {
    if (!out.empty()) out += ' ';
    out += t.name + "=" + t.value;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Registration handles.

Registration& Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    reset();
    core_ = std::move(other.core_);
    kind_ = other.kind_;
    token_ = other.token_;
    backend_id_ = other.backend_id_;
    other.core_.reset();
    other.kind_ = Kind::none;
  }
  return *this;
}

void Registration::reset() {
  if (auto core = core_.lock()) {
    try {
      core->unregister(kind_, token_);
    } catch (...) {
      // Only an allocation failure while republishing can get here; a destructor must not
      // throw, and the registration stays in the table, which is safe.
    }
  }
  core_.reset();
  kind_ = Kind::none;
}

void RegistryCore::unregister(Registration::Kind kind, std::uint64_t token) {
  std::lock_guard lock(mutex);
  if (kind == Registration::Kind::backend) {
    for (auto& b : backends) {
      if (b && b->token == token) {
        previous_holder[b->id] = b->backend;
        b.reset();
      }
    }
    publish(-1);
    return;
  }
  for (auto& [name, stack] : variants) {
    for (auto it = stack.begin(); it != stack.end(); ++it) {
      if ((*it)->token == token) {
        const int op_id = (*it)->op->id;
        stack.erase(it);
        publish(op_id);
        return;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Registry.

Registry::Registry() : core_(std::make_shared<RegistryCore>()) {
  std::lock_guard lock(core_->mutex);
  core_->publish(-1);
}

Registry::~Registry() = default;

Registration Registry::add_backend(std::shared_ptr<Backend> backend, const char* file, int line) {
  if (!backend) fail(ErrorKind::invalid_argument, "add_backend: null backend");
  auto rec = std::make_shared<BackendRecord>();
  rec->name = backend->name();
  rec->site = fmt::format("{}:{}", file, line);
  if (!names::is_word(rec->name)) {
    fail(ErrorKind::invalid_argument, "backend name '{}' is malformed: expected lower case letters, digits and '_', "
         "starting with a letter", rec->name);
  }
  rec->priority = backend->inference_priority();
  rec->default_fallback = backend->default_fallback();
  rec->env_vars = backend->env_vars();
  try {
    rec->availability = backend->probe();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::invalid_argument) throw;  // a bad setting (env value): never hidden
    rec->availability = {false, 0, fmt::format("probe failed: {}", e.what())};
  } catch (const std::exception& e) {
    rec->availability = {false, 0, fmt::format("probe failed: {}", e.what())};
  }
  if (!rec->availability.available) rec->availability.device_count = 0;
  try {
    for (int i = 0; i < rec->availability.device_count; ++i) {
      rec->props.push_back(backend->properties(i));
      rec->default_streams.push_back(backend->default_stream(i));
    }
  } catch (const std::exception& e) {
    rec->availability = {false, 0, fmt::format("reading device properties failed: {}", e.what())};
    rec->props.clear();
    rec->default_streams.clear();
  }
  rec->backend = std::move(backend);

  std::lock_guard lock(core_->mutex);
  auto& slots = core_->backends;
  for (const auto& b : slots) {
    if (b && b->name == rec->name) {
      fail(ErrorKind::invalid_argument, "backend '{}' is already registered at {} (again at {})", rec->name, b->site,
           rec->site);
    }
  }
  int id = -1;
  if (rec->name == kCpuBackendName) {
    id = kCpuBackendId;
  } else {
    for (int i = 1; i < kMaxBackends && id < 0; ++i) {
      const auto& previous = core_->previous_holder[static_cast<std::size_t>(i)];
      if (!slots[static_cast<std::size_t>(i)] && (!previous || previous->live_tensors() == 0)) id = i;
    }
  }
  if (id < 0) {
    fail(ErrorKind::unsupported, "cannot register backend '{}': all {} backend ids are taken ({}), or held by live "
         "tensors of unregistered backends", rec->name, kMaxBackends, join(backend_names(slots)));
  }
  rec->id = static_cast<BackendId>(id);
  rec->token = core_->next_token++;
  const std::uint64_t token = rec->token;
  slots[static_cast<std::size_t>(id)] = std::move(rec);
  try {
    core_->publish(-1);
  } catch (...) {
    slots[static_cast<std::size_t>(id)].reset();
    throw;
  }
  core_->previous_holder[static_cast<std::size_t>(id)].reset();
  Registration handle;  // made last: if anything above throws, there is nothing to undo twice
  handle.core_ = core_;
  handle.kind_ = Registration::Kind::backend;
  handle.token_ = token;
  handle.backend_id_ = static_cast<BackendId>(id);
  return handle;
}

Registration Registry::add_variant_erased(detail::ErasedVariant v, RegisterOptions options, const char* file,
                                          int line) {
  auto e = std::make_shared<VariantEntry>();
  e->op = v.op;
  e->info.backend = std::move(v.backend);
  e->info.op = v.op->name;
  e->info.impl = std::move(v.impl);
  e->info.name = fmt::format("{}.{}.{}", e->info.backend, e->info.op, e->info.impl);
  e->info.priority = v.priority;
  e->info.tunables = std::move(v.tunables);
  e->info.site = fmt::format("{}:{}", file, line);
  e->info.has_supports = static_cast<bool>(v.supports);
  e->info.strided = v.strided;
  e->supports = std::move(v.supports);
  e->run = std::move(v.run);
  e->invoke = v.invoke;
  e->user = v.user;
  if (!names::is_variant_name(e->info.name)) {
    fail(ErrorKind::invalid_argument, "variant name '{}' is malformed: expected <backend>.<op>.<direction>.<impl> "
         "with lower case letters, digits and '_' (e.g. npu.rms_norm.fwd.chunked)", e->info.name);
  }
  if (e->info.impl == "ref" && e->info.backend != kCpuBackendName) {
    fail(ErrorKind::invalid_argument, "variant '{}': the impl name 'ref' is reserved for the cpu reference kernels",
         e->info.name);
  }

  std::lock_guard lock(core_->mutex);
  const std::vector<std::string> known = backend_names(core_->backends);
  if (std::find(known.begin(), known.end(), e->info.backend) == known.end()) {
    fail(ErrorKind::invalid_argument, "variant '{}': backend '{}' is not registered (registered: {})", e->info.name,
         e->info.backend, join(known));
  }
  auto& stack = core_->variants[e->info.name];
  if (!stack.empty() && !options.override_existing) {
    fail(ErrorKind::invalid_argument, "variant '{}' is already registered at {} (again at {}); register with "
         "RegisterOptions{{.override_existing = true}} to replace it", e->info.name, stack.back()->info.site,
         e->info.site);
  }
  e->info.is_override = !stack.empty();
  e->token = core_->next_token++;
  e->order = stack.empty() ? e->token : stack.back()->order;
  const std::uint64_t token = e->token;
  const int op_id = e->op->id;
  core_->every_entry.push_back(e);
  stack.push_back(std::move(e));
  try {
    core_->publish(op_id);
  } catch (...) {
    stack.pop_back();
    throw;
  }
  Registration handle;  // made last: if anything above throws, there is nothing to undo twice
  handle.core_ = core_;
  handle.kind_ = Registration::Kind::variant;
  handle.token_ = token;
  return handle;
}

std::optional<BackendId> Registry::find_backend(std::string_view name) const {
  for (const auto& b : core_->state().backends) {
    if (b && b->name == name) return b->id;
  }
  return std::nullopt;
}

Backend& Registry::backend(BackendId id) const {
  const auto& s = core_->state();
  if (id >= kMaxBackends || !s.backends[id]) fail(ErrorKind::device, "no backend has id {}", static_cast<int>(id));
  return *s.backends[id]->backend;
}

std::vector<BackendInfo> Registry::backends() const {
  const State& s = core_->state();
  std::vector<BackendInfo> out;
  for (const auto& b : s.backends) {
    if (!b) continue;
    out.push_back({b->id, b->name, b->priority, s.fallback[b->id], s.disabled[b->id], b->availability, b->props,
                   b->site});
  }
  return out;
}

const DeviceProps& Registry::device_props(Device device) const {
  check_device(device);
  return core_->state().backends[device.backend]->props[static_cast<std::size_t>(device.index)];
}

// ---------------------------------------------------------------------------------------------
// Devices and inference.

std::string Registry::device_name(Device device) const {
  const auto& s = core_->state();
  if (device.backend >= kMaxBackends || !s.backends[device.backend]) {
    return fmt::format("backend#{}:{}", static_cast<int>(device.backend), device.index);
  }
  const auto& name = s.backends[device.backend]->name;
  if (device.backend == kCpuBackendId && device.index == 0) return name;
  return fmt::format("{}:{}", name, device.index);
}

namespace {
std::string accepted_devices(const State& s) {
  std::vector<std::string> items;
  for (const auto& b : s.backends) {
    if (!b) continue;
    const int n = b->availability.device_count;
    if (b->id == kCpuBackendId) {
      items.push_back(b->name);
    } else if (!b->availability.available) {
      items.push_back(fmt::format("{} (unavailable)", b->name));
    } else if (n == 0) {
      items.push_back(fmt::format("{} (no devices)", b->name));
    } else if (n == 1) {
      items.push_back(fmt::format("{}, {}:0", b->name, b->name));
    } else {
      items.push_back(fmt::format("{}, {}:0..{}:{}", b->name, b->name, b->name, n - 1));
    }
  }
  return join(items);
}

// Syntax and backend name against the backends of `s`.
Device parse_device_in(const State& s, std::string_view text) {
  auto parts = names::split(text, ':');
  std::optional<BackendId> id;
  if (!parts.empty() && parts.size() <= 2) {
    for (const auto& b : s.backends) {
      if (b && b->name == parts[0]) id = b->id;
    }
  }
  int index = 0;
  bool ok = id.has_value();
  if (ok && parts.size() == 2) {
    auto digits = parts[1];
    ok = !digits.empty() && digits.size() <= 5 && digits.find_first_not_of("0123456789") == std::string_view::npos;
    if (ok) index = std::stoi(std::string(digits));
    ok = ok && index <= 32767;
  }
  if (!ok) {
    for (const auto& [name, why] : s.absent) {
      if (!parts.empty() && parts[0] == name) {
        fail(ErrorKind::unsupported, "device '{}': the {} backend is not built into this opreg ({})", text, name, why);
      }
    }
    fail(ErrorKind::invalid_argument, "invalid device '{}': accepted devices are {}", text, accepted_devices(s));
  }
  return Device{*id, static_cast<std::int16_t>(index)};
}

}  // namespace

Device Registry::parse_device(std::string_view text) const { return parse_device_in(core_->state(), text); }

// For log lines and errors: an emulated device says so wherever it is shown.
std::string Registry::device_label(Device device) const {
  std::string name = device_name(device);
  const State& s = core_->state();
  const BackendRecord* b = device.backend < kMaxBackends ? s.backends[device.backend].get() : nullptr;
  if (b != nullptr && device.index >= 0 && static_cast<std::size_t>(device.index) < b->props.size() &&
      b->props[static_cast<std::size_t>(device.index)].emulated) {
    name += " (emulated)";
  }
  return name;
}

void Registry::declare_absent_backend(std::string name, std::string why) {
  std::lock_guard lock(core_->mutex);
  core_->absent.emplace_back(std::move(name), std::move(why));
  core_->publish(-1);
}

std::vector<std::pair<std::string, std::string>> Registry::absent_backends() const { return core_->state().absent; }

void Registry::check_device(Device device) const {
  const State& s = core_->state();
  if (device.backend >= kMaxBackends || !s.backends[device.backend]) {
    fail(ErrorKind::device, "device {} does not exist: no backend has id {} (registered: {})", device_name(device),
         static_cast<int>(device.backend), accepted_devices(s));
  }
  const auto& b = *s.backends[device.backend];
  if (!b.availability.available) {
    fail(ErrorKind::device, "device {} is unavailable: {}", device_name(device), b.availability.reason);
  }
  if (device.index < 0 || device.index >= b.availability.device_count) {
    fail(ErrorKind::device, "device {} does not exist: {} has {} device(s) ({}:0..{}:{})", device_name(device), b.name,
         b.availability.device_count, b.name, b.name, b.availability.device_count - 1);
  }
}

Inference Registry::infer_device() const {
  const State& s = core_->state();
  if (!s.config.device.empty()) {
    Device d;
    try {
      d = parse_device(s.config.device);
    } catch (const Error& e) {
      fail(e.kind(), "OPREG_DEVICE={}: {}", s.config.device, e.what());
    }
    if (s.disabled[d.backend]) {
      fail(ErrorKind::device, "OPREG_DEVICE={}: backend {} is disabled by OPREG_DISABLE", s.config.device,
           s.backends[d.backend]->name);
    }
    check_device(d);
    std::string why = fmt::format("OPREG_DEVICE={}", s.config.device);
    if (s.backends[d.backend]->props[static_cast<std::size_t>(d.index)].emulated) why += " (emulated, named explicitly)";
    return {d, why};
  }
  std::vector<const BackendRecord*> order;
  const bool explicit_order = !s.config.backend_order.empty();
  if (explicit_order) {
    for (const auto& name : s.config.backend_order) {
      // Names are resolved here: a custom backend may register after the environment was read.
      if (auto id = find_backend(name)) {
        order.push_back(s.backends[*id].get());
      } else {
        fail(ErrorKind::invalid_argument, "OPREG_BACKEND_ORDER: no backend '{}' is registered (registered: {})", name,
             join(backend_names(s.backends)));
      }
    }
  } else {
    for (const auto& b : s.backends) {
      if (b) order.push_back(b.get());
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const BackendRecord* a, const BackendRecord* b) { return a->priority > b->priority; });
  }
  std::vector<std::string> names;
  std::vector<std::string> skipped;
  for (const auto* b : order) names.push_back(b->name);
  for (const auto* b : order) {
    if (s.disabled[b->id]) {
      skipped.push_back(fmt::format("{} (disabled by OPREG_DISABLE)", b->name));
      continue;
    }
    if (!b->availability.available) {
      skipped.push_back(fmt::format("{} (unavailable: {})", b->name, b->availability.reason));
      continue;
    }
    if (b->availability.device_count == 0) {
      skipped.push_back(fmt::format("{} (no devices)", b->name));
      continue;
    }
    int index = -1;
    for (int i = 0; i < b->availability.device_count && index < 0; ++i) {
      if (!b->props[static_cast<std::size_t>(i)].emulated) index = i;
    }
    if (index < 0) {
      skipped.push_back(fmt::format("{} (emulated: used only when named, e.g. OPREG_DEVICE={})", b->name, b->name));
      continue;
    }
    std::string why = fmt::format("first available in {} order {}", explicit_order ? "OPREG_BACKEND_ORDER" : "priority",
                                  join(names, ","));
    if (!skipped.empty()) why += "; skipped " + join(skipped, ", ");
    return {Device{b->id, static_cast<std::int16_t>(index)}, why};
  }
  fail(ErrorKind::device, "no device available in {} order {}: skipped {}",
       explicit_order ? "OPREG_BACKEND_ORDER" : "priority", join(names, ","), join(skipped, ", "));
}

std::string to_string(Device device) { return default_registry().device_name(device); }
Device parse_device(std::string_view text) { return default_registry().parse_device(text); }

// ---------------------------------------------------------------------------------------------
// Variants and configuration.

std::vector<VariantInfo> Registry::variants(std::string_view op_name) const {
  const State& s = core_->state();
  std::vector<VariantInfo> out;
  for (const auto* op : all_ops()) {
    if (op->name != op_name || !s.ops[static_cast<std::size_t>(op->id)]) continue;
    for (const auto& bt : s.ops[static_cast<std::size_t>(op->id)]->backends) {
      if (!bt) continue;
      for (const auto* v : bt->order) out.push_back(v->info);
      for (const auto* v : bt->disabled) out.push_back(v->info);
    }
  }
  return out;
}

bool Registry::is_disabled(const VariantInfo& v) const {
  const auto& d = core_->state().config.disable;
  return std::find(d.begin(), d.end(), v.name) != d.end() || std::find(d.begin(), d.end(), v.backend) != d.end();
}

bool Registry::is_forced(const VariantInfo& v) const {
  const auto& f = core_->state().config.force_variants;
  return std::find(f.begin(), f.end(), v.name) != f.end();
}

std::vector<std::string> RegistryCore::validate(const Config& c) const {
  std::vector<std::string> pending;
  const std::vector<std::string> registered = backend_names(backends);
  auto is_backend = [&](const std::string& n) {
    return std::find(registered.begin(), registered.end(), n) != registered.end();
  };
  // A name of a backend that is not registered yet is kept: custom backends register after the
  // environment is first read, and such names are resolved (or refused) where they are used.
  if (!c.device.empty()) {
    const auto parts = names::split(c.device, ':');
    if (is_backend(std::string(parts[0])) || parts.size() > 2 || !names::is_word(parts[0])) {
      try {
        parse_device_in(state(), c.device);
      } catch (const Error& e) {
        fail(e.kind(), "OPREG_DEVICE='{}': {}", c.device, e.what());
      }
    } else if (std::none_of(absent.begin(), absent.end(), [&](const auto& a) { return a.first == parts[0]; })) {
      pending.push_back(fmt::format("OPREG_DEVICE={}", c.device));  // a built-in not built is refused when used
    }
  }
  if (c.verbose < 0 || c.verbose > 2) {
    fail(ErrorKind::invalid_argument, "OPREG_VERBOSE={}: expected 0, 1 or 2", c.verbose);
  }
  if (c.num_threads < 0 || c.num_threads > 4096) {
    fail(ErrorKind::invalid_argument, "OPREG_NUM_THREADS={}: expected 1 to 4096 (0 in a Config: the machine's cores)",
         c.num_threads);
  }
  std::set<std::string> seen;
  for (const auto& n : c.backend_order) {
    if (!names::is_word(n)) {
      fail(ErrorKind::invalid_argument, "OPREG_BACKEND_ORDER: '{}' is not a backend name; registered backends are {}",
           n, join(registered));
    }
    if (!seen.insert(n).second) fail(ErrorKind::invalid_argument, "OPREG_BACKEND_ORDER: '{}' is listed twice", n);
    if (!is_backend(n)) pending.push_back(fmt::format("OPREG_BACKEND_ORDER entry {}", n));
  }
  for (const auto& n : c.disable) {
    if (n == kCpuBackendName) {
      fail(ErrorKind::invalid_argument, "OPREG_DISABLE: the cpu backend cannot be disabled (it is the fallback "
           "target); disable its variants by name instead");
    }
    const std::string prefix(names::split(n, '.')[0]);
    const bool ok = names::is_word(n) || (names::is_variant_name(n) && (!is_backend(prefix) || active_variant(n)));
    if (!ok) {
      fail(ErrorKind::invalid_argument, "OPREG_DISABLE: '{}' is neither a backend name ({}) nor a registered variant "
           "(see `opreg ops`)", n, join(registered));
    }
    if (!is_backend(prefix)) pending.push_back(fmt::format("OPREG_DISABLE entry {}", n));
  }
  std::map<std::pair<int, std::string>, std::string> forced_for;
  for (const auto& n : c.force_variants) {
    const VariantEntry* v = active_variant(n);
    if (v == nullptr && (!names::is_variant_name(n) || is_backend(std::string(names::split(n, '.')[0])))) {
      fail(ErrorKind::invalid_argument, "OPREG_FORCE_VARIANT: unknown variant '{}' (see `opreg ops` for the "
           "registered variants)", n);
    }
    if (std::find(c.disable.begin(), c.disable.end(), n) != c.disable.end()) {
      fail(ErrorKind::invalid_argument, "variant '{}' is both forced (OPREG_FORCE_VARIANT) and disabled "
           "(OPREG_DISABLE)", n);
    }
    if (v == nullptr) {  // its backend is not registered yet
      pending.push_back(fmt::format("OPREG_FORCE_VARIANT entry {}", n));
      continue;
    }
    auto [it, fresh] = forced_for.emplace(std::make_pair(v->op->id, v->info.backend), n);
    if (!fresh) {
      fail(ErrorKind::invalid_argument, "OPREG_FORCE_VARIANT: '{}' and '{}' are both forced for {} on {}; force one",
           it->second, n, v->info.op, v->info.backend);
    }
  }
  return pending;
}

void Registry::set_config(const Config& config) {
  std::unique_lock lock(core_->mutex);
  const std::vector<std::string> pending = core_->validate(config);
  Config previous = std::exchange(core_->config, config);
  try {
    core_->publish(-1);
  } catch (...) {
    core_->config = std::move(previous);
    throw;
  }
  {
    std::lock_guard seen_lock(core_->seen_mutex);
    core_->seen.clear();
  }
  for (auto& per_op : core_->warned) {
    for (auto& flag : per_op) flag.store(false, std::memory_order_relaxed);
  }
  lock.unlock();
  for (const auto& what : pending) {
    core_->log(fmt::format("opreg: warning: {} names a backend that is not registered (yet); it takes effect "
                           "when one of that name registers", what));
  }
}

void Registry::reload_config() {
  std::vector<std::string> unknown;
  Config c = Config::from_env(&unknown);
  set_config(c);
  const State& s = core_->state();
  for (const auto& name : unknown) {
    bool backend_var = false;
    std::vector<std::string> known = Config::variables();
    for (const auto& b : s.backends) {
      if (!b) continue;
      known.insert(known.end(), b->env_vars.begin(), b->env_vars.end());
      backend_var = backend_var || std::find(b->env_vars.begin(), b->env_vars.end(), name) != b->env_vars.end();
    }
    if (!backend_var) {
      core_->log(fmt::format("opreg: warning: {} is not a variable this opreg reads (known: {}); it has no effect",
                             name, join(known)));
    }
  }
}

Config Registry::config() const { return core_->state().config; }

void Registry::set_log_sink(Function<void(std::string_view)> sink) {
  std::lock_guard lock(core_->log_mutex);
  core_->sink = std::move(sink);
}

std::uint64_t Registry::fallback_count() const { return core_->fallbacks.load(std::memory_order_relaxed); }

std::uint64_t Registry::fallback_count(std::string_view op_name, std::string_view backend) const {
  auto id = find_backend(backend);
  if (!id) return 0;
  for (const auto* op : all_ops()) {
    if (op->name == op_name) {
      return core_->fallbacks_by[static_cast<std::size_t>(op->id)][*id].load(std::memory_order_relaxed);
    }
  }
  return 0;
}

std::uint64_t Registry::cache_misses() const { return core_->misses.load(std::memory_order_relaxed); }

// ---------------------------------------------------------------------------------------------
// Dispatch.

namespace {

struct Choice {
  const VariantEntry* variant = nullptr;
  std::string how;                    // why this one
  std::vector<std::string> rejected;  // "name: reason"
};

// Walks the variants in order (forced first), asking each `supports`. `strided` names the first
// non-contiguous tensor of the call (nullptr: all contiguous): variants that did not declare
// `strided` never see it, forced or not, since they would read the wrong elements.
Choice walk(const BackendTable& bt, const void* args, const DeviceProps& props, const char* strided) {
  Choice c;
  for (const auto* v : bt.disabled) c.rejected.push_back(fmt::format("{}: disabled by OPREG_DISABLE", v->info.name));
  auto refuses_strides = [&](const VariantEntry* v) {
    if (strided == nullptr || v->info.strided) return false;
    c.rejected.push_back(fmt::format("{}: needs contiguous tensors ({} is not contiguous)", v->info.name, strided));
    return true;
  };
  if (bt.forced != nullptr) {
    if (refuses_strides(bt.forced)) return c;
    c.variant = bt.forced;
    c.how = "forced by OPREG_FORCE_VARIANT (supports() not asked)";
    return c;
  }
  for (const auto* v : bt.order) {
    if (refuses_strides(v)) continue;
    if (v->supports) {
      Verdict verdict = v->supports(args, props);
      if (!verdict.ok) {
        c.rejected.push_back(fmt::format("{}: {}", v->info.name, verdict.reason));
        continue;
      }
    }
    c.variant = v;
    c.how = bt.order.size() == 1 ? "the only variant" : fmt::format("first accepted of {} by priority", bt.order.size());
    return c;
  }
  return c;
}

// The first defined tensor's device (all must share it) and the first non-contiguous tensor.
struct CallSite {
  Device device;
  const char* strided = nullptr;
};

const BackendTable* table_for(const State& s, const detail::OpDef& op, Device device) {
  if (s.disabled[device.backend]) return nullptr;
  const auto& ot = s.ops[static_cast<std::size_t>(op.id)];
  return ot ? ot->backends[device.backend].get() : nullptr;
}

[[noreturn]] void mixed_devices(const Registry& r, const detail::OpDef& op, const TensorList& list) {
  std::vector<std::string> where;
  for (int i = 0; i < list.size(); ++i) {
    if (list[i].tensor->defined()) {
      where.push_back(fmt::format("{} on {}", list[i].name, r.device_name(list[i].tensor->device())));
    }
  }
  fail(ErrorKind::invalid_argument, "{}: tensors are on different devices ({}); all tensors of one call must be on "
       "one device", op.name, join(where));
}

inline CallSite locate(const Registry& r, const detail::OpDef& op, const TensorList& list) {
  CallSite site;
  int first = -1;
  for (int i = 0; i < list.size(); ++i) {
    const Tensor& t = *list[i].tensor;
    if (!t.defined()) continue;
    if (first < 0) {
      first = i;
      site.device = t.device();
    } else if (t.device() != site.device) [[unlikely]] {
      mixed_devices(r, op, list);
    }
    if (!t.is_contiguous() && site.strided == nullptr) site.strided = list[i].name;
  }
  if (first < 0) [[unlikely]] {
    fail(ErrorKind::invalid_argument, "{}: no tensor argument is defined", op.name);
  }
  return site;
}

// The op's check, the tensors' device (which must exist and be available) and the first
// non-contiguous tensor: what choose() and call_variant() establish before looking at variants.
CallSite checked_site(const Registry& r, const detail::OpDef& op, const void* args) {
  op.check(op, args);
  TensorList list;
  op.tensors(op, const_cast<void*>(args), list);
  const CallSite site = locate(r, op, list);
  r.check_device(site.device);
  return site;
}

inline KernelContext kernel_context(Registry& r, const State& s, const BackendRecord& be, Device device,
                                    const VariantEntry& v, const ExecContext* ctx) {
  const std::size_t index = static_cast<std::size_t>(device.index);
  KernelContext kc;
  kc.registry = &r;
  kc.backend = be.backend.get();
  kc.device = device;
  kc.props = &be.props[index];
  kc.stream = ctx != nullptr && ctx->stream != nullptr ? ctx->stream : be.default_streams[index];
  kc.variant = &v.info;
  kc.user = v.user;
  kc.threads = s.config.num_threads;
  return kc;
}

}  // namespace

namespace {

// Cold: the first call of a problem. Asks the variants, caches the answer, logs at verbose >= 1.
[[gnu::noinline]] const VariantEntry* choose_on_miss(RegistryCore& core, const Registry& reg, const State& s,
                                                     const detail::OpDef& op, const void* args, Device device,
                                                     const TensorList& list, const char* strided,
                                                     const BackendTable& bt, const BackendRecord& be,
                                                     const ProblemKey& key, std::uint64_t hash,
                                                     detail::ChoiceCache* cache) {
  core.misses.fetch_add(1, std::memory_order_relaxed);
  Choice c = walk(bt, args, be.props[static_cast<std::size_t>(device.index)], strided);
  if (!key.overflow) {
    if (cache == nullptr) {
      auto* fresh = new detail::ChoiceCache();
      if (bt.cache.compare_exchange_strong(cache, fresh, std::memory_order_acq_rel)) {
        cache = fresh;
      } else {
        delete fresh;  // another thread made it; `cache` now holds theirs
      }
    }
    cache->insert(key, hash, c.variant);
  }
  if (s.config.verbose >= 1 && c.variant != nullptr) {
    std::vector<std::uint64_t> seen_key(key.words.begin(), key.words.begin() + key.size);
    seen_key.push_back(static_cast<std::uint64_t>(op.id));
    bool first_time = false;
    {
      std::lock_guard lock(core.seen_mutex);
      if (core.seen.size() >= 65536) core.seen.clear();  // dynamic shapes: bound the memory, re-log
      first_time = core.seen.insert(std::move(seen_key)).second;
    }
    if (first_time) {
      const VariantInfo& info = c.variant->info;
      std::string line = fmt::format("opreg: dispatch {} on {} -> {}", op.name, reg.device_label(device), info.name);
      if (!info.tunables.empty()) line += fmt::format(" [{}]", info.tunables_str());
      line += fmt::format(" ({}) for {}", c.how, describe_tensors(reg, list));
      core.log(line);
      if (s.config.verbose >= 2) {
        for (const auto& r : c.rejected) core.log(fmt::format("opreg:   rejected {}", r));
      }
    }
  }
  return c.variant;
}

// Cold: no variant of the device's backend accepted the problem. Uses the State the call
// loaded, so a concurrent unregistration cannot pull the backend out from under it.
[[gnu::noinline]] DispatchResult fall_back(Registry& reg, RegistryCore& core, const State& s,
                                           const detail::OpDef& op, const void* args, const ExecContext* ctx,
                                           Device device, const TensorList& list, const char* strided,
                                           const BackendRecord& be, const BackendTable* bt) {
  auto reasons = [&] {
    if (bt != nullptr) {
      return join(walk(*bt, args, be.props[static_cast<std::size_t>(device.index)], strided).rejected, "; ");
    }
    if (s.disabled[device.backend]) return fmt::format("backend {} is disabled by OPREG_DISABLE", be.name);
    return fmt::format("no {} variant is registered", be.name);
  };
  if (device.backend == kCpuBackendId) {
    fail(ErrorKind::unsupported, "{} on cpu: no variant accepted {} ({})", op.name, describe_tensors(reg, list),
         reasons());
  }
  const FallbackPolicy policy = s.fallback[device.backend];
  if (policy == FallbackPolicy::error) {
    fail(ErrorKind::unsupported, "{} on {}: no variant accepted {} ({}); the fallback policy of {} is error "
         "(OPREG_FALLBACK=warn would run it on the cpu through host copies)", op.name, reg.device_label(device),
         describe_tensors(reg, list), reasons(), be.name);
  }
  core.fallbacks.fetch_add(1, std::memory_order_relaxed);
  core.fallbacks_by[static_cast<std::size_t>(op.id)][device.backend].fetch_add(1, std::memory_order_relaxed);
  const bool first_warning =
      policy == FallbackPolicy::warn &&
      !core.warned[static_cast<std::size_t>(op.id)][device.backend].exchange(true, std::memory_order_relaxed);
  if (first_warning || s.config.verbose >= 1) {
    core.log(fmt::format("opreg: {}: {} on {} falls back to the cpu through host copies ({})",
                         first_warning ? "warning" : "fallback", op.name, reg.device_label(device), reasons()));
  }
  // The inputs may still be in flight on the caller's stream; the host copies are synchronous,
  // and the host run gets no device stream.
  const std::size_t index = static_cast<std::size_t>(device.index);
  be.backend->synchronize(device.index, ctx != nullptr && ctx->stream != nullptr ? ctx->stream
                                                                                 : be.default_streams[index]);
  return op.run_on_host(reg, op, args, nullptr);
}

}  // namespace

// The hot path: everything cold is out of line so this stays small.
DispatchResult Registry::dispatch(const detail::OpDef& op, const void* args, const ExecContext* ctx) {
  op.check(op, args);
  TensorList list;
  op.tensors(op, const_cast<void*>(args), list);
  const CallSite site = locate(*this, op, list);
  const Device device = site.device;

  const State& s = core_->state();
  const BackendRecord* be = device.backend < kMaxBackends ? s.backends[device.backend].get() : nullptr;
  if (be == nullptr || device.index < 0 || static_cast<std::size_t>(device.index) >= be->props.size()) [[unlikely]] {
    check_device(device);  // throws the precise reason
  }
  const BackendTable* bt = table_for(s, op, device);
  const VariantEntry* v = nullptr;
  if (bt != nullptr) [[likely]] {
    v = site.strided == nullptr ? bt->fast : nullptr;
    if (v == nullptr) {
      ProblemKey key;
      build_key(op, args, device, list, key);
      const std::uint64_t hash = key.hash();
      detail::ChoiceCache* cache = bt->cache.load(std::memory_order_acquire);
      detail::Lookup hit;
      if (cache != nullptr && !key.overflow) hit = cache->find(key, hash);
      v = hit.hit ? hit.choice
                  : choose_on_miss(*core_, *this, s, op, args, device, list, site.strided, *bt, *be, key, hash, cache);
    }
  }
  if (v == nullptr) [[unlikely]] {
    return fall_back(*this, *core_, s, op, args, ctx, device, list, site.strided, *be, bt);
  }
  v->invoke(v->run.get(), args, kernel_context(*this, s, *be, device, *v, ctx));
  return {&v->info, false};
}

const VariantInfo* Registry::choose_erased(const detail::OpDef& op, const void* args, std::string* why) const {
  const CallSite site = checked_site(*this, op, args);
  const Device device = site.device;
  const State& s = core_->state();
  const BackendTable* bt = table_for(s, op, device);
  if (bt == nullptr) {
    if (why != nullptr) *why = s.disabled[device.backend] ? "backend disabled by OPREG_DISABLE" : "no variant registered";
    return nullptr;
  }
  Choice c = walk(*bt, args, s.backends[device.backend]->props[static_cast<std::size_t>(device.index)], site.strided);
  if (why != nullptr) {
    *why = c.how;
    for (const auto& r : c.rejected) *why += (why->empty() ? "" : "; ") + ("rejected " + r);
  }
  return c.variant != nullptr ? &c.variant->info : nullptr;
}

Verdict Registry::call_variant_erased(const detail::OpDef& op, std::string_view name, const void* args,
                                      const ExecContext* ctx) {
  const CallSite site = checked_site(*this, op, args);
  const Device device = site.device;
  const State& s = core_->state();
  const auto& ot = s.ops[static_cast<std::size_t>(op.id)];
  // Disabled backends and variants are still callable by name: OPREG_DISABLE shapes the choice.
  const VariantEntry* v = nullptr;
  std::string elsewhere;
  std::vector<std::string> here;
  for (BackendId b = 0; ot != nullptr && b < kMaxBackends; ++b) {
    const auto& bt = ot->backends[b];
    if (!bt) continue;
    for (const auto* list_of : {&bt->order, &bt->disabled}) {
      for (const auto* e : *list_of) {
        if (b == device.backend) here.push_back(e->info.name);
        if (e->info.name != name) continue;
        if (b == device.backend) {
          v = e;
        } else {
          elsewhere = e->info.backend;
        }
      }
    }
  }
  if (v == nullptr) {
    if (!elsewhere.empty()) {
      fail(ErrorKind::invalid_argument, "{}: variant {} belongs to backend {} but the tensors are on {}", op.name,
           name, elsewhere, device_label(device));
    }
    fail(ErrorKind::invalid_argument, "{}: no variant named '{}' on {} (registered there: {})", op.name, name,
         device_label(device), here.empty() ? std::string("none") : join(here));
  }
  if (site.strided != nullptr && !v->info.strided) {
    return Verdict::reject(fmt::format("needs contiguous tensors ({} is not contiguous)", site.strided));
  }
  const BackendRecord& be = *s.backends[device.backend];
  if (v->supports) {
    Verdict verdict = v->supports(args, be.props[static_cast<std::size_t>(device.index)]);
    if (!verdict.ok) return verdict;
  }
  v->invoke(v->run.get(), args, kernel_context(*this, s, be, device, *v, ctx));
  return Verdict::accept();
}

// ---------------------------------------------------------------------------------------------

Registry& default_registry() {
  static Registry* registry = [] {
    auto r = std::make_unique<Registry>();
    register_builtin_backends(*r);
    r->reload_config();
    return r.release();  // lives until exit: kernels may run from static destructors of users
  }();
  return *registry;
}

}  // namespace opreg
