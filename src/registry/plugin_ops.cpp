// C kernels of plugins as ordinary variants: each op's arguments converted to their C mirror
// (include/opreg/plugin.h), tensors as non-owning DLTensor views (opreg::dlpack_view).
#include "registry/plugin_ops.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>

#include "opreg/dlpack.h"
#include "ops/manifest.h"
#include "opreg/ops.h"
#include "registry/fail.h"
#include "registry/quote.h"

namespace opreg::detail {

CDeviceProps::CDeviceProps(const DeviceProps& props) {
  for (const auto& [key, value] : props.extra) {
    keys_.push_back(key.c_str());
    values_.push_back(value.c_str());
  }
  c_.struct_size = sizeof(c_);
  c_.api_version = OPREG_PLUGIN_API_VERSION;
  c_.name = props.name.c_str();
  c_.memory_bytes = props.memory_bytes;
  c_.compute_units = props.compute_units;
  c_.emulated = props.emulated ? 1 : 0;
  c_.reserved[OPREG_DEVICE_HOST_MEMORY] = props.host_memory ? reinterpret_cast<void*>(1) : nullptr;
  c_.extra_count = static_cast<std::uint32_t>(keys_.size());
  c_.extra_keys = keys_.data();
  c_.extra_values = values_.data();
}

ErrorKind error_kind(std::int32_t status) {
  switch (status) {
    case OPREG_INVALID_ARGUMENT: return ErrorKind::invalid_argument;
    case OPREG_UNSUPPORTED: return ErrorKind::unsupported;
    case OPREG_DEVICE_ERROR: return ErrorKind::device;
    default: return ErrorKind::internal;
  }
}

std::int32_t status_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_argument: return OPREG_INVALID_ARGUMENT;
    case ErrorKind::unsupported: return OPREG_UNSUPPORTED;
    case ErrorKind::device: return OPREG_DEVICE_ERROR;
    case ErrorKind::internal: return OPREG_INTERNAL_ERROR;
  }
  return OPREG_INTERNAL_ERROR;
}

namespace {

constexpr std::size_t kMessageSize = 512;

// What a C variant's run and supports call.
struct CKernel {
  const Registry* registry = nullptr;
  std::string plugin;
  std::uint32_t api_version = OPREG_PLUGIN_API_VERSION;  // the variant's: the argument structs it knows
  void* user = nullptr;
  std::int32_t (*supports)(void*, const void*, const opreg_device_props*, char*, std::size_t) = nullptr;
  std::int32_t (*run)(void*, const void*, const opreg_kernel_context*, char*, std::size_t) = nullptr;
};

// A message a plugin wrote: cut at the buffer's end, on one line.
std::string plugin_text(std::array<char, kMessageSize>& buffer, std::string_view otherwise) {
  buffer.back() = '\0';
  const std::string_view text(buffer.data());
  return text.empty() ? std::string(otherwise) : escape(text);
}

// The tensors of one call as DLTensor views, on the stack.
class Views {
 public:
  explicit Views(const Registry& registry) : registry_(registry) {}
  const DLTensor* operator()(const Tensor& t) {
    if (!t.defined()) return nullptr;
    views_[static_cast<std::size_t>(n_)] = dlpack_view(t, registry_);
    return &views_[static_cast<std::size_t>(n_++)];
  }

