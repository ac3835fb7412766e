// The dispatch table: backends, ops, kernel variants, device inference and configuration.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opreg/device.h"
#include "opreg/error.h"
#include "opreg/function.h"
#include "opreg/tensor.h"

namespace opreg {

// ---------------------------------------------------------------------------------------------
// Ops: a name, a typed argument struct, one checking function shared by all backends.

enum class Role : std::uint8_t { in, out, inout };

struct TensorSlot {
  const char* name;
  Tensor* tensor;  // may be undefined (an optional argument left out)
  Role role;
};

inline constexpr int kMaxOpTensors = 16;

// The tensors of one call, named, in a fixed-capacity list (no heap on the dispatch path).
class TensorList {
 public:
  TensorList() {}  // slots stay uninitialised: only the first size() are ever read
  void add(const char* name, Tensor& tensor, Role role) {
    if (size_ == kMaxOpTensors) too_many(name);
    slots_[static_cast<std::size_t>(size_++)] = TensorSlot{name, &tensor, role};
  }
  void add(const char* name, const Tensor& tensor) { add(name, const_cast<Tensor&>(tensor), Role::in); }
  int size() const { return size_; }
  const TensorSlot& operator[](int i) const { return slots_[static_cast<std::size_t>(i)]; }

 private:
  [[noreturn]] static void too_many(const char* name);
  std::array<TensorSlot, kMaxOpTensors> slots_;
  int size_ = 0;
};

inline constexpr int kKeyWords = 16;

// What the choice of a variant may depend on, and so what a `supports` predicate may look at:
// the device; every tensor's presence, dtype, contiguity and data alignment (up to 64 bytes);
// the first tensor's shape (an op's check ties the other shapes to it, but rope's k and tables,
// whose own extents the op adds); the strides of non-contiguous tensors; and what the op adds
// (scalars its variants look at). A key that does not fit is marked uncacheable and the choice
// is then made on every call.
struct ProblemKey {
  ProblemKey() {}  // words stay uninitialised: only the first `size` are ever read
  std::array<std::uint64_t, kKeyWords> words;
  int size = 0;
  bool overflow = false;
  void add(std::uint64_t word) {
    if (size == kKeyWords) {
      overflow = true;
      return;
    }
    words[static_cast<std::size_t>(size++)] = word;
  }
  std::uint64_t hash() const;
  friend bool operator==(const ProblemKey& a, const ProblemKey& b);
};

// What an op's check learns about the call's tensors on the way, so that dispatch does not walk
// them again. "Listed": in the order OpSpec::tensors lists them.
struct CallFacts {
  Device device;               // the first listed tensor's
  bool first_defined = false;  // the first listed tensor is defined (else the rest says nothing)
  bool mixed_devices = false;  // a defined tensor is on another device than `device`
  std::uint32_t strided = 0;   // bit i: the i-th listed tensor is defined and not contiguous
};

template <class Args>
struct OpSpec {
  std::string name{};                         // "rms_norm.fwd"
  void (*check)(const Args&) = nullptr;       // throws opreg::Error naming the op
  // Every tensor argument, named, with its role: members of Args, the same ones on every call
  // (Op's constructor lists them once, on a default Args, and dispatch reads them by offset).
  void (*tensors)(Args&, TensorList&) = nullptr;
  void (*key)(const Args&, ProblemKey&) = nullptr;  // optional: scalars the choice depends on
  // Instead of `check` (give one of the two): the same check, returning the CallFacts of
  // exactly the tensors `tensors` lists, in its order. Dispatch then trusts the facts.
  CallFacts (*check_facts)(const Args&) = nullptr;
};

struct DispatchResult;
struct VariantInfo;

namespace detail {
// One tensor member of an op's argument struct, where dispatch finds it without a per-call list.
struct TensorField {
  const char* name = nullptr;
  std::uint32_t offset = 0;  // bytes from the start of the argument struct
  Role role = Role::in;
};

struct OpDef {
  std::string name;
  int id = -1;
  std::array<TensorField, kMaxOpTensors> fields{};  // what `tensors` lists, in its order
  int field_count = 0;
  const Tensor& tensor(const void* args, int i) const {
    return *reinterpret_cast<const Tensor*>(static_cast<const char*>(args) +
                                            fields[static_cast<std::size_t>(i)].offset);
  }
  void (*check)(const OpDef&, const void* args) = nullptr;
  CallFacts (*check_facts)(const OpDef&, const void* args) = nullptr;  // optional
  void (*tensors)(const OpDef&, void* args, TensorList& out) = nullptr;
  void (*key)(const OpDef&, const void* args, ProblemKey& key) = nullptr;
  // Copies the arguments onto the host, dispatches there, copies outputs back.
  DispatchResult (*run_on_host)(Registry& registry, const OpDef& op, const void* args,
                                const ExecContext* ctx) = nullptr;
  virtual ~OpDef() = default;
};
// Assigns the op an id (names are unique process-wide; at most kMaxOps ops).
const OpDef& define_op(std::unique_ptr<OpDef> op);
template <class Args>
struct TypedOpDef;
}  // namespace detail

inline constexpr int kMaxOps = 64;

// Every op defined in this process, in id order.
std::vector<const detail::OpDef*> all_ops();

template <class Args>
class Op {
 public:
  explicit Op(OpSpec<Args> spec);
  std::string_view name() const { return def_->name; }
  int id() const { return def_->id; }
  const detail::OpDef& def() const { return *def_; }

