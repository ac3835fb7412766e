// Choice and dispatch: the hot path (check, find the device, pick the variant, call), the choice
// on a cache miss, the fallback policy, and the explicit forms choose() and call_variant().
#include <algorithm>

#include "opreg/registry.h"
#include "registry/fail.h"
#include "registry/quote.h"
#include "registry/state.h"

namespace opreg {

using detail::BackendRecord;
using detail::BackendTable;
using detail::join;
using detail::RegistryCore;
using detail::State;
using detail::VariantEntry;

namespace {

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
  for (const auto* v : bt.disabled) c.rejected.push_back(fmt::format("{}: disabled by OPREG_DISABLE", v->info->name));
  auto refuses_strides = [&](const VariantEntry* v) {
    if (strided == nullptr || v->info->strided) return false;
    c.rejected.push_back(fmt::format("{}: needs contiguous tensors ({} is not contiguous)", v->info->name, strided));
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
    Verdict verdict;
    if (v->supports) {
      verdict = v->supports(args, props);
      if (!verdict.ok) {
        c.rejected.push_back(fmt::format("{}: {}", v->info->name, verdict.reason));
        continue;
      }
    }
    c.variant = v;
    c.how = bt.order.size() == 1 ? "the only variant" : fmt::format("first accepted of {} by priority", bt.order.size());
    // An accepting supports() may say what it decided (the npu planner's tiling).
    if (!verdict.reason.empty()) c.how += fmt::format(": {}", verdict.reason);
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
  kc.variant = v.info;
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
      const VariantInfo& info = *c.variant->info;
      std::string line = fmt::format("opreg: dispatch {} on {} -> {}", op.name, reg.device_label(device), info.name);
      if (!info.tunables.empty()) line += fmt::format(" [{}]", info.tunables_str());
      if (!info.plugin.empty()) line += fmt::format(" from plugin {}", quote(info.plugin));
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

  const detail::StateRef ref(*core_);
  const State& s = *ref;
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
  return {v->info, false};
}

const VariantInfo* Registry::choose_erased(const detail::OpDef& op, const void* args, std::string* why) const {
  const CallSite site = checked_site(*this, op, args);
  const Device device = site.device;
  const detail::StateRef ref(*core_);
  const State& s = *ref;
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
  return c.variant != nullptr ? c.variant->info : nullptr;
}

Verdict Registry::call_variant_erased(const detail::OpDef& op, std::string_view name, const void* args,
                                      const ExecContext* ctx) {
  const CallSite site = checked_site(*this, op, args);
  const Device device = site.device;
  const detail::StateRef ref(*core_);
  const State& s = *ref;
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
        if (b == device.backend) here.push_back(e->info->name);
        if (e->info->name != name) continue;
        if (b == device.backend) {
          v = e;
        } else {
          elsewhere = e->info->backend;
        }
      }
    }
  }
  if (v == nullptr) {
    if (!elsewhere.empty()) {
      fail(ErrorKind::invalid_argument, "{}: variant {} belongs to backend {} but the tensors are on {}", op.name,
           name, elsewhere, device_label(device));
    }
    fail(ErrorKind::invalid_argument, "{}: no variant named {} on {} (registered there: {})", op.name, quote(name),
         device_label(device), here.empty() ? std::string("none") : join(here));
  }
  if (site.strided != nullptr && !v->info->strided) {
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

}  // namespace opreg