 private:
  const Registry& registry_;
  std::array<DLTensor, manifest::kMaxTensors> views_;
  int n_ = 0;
};

std::int32_t casting_of(Casting c) {
  switch (c) {
    case Casting::llama: return OPREG_CASTING_LLAMA;
    case Casting::gemma: return OPREG_CASTING_GEMMA;
    case Casting::none: return OPREG_CASTING_NONE;
  }
  return OPREG_CASTING_LLAMA;
}

std::int32_t rounding_of(Rounding r) { return r == Rounding::torch ? OPREG_ROUNDING_TORCH : OPREG_ROUNDING_ONCE; }
std::int32_t style_of(RopeStyle s) { return s == RopeStyle::interleaved ? OPREG_ROPE_INTERLEAVED : OPREG_ROPE_HALF; }

// ---- One conversion per argument struct, expanded from the manifest member by member, as
// plugin.h's C mirrors are.

#define OPREG_CONVERT_TENSOR_(name, role, kind, when, partner) c.name = v(a.name);
#define OPREG_CONVERT_f64_(name) c.name = a.name;
#define OPREG_CONVERT_i64_(name) c.name = a.name;
#define OPREG_CONVERT_casting_(name) c.name = casting_of(a.name);
#define OPREG_CONVERT_rounding_(name) c.name = rounding_of(a.name);
#define OPREG_CONVERT_rope_style_(name) c.name = style_of(a.name);
#define OPREG_CONVERT_pad32_(name)
#define OPREG_CONVERT_SCALAR_(type, name, value, key) OPREG_CONVERT_##type##_(name)
#define OPREG_CONVERT_(Name, c_name, family, FIELDS)        \
  void convert(const Name& a, c_name& c, Views& v) {       \
    FIELDS(OPREG_CONVERT_TENSOR_, OPREG_CONVERT_SCALAR_)   \
  }
OPREG_ARG_STRUCTS(OPREG_CONVERT_)
#undef OPREG_CONVERT_
#undef OPREG_CONVERT_SCALAR_
#undef OPREG_CONVERT_pad32_
#undef OPREG_CONVERT_casting_
#undef OPREG_CONVERT_rounding_
#undef OPREG_CONVERT_rope_style_
#undef OPREG_CONVERT_i64_
#undef OPREG_CONVERT_f64_
#undef OPREG_CONVERT_TENSOR_

// A struct's members added after API version 1 (plugin.h's OPREG_C_ARGS_GROWTH): from `since`
// on, the struct ends with them, from byte `old_size` on; before, it ended there.
template <class CArgs>
struct Growth {
  static constexpr std::uint32_t since = 0;  // 0: the struct never grew
  static constexpr std::size_t old_size = sizeof(CArgs);
  static constexpr const char* first = "";
};
#define OPREG_GROWTH_(c_name, member, version)                          \
  template <>                                                           \
  struct Growth<c_name> {                                               \
    static constexpr std::uint32_t since = version;                     \
    static constexpr std::size_t old_size = offsetof(c_name, member);   \
    static constexpr const char* first = #member;                       \
  };
OPREG_C_ARGS_GROWTH(OPREG_GROWTH_)
#undef OPREG_GROWTH_

template <class CArgs>
constexpr bool older_than_struct(std::uint32_t version) {
  return Growth<CArgs>::since != 0 && version < Growth<CArgs>::since;
}

// The C struct of `args` as a variant of plugin API `version` knows it: a struct that grew since
// is handed at its old size and version (its newer members are filled but outside struct_size).
template <class CArgs, class Args>
CArgs c_args(const Args& args, Views& views, std::uint32_t version) {
  CArgs c;
  std::memset(&c, 0, sizeof c);  // padding included: newer_members_used compares bytes
  const bool old = older_than_struct<CArgs>(version);
  c.struct_size = static_cast<std::uint32_t>(old ? Growth<CArgs>::old_size : sizeof(CArgs));
  c.api_version = std::min(version, OPREG_PLUGIN_API_VERSION);
  convert(args, c, views);
  return c;
}

// Whether `c` sets a member its variant's version does not have to other than its default (what
// the C++ struct's default initializers convert to): such a problem is not the variant's to take.
template <class CArgs, class Args>
bool newer_members_used(const CArgs& c, Views& views, std::uint32_t version) {
  if (!older_than_struct<CArgs>(version)) return false;
  const CArgs defaults = c_args<CArgs>(Args{}, views, OPREG_PLUGIN_API_VERSION);  // no tensor: no view
  constexpr std::size_t from = Growth<CArgs>::old_size;
  return std::memcmp(reinterpret_cast<const char*>(&c) + from, reinterpret_cast<const char*>(&defaults) + from,
                     sizeof(CArgs) - from) != 0;
}

template <class CArgs>
std::string older_struct_reason(std::string_view c_name, std::uint32_t version) {
  return fmt::format("written against plugin API version {}, whose {} has no {} (added in API version {}): it "
                     "takes problems with that member's default only",
                     version, c_name, Growth<CArgs>::first, Growth<CArgs>::since);
}

// The kernel's scratch leases, given back when the call returns.
struct Scratch {
  const KernelContext* kc = nullptr;
  std::array<Workspace::Lease, 4> leases;
  int used = 0;
};

void* workspace(const opreg_kernel_context* ctx, std::size_t bytes) {
  auto* scratch = static_cast<Scratch*>(ctx->host);
  if (scratch->used == static_cast<int>(scratch->leases.size())) return nullptr;
  try {
    auto& lease = scratch->leases[static_cast<std::size_t>(scratch->used)];
    lease = acquire_scratch(*scratch->kc, bytes);
    ++scratch->used;
    return lease.data();
  } catch (...) {
    return nullptr;  // the C side sees NULL, as the interface says
  }
}

template <class Args, class CArgs>
struct Mirror {
  using Spec = manifest::Spec<Args>;