 private:
  const detail::OpDef* def_;
};

// ---------------------------------------------------------------------------------------------
// Variants: one kernel for one (op, backend).

// A variant's plan for one problem: what its supports() decided (tiling, launch shape, the code
// path), kept with the choice in the per-problem cache and handed to its kernel, so that nothing
// is planned twice. Any trivially copyable type of at most kPlanBytes bytes (opreg/variants.h
// types it); empty when the variant does not plan.
inline constexpr std::size_t kPlanBytes = 192;
struct PlanData {
  alignas(8) std::array<unsigned char, kPlanBytes> bytes{};
  std::uint16_t size = 0;  // bytes in use; 0: no plan
  bool empty() const { return size == 0; }
};

// The answer of a `supports` predicate: accepted, or rejected with a reason; either may carry the
// variant's plan (a refusal the plan it refused, which a forced built-in variant runs) and, when
// accepted, a reason saying what was planned (OPREG_VERBOSE shows it).
struct Verdict {
  bool ok = true;
  std::string reason;
  PlanData plan{};
  static Verdict accept() { return {}; }
  static Verdict reject(std::string reason) { return {false, std::move(reason)}; }
};

struct Tunable {
  std::string name;
  std::string value;
};

struct VariantInfo {
  std::string name;     // <backend>.<op>.<impl>, e.g. npu.rms_norm.fwd.chunked
  std::string backend;  // npu
  std::string op;       // rms_norm.fwd
  std::string impl;     // chunked
  int priority = 0;     // higher first
  std::vector<Tunable> tunables;
  std::string site;     // file:line of the registration; a plugin's path for a plugin's variant
  std::string plugin;   // the path of the plugin that registered it; empty when registered in process
  bool is_override = false;
  bool has_supports = false;
  bool strided = false;  // accepts non-contiguous tensors
  std::string tunables_str() const;  // "rows_per_tile=4 threads=8", "" when none
};

// What a kernel receives besides its arguments.
struct KernelContext {
  Registry* registry = nullptr;
  Backend* backend = nullptr;
  Device device;
  const DeviceProps* props = nullptr;
  void* stream = nullptr;  // resolved: never nullptr when the backend has a default stream
  const VariantInfo* variant = nullptr;
  void* user = nullptr;  // VariantSpec::user, e.g. a mock object standing behind the kernel
  int threads = 0;       // OPREG_NUM_THREADS for host kernels; 0: the machine's cores
  const ScratchAllocator* scratch = nullptr;  // the caller's (ExecContext::scratch); nullptr: none
};

// A block of device scratch for one kernel call, given back when the lease ends: from the
// caller's allocator when the call's context has one, else from the backend's cached Workspace.
// Kernels take their scratch through this, never from Backend::workspace directly.
inline Workspace::Lease acquire_scratch(const KernelContext& kc, std::size_t bytes) {
  return kc.backend->workspace(kc.device.index).acquire(bytes, kc.stream, kc.scratch);
}

template <class Args>
struct VariantSpec {
  std::string backend{};
  std::string impl{};
  int priority = 0;
  Function<Verdict(const Args&, const DeviceProps&)> supports{};  // empty: accepts everything
  Function<void(const Args&, const KernelContext&)> run{};
  std::vector<Tunable> tunables{};
  void* user = nullptr;
  // The kernel handles non-contiguous tensors (it reads their strides). A variant without this
  // is never given a non-contiguous tensor, even when forced: the call is refused instead.
  bool strided = false;
};

struct RegisterOptions {
  // Replace a variant of the same name; unregistering the override restores the previous one.
  bool override_existing = false;
};

namespace detail {
struct RegistryCore;
struct PluginSession;
struct CoreAccess;  // the library's own code, to a Registry's core (src/registry/dispatch.h)
// What forcing a variant (OPREG_FORCE_VARIANT) does with its supports().
enum class Forcing : std::uint8_t {
  skip_supports,     // not asked (VariantSpec: the variant's own kernel fails if it cannot run)
  run_refused_plan,  // asked for its plan; a refusal runs the plan it refused (listed variants)
  refusal_is_error,  // asked; a refusal is an error naming the variant (plugins: never handed a
                     // problem they refused)
};
struct ErasedVariant {
  const OpDef* op = nullptr;
  std::string backend;
  std::string impl;
  int priority = 0;
  Function<Verdict(const void*, const DeviceProps&)> supports;
  // The typed kernel and the one indirect call that runs it on erased arguments, with the plan
  // its supports() made (nullptr when there is none).
  std::shared_ptr<const void> run;
  void (*invoke)(const void* run, const void* args, const KernelContext& ctx, const void* plan) = nullptr;
  std::vector<Tunable> tunables;
  void* user = nullptr;
  bool strided = false;
  Forcing forcing = Forcing::skip_supports;
  bool accepts_all = false;  // supports() only plans, never refuses: shown as accepting all
  std::string plugin;  // set by the plugin loader
};
// opreg/variants.h's lists, to the registry (registered for its lifetime).
struct ListAccess {
  static void add(Registry& registry, ErasedVariant variant, const char* file, int line);
};
}  // namespace detail

// Undoes a registration when destroyed (or reset). release() keeps it for the registry's
// lifetime. Safe to destroy after the registry is gone.
class Registration {
 public:
  Registration() = default;
  Registration(Registration&& other) noexcept { *this = std::move(other); }
  Registration& operator=(Registration&& other) noexcept;
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  ~Registration() { reset(); }

