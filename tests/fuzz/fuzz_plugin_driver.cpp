// The plugin that fuzz_plugin loads: a fixed, trusted shared library whose entry function replays
// a script of fuzzed bytes against opreg's plugin interface (opreg/plugin.h). Every descriptor
// it passes is built from the script: struct sizes, API versions, names (NULL, empty, any bytes),
// counts with and without their arrays, fallback policies, device counts, NULL services, and a
// return status with a message that may fill its buffer without a terminating NUL. Its memory
// services are real (host memory) but fail, or hand back NULL, when the script says so, and so
// do its kernels. Pointers are always valid or NULL and counts always match their arrays: the
// interface cannot check those, so fuzzing them would only find the fuzzer's own bugs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "opreg/plugin.h"

namespace {

// The script: read front to back; past its end every read is 0.
struct Script {
  std::vector<std::uint8_t> bytes;
  std::size_t at = 0;

  std::uint8_t u8() { return at < bytes.size() ? bytes[at++] : 0; }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | u8();
    return v;
  }
  std::uint64_t u64() { return static_cast<std::uint64_t>(u32()) << 32 | u32(); }
  bool done() const { return at >= bytes.size(); }
  // A string of up to 15 bytes, any values (a NUL ends it early, as C would read it).
  std::string text() {
    std::string s;
    const int n = u8() % 16;
    for (int i = 0; i < n; ++i) s += static_cast<char>(u8());
    return s;
  }
};

Script g_script;

// What the memory services and kernels do, set by the script for the whole load.
struct Behaviour {
  std::uint8_t fail_services = 0;  // bit per service: return OPREG_DEVICE_ERROR (or the status below)
  std::uint8_t null_allocation = 0;
  std::int32_t failure_status = OPREG_DEVICE_ERROR;
  std::int32_t run_status = OPREG_OK;
  std::int32_t supports_answer = 1;
  std::uint64_t memory_available = 0;
  std::string message;  // written by a failing service, truncated or unterminated
  bool unterminated = false;
};
Behaviour g_behaviour;

// A failing call's message: the script's text, or the whole buffer with no NUL.
void write_message(char* buffer, std::size_t size) {
  if (buffer == nullptr || size == 0) return;
  if (g_behaviour.unterminated) {
    std::memset(buffer, 'm', size);
    return;
  }
  const std::size_t n = std::min(size - 1, g_behaviour.message.size());
  std::memcpy(buffer, g_behaviour.message.data(), n);
  buffer[n] = '\0';
}

std::int32_t service(int bit, char* message, std::size_t size) {
  if ((g_behaviour.fail_services >> bit & 1) == 0) return OPREG_OK;
  write_message(message, size);
  return g_behaviour.failure_status;
}

std::int32_t allocate(void*, std::int32_t, std::size_t bytes, void** out, char* message, std::size_t size) {
  *out = nullptr;
  if (const std::int32_t s = service(0, message, size); s != OPREG_OK) return s;
  if (g_behaviour.null_allocation != 0) return OPREG_OK;  // "succeeds" with NULL: opreg must refuse it
  *out = std::malloc(bytes == 0 ? 1 : bytes);
  return OPREG_OK;
}
void deallocate(void*, std::int32_t, void* ptr, std::size_t) { std::free(ptr); }
std::int32_t copy_to_host(void*, std::int32_t, void* dst, const void* src, std::size_t bytes, void*, char* message,
                          std::size_t size) {
  if (const std::int32_t s = service(1, message, size); s != OPREG_OK) return s;
  std::memmove(dst, src, bytes);
  return OPREG_OK;
}
std::int32_t copy_from_host(void*, std::int32_t, void* dst, const void* src, std::size_t bytes, void*, char* message,
                            std::size_t size) {
  if (const std::int32_t s = service(2, message, size); s != OPREG_OK) return s;
  std::memmove(dst, src, bytes);
  return OPREG_OK;
}
std::int32_t copy_on_device(void*, std::int32_t, void* dst, const void* src, std::size_t bytes, void*, char* message,
                            std::size_t size) {
  if (const std::int32_t s = service(3, message, size); s != OPREG_OK) return s;
  std::memmove(dst, src, bytes);
  return OPREG_OK;
}
std::int32_t fill(void*, std::int32_t, void* dst, std::size_t bytes, const void* pattern, std::size_t pattern_bytes,
                  void*, char* message, std::size_t size) {
  if (const std::int32_t s = service(4, message, size); s != OPREG_OK) return s;
  for (std::size_t i = 0; pattern_bytes > 0 && i + pattern_bytes <= bytes; i += pattern_bytes) {
    std::memcpy(static_cast<char*>(dst) + i, pattern, pattern_bytes);
  }
  return OPREG_OK;
}
std::int32_t synchronize(void*, std::int32_t, void*, char* message, std::size_t size) {
  return service(5, message, size);
}
void* default_stream(void*, std::int32_t) { return nullptr; }
std::uint64_t memory_available(void*, std::int32_t) { return g_behaviour.memory_available; }

