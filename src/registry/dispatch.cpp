// Choice and dispatch: the hot path (check, find the device, pick the variant, call), the choice
// on a cache miss, the fallback policy, and the explicit forms choose() and call_variant().
#include "registry/dispatch.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "opreg/registry.h"
#include "registry/fail.h"
#include "registry/quote.h"
#include "registry/state.h"

namespace opreg {

using detail::BackendRecord;
using detail::BackendTable;
using detail::Forcing;
using detail::join;
using detail::RegistryCore;
using detail::State;
using detail::VariantEntry;

namespace {

std::string describe_tensors(const Registry& r, const detail::OpDef& op, const void* args) {
  std::string out;
  for (int i = 0; i < op.field_count; ++i) {
    const Tensor& t = op.tensor(args, i);
    if (!t.defined()) continue;
    if (!out.empty()) out += ' ';
    out += fmt::format("{}={}[{}]@{}", op.fields[static_cast<std::size_t>(i)].name, to_string(t.dtype()),
                       t.shape().str(), r.device_name(t.device()));
  }
  return out;
}

// The first defined tensor's device (all must share it), and the first non-contiguous tensor.
struct CallSite {
  Device device;
  int first = 0;     // the first defined field
  int strided = -1;  // the first defined, non-contiguous field; -1: none
};

// "x is not contiguous: shape [4x4], strides [1, 4]": what a strided tensor is, for messages.
std::string strided_text(const detail::OpDef& op, const void* args, int field) {
  const Tensor& t = op.tensor(args, field);
  return fmt::format("{} is not contiguous: shape [{}], strides [{}]", op.fields[static_cast<std::size_t>(field)].name,
                     t.shape().str(), fmt::join(t.strides(), ", "));
}

// What to do about a strided tensor that no variant takes.
std::string contiguous_fix(const Registry& r, const detail::OpDef& op, const void* args, int field) {
  const char* name = op.fields[static_cast<std::size_t>(field)].name;
  if (op.tensor(args, field).device().backend == kCpuBackendId) {
    return fmt::format("make a contiguous copy of {0} first ({0}.to({0}.device()) returns one) and pass that", name);
  }
  return fmt::format(
      "make a contiguous copy of {} on {} first and pass that (Tensor::to copies only contiguous "
      "device tensors)",
      name, r.device_name(op.tensor(args, field).device()));
}

// For an op of N tensors, unrolled and without branches.
template <int N>
void tensor_bits(const detail::OpDef& op, const void* args, detail::TensorBits& out) {
#pragma GCC unroll 16
  for (int i = 0; i < N; ++i) out.add(i, op.tensor(args, i));
}

template <std::size_t... N>
constexpr auto tensor_bits_table(std::index_sequence<N...>) {
  return std::array<void (*)(const detail::OpDef&, const void*, detail::TensorBits&), sizeof...(N)>{
      &tensor_bits<static_cast<int>(N)>...};
}
constexpr auto kTensorBits = tensor_bits_table(std::make_index_sequence<kMaxOpTensors + 1>{});

// The key (state.h's TensorBits has the layout): the tensors' bits and the first tensor's shape;
// the strides of the non-contiguous tensors; the op's words.
void build_key(const detail::OpDef& op, const void* args, const CallSite& site, ProblemKey& key) {
  detail::TensorBits b;
  kTensorBits[static_cast<std::size_t>(op.field_count)](op, args, b);
  b.start_key(key, site.device, op.field_count, op.tensor(args, site.first));
  if (site.strided >= 0) [[unlikely]] {
    const std::uint64_t contiguous = b.contiguous & b.defined;
    for (int i = site.strided; i < op.field_count; ++i) {
      if ((b.defined & ~contiguous) >> i & 1U) {
        for (auto st : op.tensor(args, i).strides()) key.add(static_cast<std::uint64_t>(st));
      }
    }
  }
  op.key(op, args, key);
}

}  // namespace

std::uint64_t ProblemKey::hash() const { return detail::key_hash(*this); }

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
  PlanData plan;                      // what the variant's supports() planned (empty: nothing)
  std::string how;                    // why this one
  std::vector<std::string> rejected;  // "name: reason"
  std::string refused;                // a forced variant refused, and that is an error (a plugin's)
};