  void reset();
  void release() { core_.reset(); }
  bool active() const { return !core_.expired(); }
  // For a backend registration: the id it received.
  BackendId backend_id() const { return backend_id_; }

  enum class Kind : std::uint8_t { none, backend, variant };

 private:
  friend class Registry;
  std::weak_ptr<detail::RegistryCore> core_;
  Kind kind_ = Kind::none;
  std::uint64_t token_ = 0;
  BackendId backend_id_ = 0;
};

struct DispatchResult {
  // The variant that ran (a cpu one after a fallback); valid as long as the registry.
  const VariantInfo* variant = nullptr;
  bool fell_back = false;
};

// ---------------------------------------------------------------------------------------------
// Configuration (the OPREG_* environment variables).

struct Config {
  std::string device;                       // OPREG_DEVICE; empty: infer
  std::vector<std::string> backend_order;   // OPREG_BACKEND_ORDER; empty: by backend priority
  std::vector<std::string> disable;         // OPREG_DISABLE: backend or variant names
  std::vector<std::string> force_variants;  // OPREG_FORCE_VARIANT: full variant names
  std::optional<FallbackPolicy> fallback;   // OPREG_FALLBACK; empty: each backend's default
  int verbose = 0;                          // OPREG_VERBOSE: 0, 1, 2
  int num_threads = 0;                      // OPREG_NUM_THREADS; 0: the machine's cores
  // OPREG_PLUGINS: plugin paths, loaded by default_registry() when it is built (set_config does not
  // load plugins; Registry::load_plugin does).
  std::vector<std::string> plugins;

