// The plugin loader: dlopen, the entry function, the host's registration API behind
// include/opreg/plugin.h, and the backend class that wraps a plugin's C memory services.
//
// A load is one session: every registration the plugin asks for is made at once (so a failure
// names the call that failed) and kept in the session; if any was refused or the entry function
// fails, the session undoes them all, newest first, and the load throws the first error. Only a
// load that succeeds keeps its registrations, for the registry's lifetime. The shared library is
// never unloaded once its entry function has run: a refused plugin's code may still be running a
// kernel on another thread that picked it up before the undo.
#include <dlfcn.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "opreg/plugin.h"
#include "opreg/registry.h"
#include "opreg/version.h"
#include "registry/fail.h"
#include "registry/names.h"
#include "registry/plugin_ops.h"
#include "registry/quote.h"
#include "registry/state.h"

namespace opreg {
namespace detail {
namespace {

constexpr std::size_t kMessageSize = 512;

void write_message(char* buffer, std::size_t size, std::string_view text) {
  if (buffer == nullptr || size == 0) return;
  const std::size_t n = std::min(size - 1, text.size());
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
}

std::string message_text(const std::array<char, kMessageSize>& buffer, std::string_view otherwise) {
  const std::string_view text(buffer.data(), strnlen(buffer.data(), buffer.size()));
  return text.empty() ? std::string(otherwise) : escape(text);
}

// Every struct a plugin passes starts with its size and version; this opreg knows version 1.
constexpr std::uint32_t kMinApiVersion = 1;

void check_header(std::string_view what, std::uint32_t size, std::uint32_t version, std::size_t expected) {
  if (version < kMinApiVersion) {
    fail(ErrorKind::invalid_argument, "{} is written against plugin API version {}, older than this opreg accepts "
         "({} to {}); rebuild the plugin against this opreg's plugin.h", what, version, kMinApiVersion,
         OPREG_PLUGIN_API_VERSION);
  }
  if (version > OPREG_PLUGIN_API_VERSION) {
    fail(ErrorKind::invalid_argument, "{} is written against plugin API version {}, newer than this opreg's {} "
         "(opreg {}); use a newer opreg or rebuild the plugin against this one's plugin.h", what, version,
         OPREG_PLUGIN_API_VERSION, OPREG_VERSION);
  }
  if (size != expected) {
    fail(ErrorKind::invalid_argument, "{} has struct_size {}, but {} of plugin API version {} is {} bytes; the "
         "plugin was built against another plugin.h", what, size, what, version, expected);
  }
}

const char* require_text(const char* text, std::string_view what) {
  if (text == nullptr) fail(ErrorKind::invalid_argument, "{} is NULL", what);
  return text;
}

DeviceProps device_props_of(const opreg_device_props* p, std::size_t index) {
  const std::string what = fmt::format("opreg_backend_desc.devices[{}]", index);
  if (p == nullptr) fail(ErrorKind::invalid_argument, "{} is NULL", what);
  check_header(what, p->struct_size, p->api_version, sizeof(opreg_device_props));
  DeviceProps props;
  props.name = p->name != nullptr ? p->name : "";
  props.memory_bytes = p->memory_bytes;
  props.compute_units = p->compute_units;
  props.emulated = p->emulated != 0;
  props.host_memory = p->reserved[OPREG_DEVICE_HOST_MEMORY] != nullptr;
  if (p->extra_count > 0 && (p->extra_keys == nullptr || p->extra_values == nullptr)) {
    fail(ErrorKind::invalid_argument, "{}: extra_count is {} but extra_keys or extra_values is NULL", what,
         p->extra_count);
  }
  for (std::uint32_t i = 0; i < p->extra_count; ++i) {
    props.extra.emplace_back(require_text(p->extra_keys[i], fmt::format("{}.extra_keys[{}]", what, i)),
                             require_text(p->extra_values[i], fmt::format("{}.extra_values[{}]", what, i)));
  }
  return props;
}

// A backend whose memory services are a plugin's C functions.
class PluginBackend final : public Backend {
 public:
  PluginBackend(const opreg_backend_desc& d, std::string plugin) : desc_(d), plugin_(std::move(plugin)) {
    name_ = require_text(d.name, "opreg_backend_desc.name");
    if (d.fallback < OPREG_FALLBACK_ERROR || d.fallback > OPREG_FALLBACK_SILENT) {
      fail(ErrorKind::invalid_argument, "backend {}: fallback {} is not one of OPREG_FALLBACK_ERROR (0), _WARN (1), "
           "_SILENT (2)", quote(name_), d.fallback);
    }
    std::vector<std::string> missing;
    if (d.allocate == nullptr) missing.emplace_back("allocate");
    if (d.deallocate == nullptr) missing.emplace_back("deallocate");
    if (d.copy_to_host == nullptr) missing.emplace_back("copy_to_host");
    if (d.copy_from_host == nullptr) missing.emplace_back("copy_from_host");
    if (d.copy_on_device == nullptr) missing.emplace_back("copy_on_device");
    if (d.fill == nullptr) missing.emplace_back("fill");
    if (d.synchronize == nullptr) missing.emplace_back("synchronize");
    if (!missing.empty()) {
      fail(ErrorKind::invalid_argument, "backend {}: memory services missing (NULL): {}", quote(name_),
           join(missing));
    }
    availability_.available = d.available != 0;
    availability_.reason = d.reason != nullptr ? d.reason : "";
    if (availability_.available) {
      if (d.device_count < 0 || d.device_count > INT16_MAX) {
        fail(ErrorKind::invalid_argument, "backend {}: device_count {} is not 0 to {}", quote(name_), d.device_count,
             INT16_MAX);
      }
      if (d.device_count > 0 && d.devices == nullptr) {
        fail(ErrorKind::invalid_argument, "backend {}: device_count is {} but devices is NULL", quote(name_),
             d.device_count);
      }
      availability_.device_count = d.device_count;
      for (int i = 0; i < d.device_count; ++i) props_.push_back(device_props_of(d.devices[i], static_cast<std::size_t>(i)));
    }
    // The C views point into props_, which no longer changes.
    for (const auto& p : props_) c_props_.push_back(std::make_unique<CDeviceProps>(p));
  }
  ~PluginBackend() override { release_workspaces(); }