// Walks the variants in order (forced first), asking each `supports`. `strided` says which
// tensor of the call is not contiguous (empty: all are): variants that did not declare
// `strided` never see it, forced or not, since they would read the wrong elements.
Choice walk(const BackendTable& bt, const void* args, const DeviceProps& props, const std::string& strided) {
  Choice c;
  for (const auto* v : bt.disabled) c.rejected.push_back(fmt::format("{}: disabled by OPREG_DISABLE", v->info->name));
  auto refuses_strides = [&](const VariantEntry* v) {
    if (strided.empty() || v->info->strided) return false;
    c.rejected.push_back(fmt::format("{}: needs contiguous tensors ({})", v->info->name, strided));
    return true;
  };
  if (const VariantEntry* v = bt.forced; v != nullptr) {
    if (refuses_strides(v)) return c;
    if (!v->supports || v->forcing == Forcing::skip_supports) {
      c.variant = v;
      c.how = "forced by OPREG_FORCE_VARIANT (supports() not asked)";
      return c;
    }
    Verdict verdict = v->supports(args, props);
    if (!verdict.ok && v->forcing == Forcing::refusal_is_error) {
      c.refused = fmt::format("{} is forced by OPREG_FORCE_VARIANT but refuses this problem: {}", v->info->name,
                              verdict.reason);
      c.rejected.push_back(fmt::format("{}: {}", v->info->name, verdict.reason));
      return c;
    }
    c.variant = v;
    c.plan = verdict.plan;
    c.how = verdict.ok ? fmt::format("forced by OPREG_FORCE_VARIANT; supports() accepted{}{}",
                                     verdict.reason.empty() ? "" : ": ", verdict.reason)
                       : fmt::format("forced by OPREG_FORCE_VARIANT past its supports(), which refused ({}): it runs "
                                     "the plan it refused",
                                     verdict.reason);
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
    c.plan = verdict.plan;
    c.how = bt.order.size() == 1 ? "the only variant" : fmt::format("first accepted of {} by priority", bt.order.size());
    // An accepting supports() may say what it decided (the npu planner's tiling).
    if (!verdict.reason.empty()) c.how += fmt::format(": {}", verdict.reason);
    return c;
  }
  return c;
}

[[noreturn, gnu::noinline, gnu::cold]] void forced_refusal(const detail::OpDef& op, const Choice& c) {
  fail(ErrorKind::unsupported, "{}: {}", op.name, c.refused);
}

// The plan of a choice, where a call reads it.
const void* plan_into(const PlanData& plan, detail::PlanCopy& copy) {
  if (plan.empty()) return nullptr;
  std::memcpy(copy.words.data(), plan.bytes.data(), plan.size);
  return copy.words.data();
}

std::string strided_of(const detail::OpDef& op, const void* args, const CallSite& site) {
  return site.strided < 0 ? std::string() : strided_text(op, args, site.strided);
}

const BackendTable* table_for(const State& s, const detail::OpDef& op, Device device) {
  if (s.disabled[device.backend]) return nullptr;
  const auto& ot = s.ops[static_cast<std::size_t>(op.id)];
  return ot ? ot->backends[device.backend].get() : nullptr;
}

[[noreturn, gnu::noinline, gnu::cold]] void mixed_devices(const Registry& r, const detail::OpDef& op,
                                                          const void* args) {
  std::vector<std::string> where;
  for (int i = 0; i < op.field_count; ++i) {
    const Tensor& t = op.tensor(args, i);
    if (t.defined())
      where.push_back(fmt::format("{} on {}", op.fields[static_cast<std::size_t>(i)].name, r.device_name(t.device())));
  }
  fail(ErrorKind::invalid_argument, "{}: tensors are on different devices ({}); all tensors of one call must be on "
       "one device", op.name, join(where));
}

[[noreturn, gnu::noinline, gnu::cold]] void no_tensor(const detail::OpDef& op) {
  fail(ErrorKind::invalid_argument, "{}: no tensor argument is defined", op.name);
}

[[gnu::noinline]] CallSite locate(const Registry& r, const detail::OpDef& op, const void* args) {
  CallSite site;
  const int n = op.field_count;
  int i = 0;
  while (i < n && !op.tensor(args, i).defined()) ++i;
  if (i == n) [[unlikely]]
    no_tensor(op);
  site.first = i;
  site.device = op.tensor(args, i).device();
  for (; i < n; ++i) {
    const Tensor& t = op.tensor(args, i);
    if (!t.defined()) continue;
    if (t.device() != site.device) [[unlikely]]
      mixed_devices(r, op, args);
    if (!t.is_contiguous() && site.strided < 0) site.strided = i;
  }
  return site;
}

// What the check reported, or locate() where it cannot say (no first tensor).
inline CallSite site_of(const Registry& r, const detail::OpDef& op, const void* args, const CallFacts& facts) {
  if (!facts.first_defined) [[unlikely]]
    return locate(r, op, args);
  if (facts.mixed_devices) [[unlikely]]
    mixed_devices(r, op, args);
  CallSite site;
  site.device = facts.device;
  if (facts.strided != 0) [[unlikely]]
    site.strided = __builtin_ctz(facts.strided);
  return site;
}