  // Reads and validates the syntax of every variable; names are checked against a registry
  // when the configuration is applied. Unknown OPREG_* names are returned in `unknown`.
  static Config from_env(std::vector<std::string>* unknown = nullptr);
  // The variables this struct reads, for help text and the unknown-variable check.
  static const std::vector<std::string>& variables();
};

struct BackendInfo {
  BackendId id = 0;
  std::string name;
  int priority = 0;
  FallbackPolicy fallback = FallbackPolicy::error;  // effective (OPREG_FALLBACK applied)
  bool disabled = false;                            // by OPREG_DISABLE
  Availability availability;
  std::vector<DeviceProps> devices;
  std::string site;
};

struct Inference {
  Device device;
  std::string why;  // one line: what was asked, what was skipped and why
};

// ---------------------------------------------------------------------------------------------

class Registry {
 public:
  // An empty registry with the default configuration (no environment read: call
  // reload_config() for that). The process-wide one is default_registry().
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registration (the rules, all checked here; docs/adding-a-backend.md walks through them):
  // - Backend names are [a-z][a-z0-9_]* and unique. The backend named "cpu" gets id 0, others the
  //   lowest free id from 1 whose previous holder has no live tensors; more than kMaxBackends is
  //   an error. probe() and properties() are read once, here; a probe that throws makes the
  //   backend unavailable with the message as reason, unless it is an invalid_argument error.
  // - Variant names are <backend>.<op>.<fwd|bwd>.<impl>; the backend must be registered first;
  //   `ref` is the cpu reference's impl. A name taken is an error naming both registration sites,
  //   unless RegisterOptions::override_existing (the override shadows the original until it is
  //   unregistered).
  // - Each call returns a Registration that undoes it when destroyed (safe while other threads
  //   dispatch); release() keeps it. `file` and `line` are the registration site `opreg ops` shows.
  [[nodiscard]] Registration add_backend(std::shared_ptr<Backend> backend,
                                         const char* file = __builtin_FILE(), int line = __builtin_LINE());
  std::optional<BackendId> find_backend(std::string_view name) const;
  // The backend with this id; an opreg::Error if none. The reference (like device_props') stays
  // valid while the backend is registered.
  Backend& backend(BackendId id) const;
  std::vector<BackendInfo> backends() const;
  const DeviceProps& device_props(Device device) const;

  // Devices.
  std::string device_name(Device device) const;  // "cpu", "npu:0", "cuda:1"
  // device_name plus " (emulated)" for an emulated device: what log lines and errors show.
  std::string device_label(Device device) const;
  // A built-in backend this build does not contain: naming it is "unsupported", not "invalid".
  void declare_absent_backend(std::string name, std::string why);
  std::vector<std::pair<std::string, std::string>> absent_backends() const;
  // "<backend>" or "<backend>:<decimal index>". An opreg::Error listing the accepted devices:
  // invalid_argument when malformed or naming no backend, unsupported for a built-in backend this
  // build lacks, device for an index no Device can hold (past every device count, as check_device
  // says of smaller ones).
  Device parse_device(std::string_view text) const;
  // An opreg::Error (device) unless the device exists and its backend is available.
  void check_device(Device device) const;
  // OPREG_DEVICE if set, else the first available, non-emulated, non-disabled backend in
  // OPREG_BACKEND_ORDER (built-in backends this build lacks are skipped with a note) or priority
  // order.
  Inference infer_device() const;

  // Variants.
  template <class Args>
  [[nodiscard]] Registration add_variant(const Op<Args>& op, VariantSpec<Args> spec,
                                         RegisterOptions options = {},
                                         const char* file = __builtin_FILE(), int line = __builtin_LINE());
  // Registered variants of an op (active ones: overrides shown, shadowed ones not), grouped by
  // backend id, in choice order.
  std::vector<VariantInfo> variants(std::string_view op_name) const;
  bool is_disabled(const VariantInfo& variant) const;
  bool is_forced(const VariantInfo& variant) const;

