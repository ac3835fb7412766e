// Registration: backends and variants go in, RAII handles come out. The rules a backend or
// plugin author must know are listed at Registry::add_backend in include/opreg/registry.h and
// are all checked here.
#include <algorithm>
#include <utility>

#include "opreg/registry.h"
#include "registry/fail.h"
#include "registry/names.h"
#include "registry/quote.h"
#include "registry/state.h"

namespace opreg {

using detail::BackendRecord;
using detail::join;
using detail::RegistryCore;
using detail::State;
using detail::VariantEntry;

namespace {

// Where a registration came from: file:line in source, or a plugin's path alone (line 0).
std::string site_of(const char* file, int line) {
  return line > 0 ? fmt::format("{}:{}", file, line) : std::string(file);
}

}  // namespace

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

// ---------------------------------------------------------------------------------------------
// Registry.

Registry::Registry() : core_(std::make_shared<RegistryCore>()) {
  detail::WriteLock lock(*core_);
  core_->registry = this;
  core_->publish(-1);
}

Registry::~Registry() = default;

Registration Registry::add_backend(std::shared_ptr<Backend> backend, const char* file, int line) {
  if (!backend) fail(ErrorKind::invalid_argument, "add_backend: null backend");
  auto rec = std::make_shared<BackendRecord>();
  rec->name = backend->name();
  rec->site = site_of(file, line);
  if (!names::is_word(rec->name)) {
    fail(ErrorKind::invalid_argument, "backend name {} is malformed: expected lower case letters, digits and '_', "
         "starting with a letter", quote(rec->name));
  }
  rec->priority = backend->inference_priority();
  rec->default_fallback = backend->default_fallback();
  rec->env_vars = backend->env_vars();
  rec->backend = std::move(backend);
  // A backend OPREG_DISABLE names is not probed (probing may load a runtime: OpenCL for xpu)
  // until a configuration enables it.
  bool disabled = false;
  {
    std::lock_guard peek(core_->mutex);
    disabled = detail::disables_backend(core_->config, rec->name);
  }
  if (disabled) {
    rec->probed = false;
    rec->availability = {false, 0, "disabled by OPREG_DISABLE, not probed (a configuration that enables it probes it)"};
  } else {
    detail::probe_backend(*rec);
  }

  detail::WriteLock lock(*core_);
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
  // The configuration may have enabled it since it was looked at.
  if (!rec->probed && !detail::disables_backend(core_->config, rec->name)) detail::probe_backend(*rec);
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
  VariantInfo info;
  info.backend = std::move(v.backend);
  info.op = v.op->name;
  info.impl = std::move(v.impl);
  info.name = fmt::format("{}.{}.{}", info.backend, info.op, info.impl);
  info.priority = v.priority;
  info.tunables = std::move(v.tunables);
  info.site = site_of(file, line);
  info.has_supports = static_cast<bool>(v.supports) && !v.accepts_all;
  info.strided = v.strided;
  info.plugin = std::move(v.plugin);
  if (!names::is_variant_name(info.name)) {
    fail(ErrorKind::invalid_argument, "variant name {} is malformed: expected <backend>.<op>.<direction>.<impl> "
         "with lower case letters, digits and '_' (e.g. npu.rms_norm.fwd.chunked)", quote(info.name));
  }
  if (info.impl == "ref" && info.backend != kCpuBackendName) {
    fail(ErrorKind::invalid_argument, "variant '{}': the impl name 'ref' is reserved for the cpu reference kernels",
         info.name);
  }
  auto e = std::make_shared<VariantEntry>();
  e->op = v.op;
  e->supports = std::move(v.supports);
  e->run = std::move(v.run);
  e->invoke = v.invoke;
  e->user = v.user;
  e->forcing = v.forcing;

  detail::WriteLock lock(*core_);
  const std::vector<std::string> known = backend_names(core_->backends);
  if (std::find(known.begin(), known.end(), info.backend) == known.end()) {
    fail(ErrorKind::invalid_argument, "variant '{}': backend '{}' is not registered (registered: {})", info.name,
         info.backend, join(known));
  }
  const auto found = core_->variants.find(info.name);
  if (found != core_->variants.end() && !options.override_existing) {
    fail(ErrorKind::invalid_argument, "variant '{}' is already registered at {} (again at {}); register with "
         "RegisterOptions{{.override_existing = true}} to replace it", info.name, found->second.back()->info->site,
         info.site);
  }
  info.is_override = found != core_->variants.end();
  e->info = core_->intern(std::move(info));
  e->token = core_->next_token++;
  auto& stack = found != core_->variants.end() ? found->second : core_->variants[e->info->name];
  e->order = stack.empty() ? e->token : stack.back()->order;
  const std::uint64_t token = e->token;
  const int op_id = e->op->id;
  const std::string& name = e->info->name;
  stack.push_back(std::move(e));
  try {
    core_->publish(op_id);
  } catch (...) {
    stack.pop_back();
    if (stack.empty()) core_->variants.erase(name);
    throw;
  }
  Registration handle;  // made last: if anything above throws, there is nothing to undo twice
  handle.core_ = core_;
  handle.kind_ = Registration::Kind::variant;
  handle.token_ = token;
  return handle;
}

void detail::probe_backend(BackendRecord& rec) {
  Backend& backend = *rec.backend;
  rec.probed = true;
  rec.props.clear();
  rec.default_streams.clear();
  try {
    rec.availability = backend.probe();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::invalid_argument) throw;  // a bad setting (env value): never hidden
    rec.availability = {false, 0, fmt::format("probe failed: {}", e.what())};
  } catch (const std::exception& e) {
    rec.availability = {false, 0, fmt::format("probe failed: {}", e.what())};
  }
  if (!rec.availability.available) rec.availability.device_count = 0;
  try {
    for (int i = 0; i < rec.availability.device_count; ++i) {
      rec.props.push_back(backend.properties(i));
      rec.default_streams.push_back(backend.default_stream(i));
    }
  } catch (const std::exception& e) {
    rec.availability = {false, 0, fmt::format("reading device properties failed: {}", e.what())};
    rec.props.clear();
    rec.default_streams.clear();
  }
}

