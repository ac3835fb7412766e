// The published state: building a State from the registrations and configuration, publishing
// it, and taking registrations out again (see state.h for the concurrency model).
#include "registry/state.h"

#include <algorithm>
#include <tuple>

#include "registry/fail.h"

namespace opreg::detail {

RegistryCore::~RegistryCore() = default;

void RegistryCore::publish(int op_id) {
  auto s = std::make_unique<State>();
  if (published) s->ops = published->ops;
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
  // Room first: if that allocation throws, nothing was published and `s` just goes away.
  unpublished.reserve(unpublished.size() + 1);
  current.store(s.get(), std::memory_order_release);
  if (auto old = std::exchange(published, std::move(s))) unpublished.push_back(std::move(old));
  try {
    reclaim();
  } catch (...) {
    // Out of memory while reclaiming: what was not freed now is freed by a later publication.
  }
}

void RegistryCore::reclaim() {
  for (auto it = retiring.begin(); it != retiring.end();) {
    if (all_left(it->waiting)) {
      for (auto& s : it->states) garbage.push_back(std::move(s));
      it = retiring.erase(it);
    } else {
      ++it;
    }
  }
  // A grace period costs a process-wide barrier, so it starts once a few States have piled up.
  constexpr std::size_t kBatch = 8;
  if (unpublished.size() < kBatch) return;
  Retiring batch;
  batch.waiting = readers_inside();
  batch.states = std::move(unpublished);
  unpublished.clear();
  if (batch.waiting.empty()) {
    for (auto& s : batch.states) garbage.push_back(std::move(s));
  } else {
    retiring.push_back(std::move(batch));
  }
}

void WriteLock::unlock() {
  if (!lock_.owns_lock()) return;
  // Freed outside the lock: destroying a State can destroy kernels' captures and backends, whose
  // destructors may call back into the registry.
  auto states = std::move(core_.garbage);
  auto entries = std::move(core_.garbage_entries);
  core_.garbage.clear();
  core_.garbage_entries.clear();
  lock_.unlock();
}

WriteLock::~WriteLock() { unlock(); }

bool InfoLess::operator()(const std::unique_ptr<const VariantInfo>& a,
                          const std::unique_ptr<const VariantInfo>& b) const {
  auto fields = [](const VariantInfo& v) {
    return std::tie(v.name, v.site, v.priority, v.is_override, v.has_supports, v.strided, v.plugin);
  };
  if (fields(*a) != fields(*b)) return fields(*a) < fields(*b);
  return std::lexicographical_compare(
      a->tunables.begin(), a->tunables.end(), b->tunables.begin(), b->tunables.end(),
      [](const Tunable& x, const Tunable& y) { return std::tie(x.name, x.value) < std::tie(y.name, y.value); });
}

const VariantInfo* RegistryCore::intern(VariantInfo info) {
  auto fresh = std::make_unique<const VariantInfo>(std::move(info));
  return infos.insert(std::move(fresh)).first->get();
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
      if (b && b->name == v->info->backend) {
        id = b->id;
        found = true;
      }
    }
    if (!found) continue;  // its backend was unregistered; it comes back if the backend does
    auto& bt = table->backends[id];
    if (!bt) bt = std::make_unique<BackendTable>();
    table->entries.push_back(stack.back());
    any = true;
    const auto& cfg = s.config;
    if (std::find(cfg.disable.begin(), cfg.disable.end(), v->info->name) != cfg.disable.end()) {
      bt->disabled.push_back(v);
    } else {
      bt->order.push_back(v);
      if (std::find(cfg.force_variants.begin(), cfg.force_variants.end(), v->info->name) != cfg.force_variants.end()) {
        bt->forced = v;
      }
    }
  }
  if (!any) return nullptr;
  for (BackendId id = 0; id < kMaxBackends; ++id) {
    const auto& bt = table->backends[id];
    if (!bt) continue;
    std::stable_sort(bt->order.begin(), bt->order.end(), [](const VariantEntry* a, const VariantEntry* b) {
      return a->info->priority != b->info->priority ? a->info->priority > b->info->priority : a->order < b->order;
    });
    // The choice needs no cache when it cannot depend on the problem; at OPREG_VERBOSE >= 1 the
    // cache path is kept so that the first dispatch of each problem is logged.
    if (s.config.verbose == 0) {
      // A forced variant that plans (or whose refusals count) still asks its supports() per problem.
      if (bt->forced != nullptr) {
        if (!bt->forced->supports || bt->forced->forcing == Forcing::skip_supports) bt->fast = bt->forced;
      } else if (!bt->order.empty() && !bt->order.front()->supports) {
        bt->fast = bt->order.front();
      }
    }
    const BackendRecord& be = *s.backends[id];  // a table exists only for a registered backend
    if (s.disabled[id]) continue;
    bt->devices = be.props.size();
    bt->contexts.reserve(bt->order.size() * bt->devices);
    for (const VariantEntry* v : bt->order) {
      for (std::size_t i = 0; i < bt->devices; ++i) {
        KernelContext kc;
        kc.registry = registry;
        kc.backend = be.backend.get();
        kc.device = Device{id, static_cast<std::int16_t>(i)};
        kc.props = &be.props[i];
        kc.stream = be.default_streams[i];
        kc.variant = v->info;
        kc.user = v->user;
        kc.threads = s.config.num_threads;
        bt->contexts.push_back(kc);
      }
    }
    if (bt->fast != nullptr && bt->devices > 0) {
      bt->fast_contexts = bt->ready(bt->fast, 0);
      bt->fast_devices = bt->devices;
    }
  }
  return table;
}

void RegistryCore::unregister(Registration::Kind kind, std::uint64_t token) {
  WriteLock lock(*this);
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
  for (auto it = variants.begin(); it != variants.end(); ++it) {
    auto& stack = it->second;
    for (auto e = stack.begin(); e != stack.end(); ++e) {
      if ((*e)->token != token) continue;
      const int op_id = (*e)->op->id;
      garbage_entries.push_back(std::move(*e));  // a shadowed override may have no other owner
      stack.erase(e);
      if (stack.empty()) variants.erase(it);
      publish(op_id);
      return;
    }
  }
}

std::vector<std::string> absent_names(const State& s) {
  std::vector<std::string> out;
  for (const auto& a : s.absent) out.push_back(a.first);
  if (out.empty()) out.emplace_back("none");
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::vector<std::string> backend_names(const std::array<std::shared_ptr<const BackendRecord>, kMaxBackends>& slots) {
  std::vector<std::string> out;
  for (const auto& b : slots) {
    if (b) out.push_back(b->name);
  }
  return out;
}

}  // namespace opreg::detail