  // Dispatch: check, find the device, pick the variant (cached per problem), run it.
  template <class Args>
  DispatchResult call(const Op<Args>& op, const Args& args, const ExecContext* ctx = nullptr) {
    return dispatch(op.def(), &args, ctx);
  }
  // Runs one named variant of the op on the tensors' device, bypassing the choice (and
  // OPREG_DISABLE / OPREG_FORCE_VARIANT) but not the op's check, its supports() or the contiguity
  // rule: a refusal is returned, not thrown. For conformance tests and benchmarks. An unknown
  // name, or a variant of another backend than the tensors', is an opreg::Error.
  template <class Args>
  Verdict call_variant(const Op<Args>& op, std::string_view variant, const Args& args,
                       const ExecContext* ctx = nullptr) {
    return call_variant_erased(op.def(), variant, &args, ctx);
  }
  // The variant a call would run (nullptr: it would fall back or fail), with the rejected
  // variants and their reasons in `why`. Does not run anything or touch the cache.
  template <class Args>
  const VariantInfo* choose(const Op<Args>& op, const Args& args, std::string* why = nullptr) const {
    return choose_erased(op.def(), &args, why);
  }

  // Configuration.
  void reload_config();               // re-reads the environment; on error nothing changes
  void set_config(const Config& config);  // validates like reload_config
  Config config() const;
  // Where log lines go (default: stderr). Lines carry no trailing newline.
  void set_log_sink(Function<void(std::string_view)> sink);

  // Plugins (include/opreg/plugin.h): loads the shared library at `path` (a name without '/' is
  // searched as dlopen does) and calls its entry function, which registers backends and variants
  // here, sited at the plugin's path. Safe while other threads dispatch. Any failure is an
  // opreg::Error naming the file and the reason (missing file, no entry function, an API version
  // or struct size this opreg does not know, a name already taken, the plugin's own error), and
  // then nothing of that load stays registered. A plugin is never unloaded; loading one path twice
  // into a registry is an error. default_registry() loads OPREG_PLUGINS when it is built.
  void load_plugin(std::string_view path);
  std::vector<std::string> plugins() const;  // the plugins loaded, as resolved paths, in load order

  // Counters.
  std::uint64_t fallback_count() const;
  std::uint64_t fallback_count(std::string_view op_name, std::string_view backend) const;
  std::uint64_t cache_misses() const;

 private:
  Registration add_variant_erased(detail::ErasedVariant variant, RegisterOptions options,
                                  const char* file, int line);
  DispatchResult dispatch(const detail::OpDef& op, const void* args, const ExecContext* ctx);
  const VariantInfo* choose_erased(const detail::OpDef& op, const void* args, std::string* why) const;
  Verdict call_variant_erased(const detail::OpDef& op, std::string_view variant, const void* args,
                              const ExecContext* ctx);
  template <class Args>
  friend struct detail::TypedOpDef;
  friend struct detail::PluginSession;
  friend struct detail::CoreAccess;
  friend struct detail::ListAccess;
  std::shared_ptr<detail::RegistryCore> core_;
};

// The process-wide registry: built-in backends registered, the plugins of OPREG_PLUGINS loaded,
// configuration read from the environment (an opreg::Error if a variable is bad or a plugin does
// not load; the next call tries again).
Registry& default_registry();
// default_registry().load_plugin(path).
void load_plugin(std::string_view path);

// ---------------------------------------------------------------------------------------------
// Template implementations.

namespace detail {
template <class Args>
struct TypedOpDef final : OpDef {
  OpSpec<Args> spec;