  std::string name() const override { return name_; }
  int inference_priority() const override { return desc_.inference_priority; }
  FallbackPolicy default_fallback() const override { return static_cast<FallbackPolicy>(desc_.fallback); }
  Availability probe() override { return availability_; }
  DeviceProps properties(int index) const override { return props_.at(static_cast<std::size_t>(index)); }
  int dlpack_device_type() const override { return desc_.dlpack_device_type; }
  const opreg_device_props* c_props(int index) const {
    return index >= 0 && static_cast<std::size_t>(index) < c_props_.size() ? c_props_[static_cast<std::size_t>(index)]->get()
                                                                          : nullptr;
  }

  void* allocate(int index, std::size_t bytes) override {
    void* out = nullptr;
    call("allocate", bytes, index, desc_.allocate, index, bytes, &out);
    if (out == nullptr && bytes > 0) {
      fail(ErrorKind::device, "backend {} (plugin {}): allocate of {} bytes on device {} returned NULL", name_,
           quote(plugin_), bytes, index);
    }
    return out;
  }
  void deallocate(int index, void* ptr, std::size_t bytes) noexcept override {
    desc_.deallocate(desc_.user, index, ptr, bytes);
  }
  void copy_to_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) override {
    call("copy_to_host", bytes, index, desc_.copy_to_host, index, dst, src, bytes, stream);
  }
  void copy_from_host(int index, void* dst, const void* src, std::size_t bytes, void* stream) override {
    call("copy_from_host", bytes, index, desc_.copy_from_host, index, dst, src, bytes, stream);
  }
  void copy_on_device(int index, void* dst, const void* src, std::size_t bytes, void* stream) override {
    call("copy_on_device", bytes, index, desc_.copy_on_device, index, dst, src, bytes, stream);
  }
  void fill(int index, void* dst, std::size_t bytes, const void* pattern, std::size_t pattern_bytes,
            void* stream) override {
    call("fill", bytes, index, desc_.fill, index, dst, bytes, pattern, pattern_bytes, stream);
  }
  void synchronize(int index, void* stream) override { call("synchronize", 0, index, desc_.synchronize, index, stream); }
  void* default_stream(int index) override {
    return desc_.default_stream != nullptr ? desc_.default_stream(desc_.user, index) : nullptr;
  }
  std::uint64_t memory_available(int index) override {
    return desc_.memory_available != nullptr ? desc_.memory_available(desc_.user, index) : 0;
  }