// The op's check, and where its tensors are.
CallSite check_and_locate(const Registry& r, const detail::OpDef& op, const void* args) {
  if (op.check_facts == nullptr) {
    op.check(op, args);
    return locate(r, op, args);
  }
  return site_of(r, op, args, op.check_facts(op, args));
}

// The op's check, the tensors' device (which must exist and be available) and the first
// non-contiguous tensor: what choose() and call_variant() establish before looking at variants.
CallSite checked_site(const Registry& r, const detail::OpDef& op, const void* args) {
  const CallSite site = check_and_locate(r, op, args);
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
  kc.stream = be.default_streams[index];
  if (ctx != nullptr && ctx->stream != nullptr) kc.stream = ctx->stream;
  if (ctx != nullptr) kc.scratch = ctx->scratch;
  kc.variant = v.info;
  kc.user = v.user;
  kc.threads = s.config.num_threads;
  return kc;
}

// Cold: the first call of a problem. Asks the variants, caches the answer, logs at verbose >= 1.
[[gnu::noinline]] detail::Lookup choose_on_miss(RegistryCore& core, const Registry& reg, const State& s,
                                                const detail::OpDef& op, const void* args, const CallSite& site,
                                                const BackendTable& bt, const BackendRecord& be, const ProblemKey& key,
                                                std::uint64_t hash, detail::ChoiceCache* cache,
                                                detail::PlanCopy& plan) {
  core.misses.fetch_add(1, std::memory_order_relaxed);
  const Device device = site.device;
  Choice c = walk(bt, args, be.props[static_cast<std::size_t>(device.index)], strided_of(op, args, site));
  if (!c.refused.empty()) forced_refusal(op, c);
  const KernelContext* ready = c.variant != nullptr ? bt.ready(c.variant, device.index) : nullptr;
  if (!key.overflow) {
    if (cache == nullptr) {
      auto* fresh = new detail::ChoiceCache();
      if (bt.cache.compare_exchange_strong(cache, fresh, std::memory_order_acq_rel)) {
        cache = fresh;
      } else {
        delete fresh;  // another thread made it; `cache` now holds theirs
      }
    }
    cache->insert(key, hash, c.variant, ready, c.plan);
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
      line += fmt::format(" ({}) for {}", c.how, describe_tensors(reg, op, args));
      core.log(line);
      if (s.config.verbose >= 2) {
        for (const auto& r : c.rejected) core.log(fmt::format("opreg:   rejected {}", r));
      }
    }
  }
  return {true, c.variant, ready, plan_into(c.plan, plan)};
}

// The choice of the problem `site` and `args` make, with its ready context: from the cache, else
// by choose_on_miss.
[[gnu::noinline]] detail::Lookup cached_choice(RegistryCore& core, const Registry& reg, const State& s,
                                               const detail::OpDef& op, const void* args, const CallSite& site,
                                               const BackendTable& bt, const BackendRecord& be,
                                               detail::PlanCopy& plan) {
  ProblemKey key;
  build_key(op, args, site, key);
  const std::uint64_t hash = detail::key_hash(key);
  detail::ChoiceCache* cache = bt.cache.load(std::memory_order_acquire);
  if (cache != nullptr && !key.overflow) {
    const detail::Lookup hit = cache->find(key, hash, plan);
    if (hit.hit) return hit;
  }
  return choose_on_miss(core, reg, s, op, args, site, bt, be, key, hash, cache, plan);
}