bool detail::disables_backend(const Config& config, std::string_view name) {
  return std::find(config.disable.begin(), config.disable.end(), name) != config.disable.end();
}

void RegistryCore::probe_enabled() {
  for (auto& slot : backends) {
    if (!slot || slot->probed || disables_backend(config, slot->name)) continue;
    auto probed = std::make_shared<BackendRecord>(*slot);
    probe_backend(*probed);
    slot = std::move(probed);
  }
}

void RegistryCore::probe_named(std::string_view name) {
  WriteLock lock(*this);
  for (auto& slot : backends) {
    if (!slot || slot->probed || slot->name != name) continue;
    auto probed = std::make_shared<BackendRecord>(*slot);
    probe_backend(*probed);
    auto before = std::exchange(slot, std::move(probed));
    try {
      publish(-1);
    } catch (...) {
      slot = std::move(before);
      throw;
    }
  }
}

void detail::ListAccess::add(Registry& registry, ErasedVariant variant, const char* file, int line) {
  registry.add_variant_erased(std::move(variant), {}, file, line).release();
}

std::optional<BackendId> Registry::find_backend(std::string_view name) const {
  const detail::StateRef ref(*core_);
  for (const auto& b : ref->backends) {
    if (b && b->name == name) return b->id;
  }
  return std::nullopt;
}

Backend& Registry::backend(BackendId id) const {
  const detail::StateRef ref(*core_);
  const State& s = *ref;
  if (id >= kMaxBackends || !s.backends[id]) fail(ErrorKind::device, "no backend has id {}", static_cast<int>(id));
  return *s.backends[id]->backend;
}

std::vector<BackendInfo> Registry::backends() const {
  const detail::StateRef ref(*core_);
  const State& s = *ref;
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
  return detail::StateRef(*core_)->backends[device.backend]->props[static_cast<std::size_t>(device.index)];
}
std::vector<VariantInfo> Registry::variants(std::string_view op_name) const {
  const detail::StateRef ref(*core_);
  const State& s = *ref;
  std::vector<VariantInfo> out;
  for (const auto* op : all_ops()) {
    if (op->name != op_name || !s.ops[static_cast<std::size_t>(op->id)]) continue;
    for (const auto& bt : s.ops[static_cast<std::size_t>(op->id)]->backends) {
      if (!bt) continue;
      for (const auto* v : bt->order) out.push_back(*v->info);
      for (const auto* v : bt->disabled) out.push_back(*v->info);
    }
  }
  return out;
}

}  // namespace opreg