 private:
  template <class F, class... A>
  void call(const char* what, std::size_t bytes, int index, F* f, A... args) {
    std::array<char, kMessageSize> message{};
    const std::int32_t status = f(desc_.user, args..., message.data(), message.size());
    if (status != OPREG_OK) {
      fail(error_kind(status), "backend {} (plugin {}): {}{} on device {} failed: {}", name_, quote(plugin_), what,
           bytes > 0 ? fmt::format(" of {} bytes", bytes) : std::string(), index, message_text(message, "no message"));
    }
  }

  opreg_backend_desc desc_;
  std::string plugin_;
  std::string name_;
  Availability availability_;
  std::vector<DeviceProps> props_;
  std::vector<std::unique_ptr<CDeviceProps>> c_props_;
};

}  // namespace

const opreg_device_props* plugin_device_props(const Backend& backend, int index) {
  const auto* p = dynamic_cast<const PluginBackend*>(&backend);
  return p != nullptr ? p->c_props(index) : nullptr;
}

// One load: the registrations it made and the first error.
struct PluginSession {
  Registry& registry;
  std::string path;
  std::vector<Registration> registrations;
  std::optional<Error> first_error;

  // Runs `f`; an opreg::Error becomes the status and message of the C call (and the session's
  // first error).
  template <class F>
  std::int32_t guarded(char* message, std::size_t message_size, F&& f) {
    try {
      f();
      return OPREG_OK;
    } catch (const Error& e) {
      if (!first_error) first_error = e;
      write_message(message, message_size, e.what());
      return status_of(e.kind());
    } catch (const std::exception& e) {
      if (!first_error) first_error = Error(ErrorKind::internal, e.what());
      write_message(message, message_size, e.what());
      return OPREG_INTERNAL_ERROR;
    }
  }

  static std::int32_t register_backend(void* host, const opreg_backend_desc* d, char* message, std::size_t size) {
    auto& self = *static_cast<PluginSession*>(host);
    return self.guarded(message, size, [&] {
      if (d == nullptr) fail(ErrorKind::invalid_argument, "register_backend: opreg_backend_desc is NULL");
      check_header("opreg_backend_desc", d->struct_size, d->api_version, sizeof(opreg_backend_desc));
      auto backend = std::make_shared<PluginBackend>(*d, self.path);
      self.registrations.push_back(self.registry.add_backend(std::move(backend), self.path.c_str(), 0));
    });
  }

  static std::int32_t register_variant(void* host, const opreg_variant_desc* d, char* message, std::size_t size) {
    auto& self = *static_cast<PluginSession*>(host);
    return self.guarded(message, size, [&] {
      if (d == nullptr) fail(ErrorKind::invalid_argument, "register_variant: opreg_variant_desc is NULL");
      check_header("opreg_variant_desc", d->struct_size, d->api_version, sizeof(opreg_variant_desc));
      require_text(d->backend, "opreg_variant_desc.backend");
      require_text(d->op, "opreg_variant_desc.op");
      require_text(d->impl, "opreg_variant_desc.impl");
      const std::string name = fmt::format("{}.{}.{}", d->backend, d->op, d->impl);
      if (d->run == nullptr) fail(ErrorKind::invalid_argument, "variant {}: run is NULL", quote(name));
      if (d->tunable_count > 0 && (d->tunable_names == nullptr || d->tunable_values == nullptr)) {
        fail(ErrorKind::invalid_argument, "variant {}: tunable_count is {} but tunable_names or tunable_values is "
             "NULL", quote(name), d->tunable_count);
      }
      for (std::uint32_t i = 0; i < d->tunable_count; ++i) {
        require_text(d->tunable_names[i], fmt::format("variant {}: tunable_names[{}]", quote(name), i));
        require_text(d->tunable_values[i], fmt::format("variant {}: tunable_values[{}]", quote(name), i));
      }
      self.registrations.push_back(
          self.registry.add_variant_erased(c_variant(self.registry, *d, self.path), {}, self.path.c_str(), 0));
    });
  }