std::int32_t supports(void*, const void*, const opreg_device_props*, char* reason, std::size_t size) {
  if (g_behaviour.supports_answer == 0) write_message(reason, size);
  return g_behaviour.supports_answer;
}
std::int32_t run(void*, const void*, const opreg_kernel_context* ctx, char* message, std::size_t size) {
  if (g_behaviour.run_status != OPREG_OK) {
    write_message(message, size);
    return g_behaviour.run_status;
  }
  // A kernel may ask for scratch memory; NULL is an answer it must handle.
  if (ctx != nullptr && ctx->workspace != nullptr) (void)ctx->workspace(ctx, g_behaviour.memory_available % 4096);
  return OPREG_OK;
}

// Every op of the manifest (include/opreg/op_manifest.h, which plugin.h includes), by name.
const char* const kOps[] = {
#define OPREG_FUZZ_OP_NAME_(ident, base, direction, Args, c_args) #base "." #direction,
    OPREG_OPS(OPREG_FUZZ_OP_NAME_)
#undef OPREG_FUZZ_OP_NAME_
};

// Strings and arrays a registration points to; they outlive the call that passes them.
struct Storage {
  std::vector<std::string> strings;
  std::vector<std::vector<const char*>> lists;
  std::vector<opreg_device_props> props;
  std::vector<std::vector<const opreg_device_props*>> prop_lists;
  Storage() {
    strings.reserve(256);
    lists.reserve(64);
    props.reserve(64);
    prop_lists.reserve(16);
  }
  // The vectors never reallocate (what they hold is pointed to); past their capacity the
  // script gets a fixed string or NULL.
  const char* keep(std::string s) {
    if (strings.size() == strings.capacity()) return "full";
    strings.push_back(std::move(s));
    return strings.back().c_str();
  }
};

std::uint32_t struct_size(Script& s, std::size_t real) {
  switch (s.u8() % 6) {
    case 0: return 0;
    case 1: return static_cast<std::uint32_t>(real) - 8;
    case 2: return static_cast<std::uint32_t>(real) + 8;
    case 3: return s.u32();
    default: return static_cast<std::uint32_t>(real);
  }
}
std::uint32_t api_version(Script& s) {
  switch (s.u8() % 6) {
    case 0: return 0;
    case 1: return OPREG_PLUGIN_API_VERSION + 1;
    case 2: return s.u32();
    default: return OPREG_PLUGIN_API_VERSION;
  }
}
// NULL, one of `usual` (by the script's choice), or any bytes.
const char* name(Script& s, Storage& st, const std::vector<const char*>& usual) {
  const std::uint8_t pick = s.u8();
  if (pick % 8 == 0) return nullptr;
  if (pick % 8 == 1 || usual.empty()) return st.keep(s.text());
  return usual[pick / 8 % usual.size()];
}
std::int32_t small_or_any(Script& s, std::int32_t lo, std::int32_t hi) {
  const std::uint8_t pick = s.u8();
  if (pick < 224) return lo + pick % (hi - lo + 1);
  return static_cast<std::int32_t>(s.u32());
}
// A list of `count` strings, or (count > 0) NULL; an entry may be NULL too.
const char* const* text_list(Script& s, Storage& st, std::uint32_t count, const std::vector<const char*>& usual) {
  if (count > 0 && s.u8() % 8 == 0) return nullptr;
  if (st.lists.size() == st.lists.capacity()) return nullptr;
  std::vector<const char*> list;
  for (std::uint32_t i = 0; i < count; ++i) list.push_back(name(s, st, usual));
  list.push_back(nullptr);
  st.lists.push_back(std::move(list));
  return st.lists.back().data();
}