  static void invoke(const void* kernel, const void* args, const KernelContext& kc, const void* /*plan*/) {
    const auto& k = *static_cast<const CKernel*>(kernel);
    Views views(*kc.registry);
    const CArgs c = c_args<CArgs>(*static_cast<const Args*>(args), views, k.api_version);
    // supports() refused it (and a plugin's refusal is never forced past): the last line.
    if (newer_members_used<CArgs, Args>(c, views, k.api_version)) {
      throw Error(ErrorKind::unsupported, fmt::format("{}: {} (plugin {})", kc.variant->name,
                                                      older_struct_reason<CArgs>(Spec::c_name, k.api_version),
                                                      quote(k.plugin)));
    }
    const opreg_device_props* props = plugin_device_props(*kc.backend, kc.device.index);
    std::optional<CDeviceProps> converted;
    if (props == nullptr) props = converted.emplace(*kc.props).get();
    Scratch scratch;
    scratch.kc = &kc;
    opreg_kernel_context ctx{};
    ctx.struct_size = sizeof(ctx);
    ctx.api_version = OPREG_PLUGIN_API_VERSION;
    ctx.device = kc.device.index;
    ctx.threads = kc.threads;
    ctx.stream = kc.stream;
    ctx.props = props;
    ctx.variant = kc.variant->name.c_str();
    ctx.host = &scratch;
    ctx.workspace = &workspace;
    std::array<char, kMessageSize> message{};
    const std::int32_t status = k.run(k.user, &c, &ctx, message.data(), message.size());
    if (status != OPREG_OK) {
      throw Error(error_kind(status), fmt::format("{}: {} (plugin {})", kc.variant->name,
                                                  plugin_text(message, "the kernel failed without a message"),
                                                  quote(k.plugin)));
    }
  }

  // Also the supports() of a variant that has none when its struct grew since its version.
  static Verdict supports(const CKernel& k, const void* args, const DeviceProps& props) {
    Views views(*k.registry);
    const CArgs c = c_args<CArgs>(*static_cast<const Args*>(args), views, k.api_version);
    if (newer_members_used<CArgs, Args>(c, views, k.api_version)) {
      return Verdict::reject(older_struct_reason<CArgs>(Spec::c_name, k.api_version));
    }
    if (k.supports == nullptr) return Verdict::accept();
    const CDeviceProps c_props(props);
    std::array<char, kMessageSize> reason{};
    if (k.supports(k.user, &c, c_props.get(), reason.data(), reason.size()) != 0) return Verdict::accept();
    return Verdict::reject(plugin_text(reason, "refused without a reason"));
  }
};

struct MirrorEntry {
  const char* op;
  const OpDef& (*def)();
  void (*invoke)(const void*, const void*, const KernelContext&, const void*);
  Verdict (*supports)(const CKernel&, const void*, const DeviceProps&);
  bool (*older_struct)(std::uint32_t version);  // the op's struct grew after `version`
};

template <class Args, class CArgs, const Op<Args>& (*OpHandle)()>
constexpr MirrorEntry mirror(const char* name) {
  return {name, [] () -> const OpDef& { return OpHandle().def(); }, &Mirror<Args, CArgs>::invoke,
          &Mirror<Args, CArgs>::supports, &older_than_struct<CArgs>};
}

// Every op of the manifest, with its C struct.
constexpr MirrorEntry kMirrors[] = {
#define OPREG_MIRROR_(ident, base, direction, Args, c_args) mirror<Args, c_args, &ident##_op>(#base "." #direction),
    OPREG_OPS(OPREG_MIRROR_)
#undef OPREG_MIRROR_
};
static_assert(std::size(kMirrors) == static_cast<std::size_t>(manifest::kOpCount));

}  // namespace

std::vector<std::string> c_ops() {
  std::vector<std::string> out;
  for (const auto& m : kMirrors) out.emplace_back(m.op);
  return out;
}

ErasedVariant c_variant(const Registry& registry, const opreg_variant_desc& desc, const std::string& plugin) {
  const MirrorEntry* m = nullptr;
  for (const auto& entry : kMirrors) {
    if (std::string_view(entry.op) == desc.op) m = &entry;
  }
  if (m == nullptr) {
    fail(ErrorKind::invalid_argument, "variant {}: op {} has no C argument struct in plugin API version {}; a plugin "
         "can implement {}", quote(fmt::format("{}.{}.{}", desc.backend, desc.op, desc.impl)), quote(desc.op),
         OPREG_PLUGIN_API_VERSION, fmt::join(c_ops(), ", "));
  }
  auto kernel = std::make_shared<CKernel>();
  kernel->registry = &registry;
  kernel->plugin = plugin;
  kernel->api_version = desc.api_version;
  kernel->user = desc.user;
  kernel->supports = desc.supports;
  kernel->run = desc.run;
  ErasedVariant v;
  v.op = &m->def();
  v.backend = desc.backend;
  v.impl = desc.impl;
  v.priority = desc.priority;
  // A variant of an older API version whose struct grew since refuses what it cannot be told.
  if (desc.supports != nullptr || m->older_struct(desc.api_version)) {
    v.supports = [kernel, check = m->supports](const void* args, const DeviceProps& props) {
      return check(*kernel, args, props);
    };
  }
  v.run = kernel;
  v.invoke = m->invoke;
  for (std::uint32_t i = 0; i < desc.tunable_count; ++i) {
    v.tunables.push_back({desc.tunable_names[i], desc.tunable_values[i]});
  }
  v.user = desc.user;
  v.strided = desc.strided != 0;
  v.plugin = plugin;
  v.forcing = Forcing::refusal_is_error;  // a plugin is never handed a problem it refused
  return v;
}

}  // namespace opreg::detail