  static void check_thunk(const OpDef& op, const void* args) {
    const auto& self = static_cast<const TypedOpDef&>(op);
    if (self.spec.check != nullptr) {
      self.spec.check(*static_cast<const Args*>(args));
    } else {
      self.spec.check_facts(*static_cast<const Args*>(args));
    }
  }
  static CallFacts check_facts_thunk(const OpDef& op, const void* args) {
    return static_cast<const TypedOpDef&>(op).spec.check_facts(*static_cast<const Args*>(args));
  }
  static void tensors_thunk(const OpDef& op, void* args, TensorList& out) {
    static_cast<const TypedOpDef&>(op).spec.tensors(*static_cast<Args*>(args), out);
  }
  static void key_thunk(const OpDef& op, const void* args, ProblemKey& key) {
    const auto& self = static_cast<const TypedOpDef&>(op);
    if (self.spec.key != nullptr) self.spec.key(*static_cast<const Args*>(args), key);
  }
  static DispatchResult run_on_host_thunk(Registry& registry, const OpDef& op, const void* args,
                                          const ExecContext* ctx) {
    const auto& self = static_cast<const TypedOpDef&>(op);
    Args original = *static_cast<const Args*>(args);  // shares storage with the caller's tensors
    Args host = original;
    TensorList originals;
    TensorList copies;
    self.spec.tensors(original, originals);
    self.spec.tensors(host, copies);
    for (int i = 0; i < copies.size(); ++i) {
      if (copies[i].tensor->defined()) *copies[i].tensor = originals[i].tensor->to(Device{}, registry);
    }
    DispatchResult result = registry.dispatch(op, &host, ctx);
    for (int i = 0; i < copies.size(); ++i) {
      if (copies[i].role != Role::in && copies[i].tensor->defined()) {
        originals[i].tensor->copy_from(*copies[i].tensor, registry);
      }
    }
    result.fell_back = true;
    return result;
  }
};
}  // namespace detail

template <class Args>
Op<Args>::Op(OpSpec<Args> spec) {
  if ((spec.check == nullptr) == (spec.check_facts == nullptr) || spec.tensors == nullptr) {
    throw Error(ErrorKind::internal,
                "op '" + spec.name + "': OpSpec needs a tensors function and one of check and check_facts");
  }
  auto def = std::make_unique<detail::TypedOpDef<Args>>();
  def->name = spec.name;
  {
    Args probe{};
    TensorList list;
    spec.tensors(probe, list);
    const auto* base = reinterpret_cast<const char*>(&probe);
    for (int i = 0; i < list.size(); ++i) {
      const auto* at = reinterpret_cast<const char*>(list[i].tensor);
      if (at < base || at + sizeof(Tensor) > base + sizeof(Args)) {
        throw Error(ErrorKind::internal, "op '" + spec.name + "': OpSpec::tensors lists '" + list[i].name +
                                             "', which is not a member of the argument struct");
      }
      def->fields[static_cast<std::size_t>(i)] = {list[i].name, static_cast<std::uint32_t>(at - base), list[i].role};
    }
    def->field_count = list.size();
  }
  def->spec = std::move(spec);
  def->check = &detail::TypedOpDef<Args>::check_thunk;
  if (def->spec.check_facts != nullptr) def->check_facts = &detail::TypedOpDef<Args>::check_facts_thunk;
  def->tensors = &detail::TypedOpDef<Args>::tensors_thunk;
  def->key = &detail::TypedOpDef<Args>::key_thunk;
  def->run_on_host = &detail::TypedOpDef<Args>::run_on_host_thunk;
  def_ = &detail::define_op(std::move(def));
}

template <class Args>
Registration Registry::add_variant(const Op<Args>& op, VariantSpec<Args> spec, RegisterOptions options,
                                   const char* file, int line) {
  detail::ErasedVariant v;
  v.op = &op.def();
  v.backend = std::move(spec.backend);
  v.impl = std::move(spec.impl);
  v.priority = spec.priority;
  if (spec.supports) {
    v.supports = [f = std::move(spec.supports)](const void* a, const DeviceProps& p) {
      return f(*static_cast<const Args*>(a), p);
    };
  }
  if (!spec.run) {
    throw Error(ErrorKind::invalid_argument,
                "variant " + v.backend + "." + std::string(op.name()) + "." + v.impl + ": no run function");
  }
  using Kernel = Function<void(const Args&, const KernelContext&)>;
  using Pointer = typename Kernel::Pointer;
  if (const Pointer f = spec.run.pointer(); f != nullptr) {
    // A plain function: called straight, without the wrapper's extra indirection.
    v.run = std::make_shared<const Pointer>(f);
    v.invoke = [](const void* run, const void* a, const KernelContext& c, const void*) {
      (*static_cast<const Pointer*>(run))(*static_cast<const Args*>(a), c);
    };
  } else {
    v.run = std::make_shared<const Kernel>(std::move(spec.run));
    v.invoke = [](const void* run, const void* a, const KernelContext& c, const void*) {
      (*static_cast<const Kernel*>(run))(*static_cast<const Args*>(a), c);
    };
  }
  v.tunables = std::move(spec.tunables);
  v.user = spec.user;
  v.strided = spec.strided;
  return add_variant_erased(std::move(v), options, file, line);
}

}  // namespace opreg