const opreg_device_props* device(Script& s, Storage& st) {
  if (s.u8() % 8 == 0 || st.props.size() == st.props.capacity()) return nullptr;
  opreg_device_props p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = struct_size(s, sizeof p);
  p.api_version = api_version(s);
  p.name = name(s, st, {"fuzz device"});
  p.memory_bytes = s.u8() % 2 == 0 ? s.u64() : 1ULL << 30;
  p.compute_units = small_or_any(s, 0, 8);
  p.emulated = small_or_any(s, 0, 1);
  p.extra_count = static_cast<std::uint32_t>(small_or_any(s, 0, 3));
  if (p.extra_count > 3) {
    p.extra_keys = nullptr;  // a count with no arrays: opreg must not read them
    p.extra_values = nullptr;
  } else {
    p.extra_keys = text_list(s, st, p.extra_count, {"ub_bytes", "sm"});
    p.extra_values = text_list(s, st, p.extra_count, {"1", "x"});
  }
  st.props.push_back(p);
  return &st.props.back();
}

std::vector<const char*> g_backend_names;  // the backends this load registered, for variants

std::int32_t register_backend(const opreg_host* host, Script& s, Storage& st) {
  opreg_backend_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = struct_size(s, sizeof d);
  d.api_version = api_version(s);
  d.name = name(s, st, {"fuzz", "fuzz_b", "cpu", "npu", "Fuzz", "9x", ""});
  d.inference_priority = small_or_any(s, -2, 2);
  d.fallback = small_or_any(s, -1, 3);
  d.available = small_or_any(s, 0, 1);
  d.reason = name(s, st, {"the fuzz device"});
  // A count the script picks; an array only where it is small enough to hold.
  const std::uint8_t how = s.u8();
  const std::int32_t counts[] = {0, 1, 2, 3, -1, 32767, 32768, INT32_MAX, INT32_MIN};
  d.device_count = counts[how % 9];
  if (d.device_count > 0 && d.device_count <= 3 && how / 9 % 4 != 0 && st.prop_lists.size() < st.prop_lists.capacity()) {
    std::vector<const opreg_device_props*> list;
    for (std::int32_t i = 0; i < d.device_count; ++i) list.push_back(device(s, st));
    st.prop_lists.push_back(std::move(list));
    d.devices = st.prop_lists.back().data();
  }
  d.dlpack_device_type = small_or_any(s, 1, 16);
  const std::uint8_t services = s.u8();  // a clear bit leaves that service NULL
  const bool all = services >= 0x40;
  d.allocate = all || (services & 1) ? allocate : nullptr;
  d.deallocate = all || (services & 2) ? deallocate : nullptr;
  d.copy_to_host = all || (services & 4) ? copy_to_host : nullptr;
  d.copy_from_host = all || (services & 8) ? copy_from_host : nullptr;
  d.copy_on_device = all || (services & 16) ? copy_on_device : nullptr;
  d.fill = all || (services & 32) ? fill : nullptr;
  d.synchronize = all || (services & 1) ? synchronize : nullptr;
  d.default_stream = s.u8() % 2 ? default_stream : nullptr;
  d.memory_available = s.u8() % 2 ? memory_available : nullptr;
  char message[64];
  const std::int32_t status = host->register_backend(host->host, s.u8() % 16 == 0 ? nullptr : &d, message,
                                                     s.u8() % 2 ? sizeof message : 1);
  if (status == OPREG_OK && d.name != nullptr) g_backend_names.push_back(d.name);
  return status;
}