  static void log(void* host, const char* line) {
    auto& self = *static_cast<PluginSession*>(host);
    self.registry.core_->log(fmt::format("opreg: plugin {}: {}", quote(self.path),
                                         escape(line != nullptr ? line : "")));
  }
};

}  // namespace detail

void Registry::load_plugin(std::string_view path_text) {
  const std::string path(path_text);
  if (path.empty()) fail(ErrorKind::invalid_argument, "load_plugin: the plugin path is empty");
  std::lock_guard lock(core_->plugins_mutex);
  // dlopen's own message for a missing file is vaguer than this.
  struct stat file {};
  if (path.find('/') != std::string::npos) {
    if (::stat(path.c_str(), &file) != 0) {
      fail(ErrorKind::invalid_argument, "plugin {}: cannot load: {}", quote(path), std::strerror(errno));
    }
    // dlopen of a FIFO waits for a writer forever, and of a device reads it: only a regular file
    // (or a link to one) is a shared library.
    if (!S_ISREG(file.st_mode)) {
      const char* kind = S_ISFIFO(file.st_mode)  ? "a FIFO"
                         : S_ISDIR(file.st_mode) ? "a directory"
                         : S_ISCHR(file.st_mode) ? "a character device"
                         : S_ISBLK(file.st_mode) ? "a block device"
                         : S_ISSOCK(file.st_mode) ? "a socket"
                                                  : "not a regular file";
      fail(ErrorKind::invalid_argument, "plugin {}: cannot load: it is {}; a plugin is a shared library file",
           quote(path), kind);
    }
  }
  std::string canonical = path;
  if (char* resolved = ::realpath(path.c_str(), nullptr)) {
    canonical = resolved;
    std::free(resolved);
  }
  for (const auto& loaded : core_->plugins) {
    if (loaded == canonical) {
      fail(ErrorKind::invalid_argument, "plugin {}: already loaded into this registry (as {})", quote(path),
           quote(canonical));
    }
  }
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    fail(ErrorKind::invalid_argument, "plugin {}: cannot load: {}", quote(path), escape(why != nullptr ? why : "?"));
  }
  auto entry = reinterpret_cast<opreg_plugin_init_fn>(::dlsym(handle, OPREG_PLUGIN_ENTRY));
  if (entry == nullptr) {
    ::dlclose(handle);  // none of its code has run but its constructors
    fail(ErrorKind::invalid_argument, "plugin {}: no entry function {} (a plugin exports `int32_t {}(const "
         "opreg_host*, char*, size_t)` with OPREG_PLUGIN_EXPORT; see opreg/plugin.h)", quote(path),
         OPREG_PLUGIN_ENTRY, OPREG_PLUGIN_ENTRY);
  }

  detail::PluginSession session{*this, path, {}, std::nullopt};
  opreg_host host{};
  host.struct_size = sizeof(host);
  host.api_version = OPREG_PLUGIN_API_VERSION;
  host.min_api_version = detail::kMinApiVersion;
  host.opreg_version = OPREG_VERSION;
  host.plugin_path = session.path.c_str();
  host.host = &session;
  host.register_backend = &detail::PluginSession::register_backend;
  host.register_variant = &detail::PluginSession::register_variant;
  host.log = &detail::PluginSession::log;
  std::array<char, detail::kMessageSize> message{};
  std::int32_t status = OPREG_INTERNAL_ERROR;
  try {
    status = entry(&host, message.data(), message.size());
  } catch (...) {
    detail::write_message(message.data(), message.size(), "the entry function threw an exception (a plugin must "
                          "return a status instead)");
  }
  if (session.first_error || status != OPREG_OK) {
    while (!session.registrations.empty()) session.registrations.pop_back();  // newest first
    if (session.first_error) {
      throw Error(session.first_error->kind(), fmt::format("plugin {}: {}", quote(path), session.first_error->what()));
    }
    fail(detail::error_kind(status), "plugin {}: its entry function failed: {}", quote(path),
         detail::message_text(message, "no message"));
  }
  for (auto& r : session.registrations) r.release();
  core_->plugins.push_back(std::move(canonical));
}

std::vector<std::string> Registry::plugins() const {
  std::lock_guard lock(core_->plugins_mutex);
  return core_->plugins;
}

void load_plugin(std::string_view path) { default_registry().load_plugin(path); }

}  // namespace opreg