// Cold: no variant of the device's backend accepted the problem. Uses the State the call
// loaded, so a concurrent unregistration cannot pull the backend out from under it.
[[gnu::noinline]] DispatchResult fall_back(Registry& reg, RegistryCore& core, const State& s, const detail::OpDef& op,
                                           const void* args, const ExecContext* ctx, const CallSite& site,
                                           const BackendRecord& be, const BackendTable* bt) {
  const Device device = site.device;
  auto reasons = [&] {
    if (bt != nullptr) {
      return join(
          walk(*bt, args, be.props[static_cast<std::size_t>(device.index)], strided_of(op, args, site)).rejected, "; ");
    }
    if (s.disabled[device.backend]) return fmt::format("backend {} is disabled by OPREG_DISABLE", be.name);
    return fmt::format("no {} variant is registered", be.name);
  };
  // When strides were the obstacle, the way out (the host copies of a fallback are contiguous).
  auto fix = [&] { return site.strided < 0 ? std::string() : "; " + contiguous_fix(reg, op, args, site.strided); };
  if (device.backend == kCpuBackendId) {
    fail(ErrorKind::unsupported, "{} on cpu: no variant accepted {} ({}){}", op.name, describe_tensors(reg, op, args),
         reasons(), fix());
  }
  const FallbackPolicy policy = s.fallback[device.backend];
  if (policy == FallbackPolicy::error) {
    fail(ErrorKind::unsupported,
         "{} on {}: no variant accepted {} ({}); the fallback policy of {} is error "
         "(OPREG_FALLBACK=warn would run it on the cpu through host copies){}",
         op.name, reg.device_label(device), describe_tensors(reg, op, args), reasons(), be.name, fix());
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

// Dispatch after the check, every case.
[[gnu::always_inline]] inline DispatchResult dispatch_at(Registry& reg, RegistryCore& core, const detail::OpDef& op,
                                                         const void* args, const CallSite& site,
                                                         const ExecContext* ctx) {
  const Device device = site.device;
  const detail::StateRef ref(core);
  const State& s = *ref;
  const BackendRecord* be = device.backend < kMaxBackends ? s.backends[device.backend].get() : nullptr;
  if (be == nullptr || device.index < 0 || static_cast<std::size_t>(device.index) >= be->props.size()) {
    reg.check_device(device);  // throws the precise reason
  }
  const BackendTable* bt = table_for(s, op, device);
  const VariantEntry* v = nullptr;
  const KernelContext* ready = nullptr;
  const void* plan = nullptr;
  detail::PlanCopy plan_copy;
  if (bt != nullptr) {
    if (site.strided < 0 && bt->fast != nullptr) {
      v = bt->fast;
      if (bt->fast_contexts != nullptr) ready = &bt->fast_contexts[static_cast<std::size_t>(device.index)];
    } else {
      const detail::Lookup choice = cached_choice(core, reg, s, op, args, site, *bt, *be, plan_copy);
      v = choice.choice;
      ready = choice.ready;
      plan = choice.plan;
    }
  }
  if (v == nullptr) return fall_back(reg, core, s, op, args, ctx, site, *be, bt);
  if (ready != nullptr && (ctx == nullptr || (ctx->stream == nullptr && ctx->scratch == nullptr))) {
    v->invoke(v->run.get(), args, *ready, plan);
  } else {
    v->invoke(v->run.get(), args, kernel_context(reg, s, *be, device, *v, ctx), plan);
  }
  return {v->info, false};
}

}  // namespace

DispatchResult Registry::dispatch(const detail::OpDef& op, const void* args, const ExecContext* ctx) {
  return dispatch_at(*this, *core_, op, args, check_and_locate(*this, op, args), ctx);
}

DispatchResult detail::dispatch_after_check(Registry& registry, const OpDef& op, const void* args, CallFacts facts,
                                            const ExecContext* ctx) {
  return dispatch_at(registry, CoreAccess::core(registry), op, args, site_of(registry, op, args, facts), ctx);
}

void detail::run_in_context(const VariantEntry& v, const void* args, const KernelContext& ready, const void* plan,
                            const ExecContext& ctx) {
  KernelContext kc = ready;
  if (ctx.stream != nullptr) kc.stream = ctx.stream;
  kc.scratch = ctx.scratch;
  v.invoke(v.run.get(), args, kc, plan);
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
  Choice c = walk(*bt, args, s.backends[device.backend]->props[static_cast<std::size_t>(device.index)],
                  strided_of(op, args, site));
  if (why != nullptr) {
    *why = c.refused.empty() ? c.how : c.refused;
    for (const auto& r : c.rejected) *why += (why->empty() ? "" : "; ") + ("rejected " + r);
    if (c.variant == nullptr && site.strided >= 0) *why += "; " + contiguous_fix(*this, op, args, site.strided);
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
  if (site.strided >= 0 && !v->info->strided) {
    return Verdict::reject(fmt::format("{}: needs contiguous tensors ({}); {}", op.name,
                                       strided_text(op, args, site.strided),
                                       contiguous_fix(*this, op, args, site.strided)));
  }
  const BackendRecord& be = *s.backends[device.backend];
  PlanData plan;
  if (v->supports) {
    Verdict verdict = v->supports(args, be.props[static_cast<std::size_t>(device.index)]);
    if (!verdict.ok) return verdict;
    plan = verdict.plan;
  }
  detail::PlanCopy plan_copy;
  v->invoke(v->run.get(), args, kernel_context(*this, s, be, device, *v, ctx), plan_into(plan, plan_copy));
  return Verdict::accept();
}

}  // namespace opreg