std::int32_t register_variant(const opreg_host* host, Script& s, Storage& st) {
  opreg_variant_desc v;
  std::memset(&v, 0, sizeof v);
  v.struct_size = struct_size(s, sizeof v);
  v.api_version = api_version(s);
  std::vector<const char*> backends = g_backend_names;
  backends.push_back("cpu");
  v.backend = name(s, st, backends);
  v.op = name(s, st, std::vector<const char*>(std::begin(kOps), std::end(kOps)));
  v.impl = name(s, st, {"fast", "ref", "x", "Bad", "a.b"});
  v.priority = small_or_any(s, -2, 2);
  v.strided = small_or_any(s, 0, 1);
  v.tunable_count = static_cast<std::uint32_t>(small_or_any(s, 0, 2));
  if (v.tunable_count <= 2) {
    v.tunable_names = text_list(s, st, v.tunable_count, {"block"});
    v.tunable_values = text_list(s, st, v.tunable_count, {"256"});
  }
  v.supports = s.u8() % 2 ? supports : nullptr;
  v.run = s.u8() % 8 ? run : nullptr;
  char message[128];
  return host->register_variant(host->host, s.u8() % 16 == 0 ? nullptr : &v, message, sizeof message);
}

}  // namespace

// The fuzz target hands the script over before each load.
extern "C" OPREG_PLUGIN_EXPORT void opreg_fuzz_plugin_script(const std::uint8_t* data, std::size_t size) {
  g_script.bytes.assign(data, data + size);
  g_script.at = 0;
}

extern "C" OPREG_PLUGIN_EXPORT std::int32_t opreg_plugin_init(const opreg_host* host, char* message,
                                                              std::size_t message_size) {
  Script& s = g_script;
  s.at = 0;
  g_backend_names.clear();
  g_behaviour = Behaviour{};
  g_behaviour.fail_services = s.u8();
  g_behaviour.fail_services &= s.u8();  // most runs: few failing services
  g_behaviour.null_allocation = s.u8() % 8 == 0;
  g_behaviour.failure_status = small_or_any(s, 1, 5);
  g_behaviour.run_status = s.u8() % 4 == 0 ? small_or_any(s, 1, 5) : OPREG_OK;
  g_behaviour.supports_answer = s.u8() % 4 == 0 ? 0 : 1;
  g_behaviour.memory_available = s.u8() % 4 == 0 ? s.u64() : 0;
  g_behaviour.message = s.text();
  g_behaviour.unterminated = s.u8() % 8 == 0;

  // Freed when the entry returns: opreg must have copied what it keeps (ASan reports a later read).
  Storage storage;
  // A registration opreg refused must make the load fail although the plugin goes on and says OK.
  for (int step = 0; step < 16 && !s.done(); ++step) {
    const std::uint8_t what = s.u8() % 4;
    if (what == 0) {
      (void)register_backend(host, s, storage);
    } else if (what == 1) {
      (void)register_variant(host, s, storage);
    } else if (what == 2) {
      host->log(host->host, s.u8() % 4 == 0 ? nullptr : storage.keep(s.text()));
    } else {
      // Stop early with the script's status (also an unknown one) and message.
      const std::int32_t status = small_or_any(s, 0, 5);
      if (status != OPREG_OK) write_message(message, message_size);
      return status;
    }
  }
  return OPREG_OK;
}
