// One op problem end to end: inputs, outputs, run, check. See problem.h.
#include "ops/problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/check.h"
#include "ops/manifest.h"
#include "ops/reference/reference.h"
#include "registry/admission.h"
#include "registry/fail.h"
#include "registry/splitmix.h"
#include "registry/spellings.h"

namespace opreg {
namespace {

using manifest::Field;
using manifest::Kind;
using manifest::When;

[[noreturn]] void unknown_op(std::string_view op) {
  std::string known;
  for (const auto& o : manifest::ops()) known += (known.empty() ? "" : ", ") + std::string(o.name);
  fail(ErrorKind::unsupported, "op '{}' is not defined; defined ops: {}", op, known);
}

const manifest::OpInfo& known_op(std::string_view op) {
  const manifest::OpInfo* info = manifest::find_op(op);
  if (info == nullptr) unknown_op(op);
  return *info;
}

// ---- What a tensor is, from the manifest.

OutputKind output_kind(const Field& f, Direction direction) {
  switch (f.kind) {
    case Kind::param:
    case Kind::table:
    case Kind::index: return OutputKind::dw;  // (no op outputs a table or indices)
    case Kind::stat: return OutputKind::stat;
    case Kind::act:
    case Kind::act2: break;
  }
  return direction == Direction::fwd ? OutputKind::y : OutputKind::dx;  // y, s, c / dx, da, db
}
// Whether the spec leaves this tensor out (an absent weight takes its dweight along, and an
// absent bias its dbias).
bool left_out(const Field& f, const ProblemSpec& s) {
  return (f.when == When::weight && !s.has_weight) || (f.when == When::bias && !s.has_bias) ||
         (f.when == When::positions && s.table != RopeTable::positions);
}

// ---- rope's inputs besides q and k.

// The table row of position (b, t) under position_ids: out of order, every row of T + 3 reachable.
std::int64_t rope_position(std::int64_t b, std::int64_t t, std::int64_t rows) { return (t * 5 + b * 3 + 2) % rows; }

// cos or sin of each entry's own angle: the position (row; a batched table's rows are apart by
// 7 positions) times 10000^(-j / D) for entry j, so that a kernel reading another entry than
// its pair's reads another value. `large`: positions past 2^20.
void fill_rope_table(Tensor& host, bool is_sin, std::int64_t dim, Values values) {
  const std::int64_t width = host.size(host.ndim() - 1);
  const double first = values == Values::large ? std::ldexp(1.0, 20) : 0.0;
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    const std::int64_t row = i / width;
    const std::int64_t j = i % width;
    const double angle = (first + static_cast<double>(row % 1024) + 7.0 * static_cast<double>(row / 1024)) *
                         std::pow(10000.0, -static_cast<double>(j) / static_cast<double>(dim));
    store_from_double(host.data(), host.dtype(), static_cast<std::size_t>(i), is_sin ? std::sin(angle) : std::cos(angle));
  }
}

// HF's transposed q: [B, H, T, D] elements in [B, T, H, D] memory. Copies between the two orders
// (to_storage: from the contiguous [B, H, T, D] tensor into the [B, T, H, D] buffer).
void permute_heads(const Tensor& contiguous, Tensor& storage, bool to_storage) {
  const Shape& s = contiguous.shape();
  const std::int64_t B = s[0], H = s[1], T = s[2], D = s[3];
  const std::size_t row = static_cast<std::size_t>(D) * element_size(contiguous.dtype());
  auto* c = static_cast<char*>(contiguous.data());
  auto* m = static_cast<char*>(storage.data());
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        char* ce = c + static_cast<std::size_t>((b * H + h) * T + t) * row;
        char* me = m + static_cast<std::size_t>((b * T + t) * H + h) * row;
        if (to_storage) {
          std::memcpy(me, ce, row);
        } else {
          std::memcpy(ce, me, row);
        }
      }
    }
  }
}

// ---- Inputs: a seeded stream per tensor (see Values).

// `set` is the length of a normalisation set (a row; group_norm: an (n, group)), for `equal`.
void fill_random(Tensor& host, std::uint64_t seed, int stream, Values values, std::int64_t set) {
  SplitMix rng{seed * 0x2545F4914F6CDD1DULL + static_cast<std::uint64_t>(stream) * 0x9E3779B97F4A7C15ULL};
  // Dyadic values: a set's sum, and its mean, are exact in any float format.
  constexpr double kEqual[] = {0.5, -1.25, 2.0, -0.75, 1.5, -0.375, 1.0, -1.75};
  const bool f16 = host.dtype() == DType::f16;
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    double v = 4.0 * rng.uniform() - 2.0;
    if (std::fabs(v) < 1.0 / 64) v = std::copysign(1.0 / 64, v);
    switch (values) {
      case Values::random:
        break;
      case Values::large:
        v = std::copysign(std::ldexp(1.0 + 3.5 * std::fabs(v), f16 ? 12 : 57), v);  // 2^12..2^15 / 2^57..2^60
        break;
      case Values::equal:
        v = kEqual[static_cast<std::size_t>((set == 0 ? 0 : i / set) % 8)];
        break;
      case Values::special:
        if (i == 0) v = std::numeric_limits<double>::quiet_NaN();
        if (i == set + 1) v = std::numeric_limits<double>::infinity();
        if (i == 2 * set + 2) v = -std::numeric_limits<double>::infinity();
        break;
    }
    store_from_double(host.data(), host.dtype(), static_cast<std::size_t>(i), v);
  }
}

std::string index_str(const Shape& shape, std::int64_t flat) {
  std::string out;
  for (int d = shape.ndim() - 1; d >= 0; --d) {
    const std::int64_t e = shape[d] == 0 ? 1 : shape[d];
    out = fmt::format("{}{}", flat % e, out.empty() ? "" : "," + out);
    flat /= e;
  }
  return out;
}

// ---- The typed part: which op, which reference, which scalars, how backward inputs are made.

// The spec's scalars that the op's struct has fields for.
template <class Args>
void set_scalars(Args& a, const ProblemSpec& s) {
  if constexpr (requires { a.eps; }) a.eps = s.eps;
  if constexpr (requires { a.offset; }) a.offset = s.offset;
  if constexpr (requires { a.casting; }) a.casting = s.casting;
  if constexpr (requires { a.rounding; }) a.rounding = s.rounding;
  if constexpr (requires { a.num_groups; }) a.num_groups = s.groups;
  if constexpr (requires { a.style; }) a.style = s.style;
}

// A backward's statistics come from the reference forward on the same inputs (as a framework
// would pass them).
template <class Args>
constexpr bool takes_statistics() {
  for (const Field& f : manifest::Spec<Args>::fields) {
    if (f.role == Role::in && f.kind == Kind::stat) return true;
  }
  return false;
}
template <class Args>
void prepare(Args& a, const ProblemSpec& s) {
  if constexpr (takes_statistics<Args>()) reference::statistics(a, s.eps);
}

struct Slot {
  const char* name;
  Role role;
  OutputKind kind;
  Tensor* host;
  Tensor* dev;
  const Tensor* restore = nullptr;  // in place: the host input the output's memory starts as
  Tensor storage;                   // rope transposed: the [B, T, H, D] memory `dev` views
};

// A slot's device values as a contiguous host tensor of its shape.
Tensor read_back(const Slot& slot, Registry& registry) {
  if (!slot.storage.defined()) return slot.dev->to(Device{}, registry);
  Tensor memory = slot.storage.to(Device{}, registry);
  Tensor out = Tensor::empty(slot.dev->shape(), slot.dev->dtype(), Device{}, registry);
  permute_heads(out, memory, false);
  return out;
}

class ImplBase {
 public:
  virtual ~ImplBase() = default;
  virtual DispatchResult run(const ExecContext* ctx) = 0;
  virtual Verdict run_variant(std::string_view variant, const ExecContext* ctx) = 0;
  virtual void reference() = 0;
  Registry* reg = nullptr;
  ProblemSpec spec;
  Device device;
  std::vector<Slot> slots;
  bool reference_done = false;
  // bytes_moved of the problem's own arguments (the host copies: the same tensors).
  virtual std::uint64_t bytes() const = 0;
};

template <class E>
class TypedProblem final : public ImplBase {
  using Args = typename E::Args;
  using S = typename E::S;

 public:
  void build(Registry& registry, const ProblemSpec& s, Device d, const InputFill& fill) {
    reg = &registry;
    spec = s;
    device = d;
    set_scalars(host_, s);
    const Shape& shape = s.shape;
    constexpr bool grouped = S::grouped;
    if (shape.ndim() < (grouped ? 2 : 1)) {
      fail(ErrorKind::invalid_argument, "{}: shape [{}] has {} dims; accepted: {}", E::name, shape.str(),
           shape.ndim(), grouped ? "(N, C, spatial...) with at least 2 dims" : "at least 1 dim");
    }
    // The group count first: it sizes the statistics (an absurd one must not allocate).
    if (grouped) op_check::groups(E::name, s.groups, shape[1]);
    const std::int64_t params = grouped ? shape[1] : shape[shape.ndim() - 1];
    // A normalisation set: a row; group_norm's (n, group) is C / groups channels of S positions.
    std::int64_t set = shape[shape.ndim() - 1];
    if (grouped) {
      set = shape[1] / s.groups;
      for (int d = 2; d < shape.ndim(); ++d) set *= shape[d];
    }
    const Shape stats = grouped ? Shape{shape[0], s.groups} : Shape{rows_hidden(shape).rows};
    // rope: q is `shape` [B, H, T, D] (its check names a wrong one), k has kv_heads.
    const bool rope = S::family == manifest::Family::rope && shape.ndim() == 4;
    Shape k_shape = shape;
    Shape table = shape;
    Shape positions = shape;
    if (rope) {
      const std::int64_t B = shape[0], T = shape[2], D = shape[3];
      k_shape = Shape{B, s.kv_heads > 0 ? s.kv_heads : shape[1], T, D};
      switch (s.table) {
        case RopeTable::shared: table = Shape{1, T, D}; break;
        case RopeTable::batched: table = Shape{B, T, D}; break;
        case RopeTable::flat: table = Shape{T, D}; break;
        case RopeTable::half: table = Shape{1, T, D / 2}; break;
        case RopeTable::positions: table = Shape{T + 3, D}; break;
      }
      positions = Shape{B, T};
    }
    auto shape_of = [&](const Field& f) {
      switch (f.kind) {
        case Kind::stat: return stats;
        case Kind::param: return Shape{params};
        case Kind::act2: return k_shape;
        case Kind::table: return table;
        case Kind::index: return positions;
        case Kind::act: break;
      }
      return shape;
    };
    auto dtype_of = [&](const Field& f) {
      switch (f.kind) {
        case Kind::stat: return DType::f32;
        case Kind::param:
        case Kind::table: return s.wdtype;
        case Kind::index: return DType::i64;
        case Kind::act:
        case Kind::act2: break;
      }
      return s.dtype;
    };
    admit_problem(registry, shape_of, dtype_of);
    for (std::size_t i = 0; i < S::fields.size(); ++i) {
      const Field& f = S::fields[i];
      if (left_out(f, s)) continue;
      Tensor& t = host_.*S::members[i];
      t = Tensor::empty(shape_of(f), dtype_of(f), Device{}, registry);
      if (f.role != Role::in || f.kind == Kind::stat) continue;
      if (f.kind == Kind::table && rope) {
        fill_rope_table(t, f.name == "sin", shape[3], s.values);
      } else if (f.kind == Kind::index && rope) {
        auto* v = t.data_as<std::int64_t>();
        for (std::int64_t b = 0; b < shape[0]; ++b) {
          for (std::int64_t j = 0; j < shape[2]; ++j) v[b * shape[2] + j] = rope_position(b, j, table[0]);
        }
      } else if (fill) {
        for (std::int64_t j = 0; j < t.numel(); ++j) {
          store_from_double(t.data(), t.dtype(), static_cast<std::size_t>(j), fill(f.name, j));
        }
      } else {
        fill_random(t, s.seed, static_cast<int>(i), f.kind == Kind::param ? Values::random : s.values, set);
      }
    }
    prepare(host_, s);
    dev_ = host_;
    for (std::size_t i = 0; i < S::fields.size(); ++i) {
      const Field& f = S::fields[i];
      const Tensor& h = host_.*S::members[i];
      if (!h.defined()) continue;  // left out
      Tensor& t = dev_.*S::members[i];
      Tensor storage;
      if (rope && s.transposed && (f.kind == Kind::act || f.kind == Kind::act2)) {
        // HF's q.view(B, T, H, D).transpose(1, 2): the memory is [B, T, H, D].
        const Shape& hs = h.shape();
        storage = Tensor::empty(Shape{hs[0], hs[2], hs[1], hs[3]}, h.dtype(), d, registry);
        if (f.role == Role::in) {
          Tensor memory = Tensor::empty(storage.shape(), h.dtype(), Device{}, registry);
          permute_heads(h, memory, true);
          storage.copy_from(memory, registry);
        }
        const std::array<std::int64_t, 4> strides{hs[2] * hs[1] * hs[3], hs[3], hs[1] * hs[3], 1};
        t = Tensor::wrap(storage.data(), hs, h.dtype(), d, strides);
      } else {
        // Always a copy, also on the cpu: the run must not be able to touch the reference's inputs.
        t = Tensor::empty(h.shape(), h.dtype(), d, registry);
        if (f.role == Role::in) t.copy_from(h, registry);
      }
      slots.push_back({f.name.data(), f.role, output_kind(f, E::direction), &(host_.*S::members[i]), &t, nullptr,
                       storage});
    }
    if (s.in_place) {
      bool any = false;
      for (std::size_t i = 0; i < S::fields.size(); ++i) {
        const int partner = S::fields[i].partner;
        if (partner < 0) continue;
        any = true;
        const auto from = static_cast<std::size_t>(partner);
        dev_.*S::members[i] = dev_.*S::members[from];
        Tensor storage;
        for (auto& in : slots) {
          if (in.name == S::fields[from].name) storage = in.storage;
        }
        for (auto& out : slots) {
          if (out.name != S::fields[i].name) continue;
          out.restore = &(host_.*S::members[from]);
          out.storage = storage;
        }
      }
      if (!any) fail(ErrorKind::invalid_argument, "in-place runs apply to the ops with an in-place form (the backward ops, rope)");
    }
    E::op().def().check(E::op().def(), &dev_);
  }

  std::uint64_t bytes() const override { return bytes_moved(host_); }

  DispatchResult run(const ExecContext* ctx) override { return reg->call(E::op(), dev_, ctx); }

  // Everything the problem will hold, summed before any of it is allocated: every tensor on the
  // host (the reference's inputs and outputs), again on the device (on the cpu, or a device whose
  // memory is the host's, that is the host too), and the outputs copied back for the check. More than the host or the device has is an
  // error naming both numbers.
  template <class ShapeOf, class DTypeOf>
  void admit_problem(Registry& registry, ShapeOf shape_of, DTypeOf dtype_of) const {
    std::uint64_t all = 0;
    std::uint64_t outputs = 0;
    bool overflow = false;
    for (const Field& f : S::fields) {
      if (left_out(f, spec)) continue;
      std::uint64_t bytes = 0;
      overflow |= __builtin_mul_overflow(static_cast<std::uint64_t>(shape_of(f).numel()), element_size(dtype_of(f)),
                                         &bytes);
      overflow |= __builtin_add_overflow(all, bytes, &all);
      if (f.role != Role::in) outputs += bytes;
    }
    // On the host: the reference's tensors, and the outputs copied back for the check (on the cpu
    // those are the device's own). A device whose memory is the host's also holds its copies
    // there, so they count with the host's.
    const bool on_cpu = device.backend == kCpuBackendId;
    const bool host_memory = on_cpu || registry.device_props(device).host_memory;
    std::uint64_t host = 0;
    overflow |= __builtin_add_overflow(all, on_cpu ? all : outputs, &host);
    if (host_memory && !on_cpu) overflow |= __builtin_add_overflow(host, all, &host);
    const std::string what = fmt::format("{} of [{}] (inputs, outputs and the reference's copies)", E::name,
                                         spec.shape.str());
    if (overflow) fail(ErrorKind::device, "{} needs more than 2^64 bytes", what);
    admit(registry.backend(kCpuBackendId), 0, registry.device_props(Device{}).memory_bytes, host, "the host", what);
    if (!on_cpu) {
      admit(registry.backend(device.backend), device.index, registry.device_props(device).memory_bytes, all,
            registry.device_name(device), what);
    }
  }
  Verdict run_variant(std::string_view variant, const ExecContext* ctx) override {
    return reg->call_variant(E::op(), variant, dev_, ctx);
  }
  void reference() override { reference::kernel<E::id>::run(host_); }

 private:
  Args host_{};
  Args dev_{};
};

// The one problem factory: the op of `spec.op`, by the manifest.
std::unique_ptr<ImplBase> make(Registry& registry, const ProblemSpec& spec, Device device, const InputFill& fill) {
  std::unique_ptr<ImplBase> made;
  manifest::for_each_op([&](auto entry) {
    using E = decltype(entry);
    if (made != nullptr || spec.op != E::name) return;
    auto p = std::make_unique<TypedProblem<E>>();
    p->build(registry, spec, device, fill);
    made = std::move(p);
  });
  if (made == nullptr) unknown_op(spec.op);
  return made;
}

}  // namespace

namespace {
constexpr auto kOutputKindNames = spellings<OutputKind>("y", "dx", "dw", "stat");
constexpr auto kValuesNames = spellings<Values>("random", "large", "equal", "special");
constexpr auto kRopeTableNames = spellings<RopeTable>("shared", "batched", "flat", "half", "positions");
}  // namespace

std::string_view to_string(RopeTable table) { return kRopeTableNames(table); }

RopeTable parse_rope_table(std::string_view text) {
  if (const auto t = kRopeTableNames.parse(text)) return *t;
  fail(ErrorKind::invalid_argument, "rope table '{}' is not accepted; accepted: {}", text, kRopeTableNames.accepted());
}

std::string_view to_string(OutputKind kind) { return kOutputKindNames(kind); }

std::string_view to_string(Values values) { return kValuesNames(values); }

Values parse_values(std::string_view text) {
  if (const auto v = kValuesNames.parse(text)) return *v;
  fail(ErrorKind::invalid_argument, "input values '{}' are not accepted; accepted: {}", text, kValuesNames.accepted());
}

Tolerance tolerance(OutputKind kind, DType dtype) {
  // Statistics are f32 whatever the input; the rest scale with the output's precision (f16 has
  // 11 significant bits, bf16 8). Backward outputs sum more terms, so they get twice the room.
  if (kind == OutputKind::stat) return {1e-5, 1e-4};
  const int widen = kind == OutputKind::y ? 1 : 2;
  switch (dtype) {
    case DType::f16: return {(kind == OutputKind::dw ? 5e-3 : 2e-3) * widen, 4e-3 * widen};
    case DType::bf16: return {(kind == OutputKind::dw ? 2.5e-2 : 1e-2) * widen, 1.6e-2 * widen};
    default: return {1e-5 * (kind == OutputKind::y ? 1 : 10), 1e-5 * (kind == OutputKind::y ? 1 : 10)};
  }
}

std::string CheckReport::summary() const {
  std::string out;
  for (const auto& o : outputs) out += fmt::format("{}{} err={:.3g}", out.empty() ? "" : " ", o.name, o.err);
  for (const auto& o : outputs) {
    if (o.err <= 1.0 || o.worst < 0) continue;
    out += fmt::format("; {}[{}] got={} want={} (atol={} rtol={})", o.name, o.at, o.got, o.want, o.tol.atol,
                       o.tol.rtol);
  }
  return out;
}

ProblemOptions problem_options(std::string_view op) {
  const manifest::OpInfo& info = known_op(op);
  ProblemOptions o;
  // What any direction of the op's base has: a backward problem's eps makes its statistics, and
  // its weight dtype is its forward's.
  manifest::for_each_op([&](auto entry) {
    using E = decltype(entry);
    using Args = typename E::Args;
    if (E::base != info.base) return;
    for (const Field& f : E::S::fields) {
      o.wdtype |= f.kind == Kind::param || f.kind == Kind::table;
      o.weight |= f.when == When::weight;
      o.bias |= f.when == When::bias;
      if (E::name == op) o.in_place |= f.partner >= 0;
    }
    const Args defaults{};
    if constexpr (requires { defaults.eps; }) {
      o.eps = true;
      o.eps_default = defaults.eps;
    }
    if constexpr (requires { defaults.offset; }) o.offset = true;
    if constexpr (requires { defaults.casting; }) o.casting = true;
    if constexpr (requires { defaults.rounding; }) o.rounding = true;
    if constexpr (requires { defaults.num_groups; }) o.groups = true;
    if constexpr (requires { defaults.style; }) o.rope = true;
  });
  return o;
}

std::vector<std::string> problem_ops() {
  std::vector<std::string> out;
  for (const auto& op : manifest::ops()) out.emplace_back(op.name);
  return out;
}

std::string ProblemSpec::cli_args(const std::string& device) const {
  const ProblemOptions o = problem_options(op);
  std::string out = fmt::format("{} --device {} --dtype {}", op, device, to_string(dtype));
  const bool params = (o.weight && has_weight) || (o.bias && has_bias) || o.rope;
  if (o.wdtype && params) out += fmt::format(" --wdtype {}", wdtype == dtype ? "same" : to_string(wdtype));
  if (o.weight && !has_weight) out += " --no-weight";
  if (o.bias && !has_bias) out += " --no-bias";
  out += fmt::format(" --shape {}", shape.str());
  if (o.groups) out += fmt::format(" --groups {}", groups);
  if (o.eps) out += fmt::format(" --eps {}", eps);
  if (o.offset) out += fmt::format(" --offset {}", offset);
  if (o.casting) out += fmt::format(" --casting {}", to_string(casting));
  if (o.rounding && rounding != Rounding::once) out += fmt::format(" --rounding {}", to_string(rounding));
  if (o.rope) {
    if (kv_heads > 0) out += fmt::format(" --kv-heads {}", kv_heads);
    out += fmt::format(" --style {} --table {}", to_string(style), to_string(table));
    if (transposed) out += " --transposed";
  }
  if (o.in_place && in_place) out += " --inplace";
  if (values != Values::random) out += fmt::format(" --values {}", to_string(values));
  if (tol_scale != 1.0) out += fmt::format(" --tol-scale {}", tol_scale);
  out += fmt::format(" --seed {}", seed);
  return out;
}

struct Problem::Impl {
  std::unique_ptr<ImplBase> typed;
};

Problem::Problem(Registry& registry, const ProblemSpec& spec, Device device, const InputFill& fill)
    : impl_(std::make_unique<Impl>(Impl{make(registry, spec, device, fill)})) {}

Problem::~Problem() = default;

const ProblemSpec& Problem::spec() const { return impl_->typed->spec; }
Device Problem::device() const { return impl_->typed->device; }

void Problem::poison() {
  ImplBase& p = *impl_->typed;
  for (auto& slot : p.slots) {
    if (slot.role == Role::in) continue;
    if (slot.storage.defined()) {  // rope transposed: the memory behind the view
      if (slot.restore != nullptr) {
        Tensor memory = Tensor::empty(slot.storage.shape(), slot.storage.dtype(), Device{}, *p.reg);
        permute_heads(*slot.restore, memory, true);
        slot.storage.copy_from(memory, *p.reg);
      } else {
        Tensor(slot.storage).fill(std::numeric_limits<double>::quiet_NaN(), *p.reg);
      }
    } else if (slot.restore != nullptr) {
      slot.dev->copy_from(*slot.restore, *p.reg);  // in place: the output starts as its input
    } else {
      slot.dev->fill(std::numeric_limits<double>::quiet_NaN(), *p.reg);
    }
  }
}

DispatchResult Problem::run(const ExecContext* ctx) { return impl_->typed->run(ctx); }

Verdict Problem::run_variant(std::string_view variant, const ExecContext* ctx) {
  return impl_->typed->run_variant(variant, ctx);
}

void Problem::synchronize(const ExecContext* ctx) {
  ImplBase& p = *impl_->typed;
  void* stream = ctx != nullptr ? ctx->stream : nullptr;
  p.reg->backend(p.device.backend).synchronize(p.device.index, stream);
}

std::vector<ProblemOutput> Problem::outputs() {
  ImplBase& p = *impl_->typed;
  synchronize();
  std::vector<ProblemOutput> out;
  for (const auto& slot : p.slots) {
    if (slot.role != Role::in) out.push_back({slot.name, read_back(slot, *p.reg)});
  }
  return out;
}

CheckReport Problem::check() {
  ImplBase& p = *impl_->typed;
  synchronize();
  if (!p.reference_done) {
    p.reference();
    p.reference_done = true;
  }
  CheckReport report;
  for (const auto& slot : p.slots) {
    if (slot.role == Role::in) continue;
    OutputCheck o;
    o.name = slot.name;
    o.kind = slot.kind;
    o.dtype = slot.dev->dtype();
    o.tol = tolerance(o.kind, p.spec.dtype);
    o.tol.atol *= p.spec.tol_scale;
    o.tol.rtol *= p.spec.tol_scale;
    const Tolerance tol = o.tol;
    const Tensor got = read_back(slot, *p.reg);
    const Tensor& want = *slot.host;
    for (std::int64_t i = 0; i < got.numel(); ++i) {
      const double g = load_as_double(got.data(), got.dtype(), static_cast<std::size_t>(i));
      const double w = load_as_double(want.data(), want.dtype(), static_cast<std::size_t>(i));
      // Equal values (also equal infinities) are exact, and so is NaN where the reference is NaN
      // (NaN in, NaN out); any other NaN is unwritten (the poison) or broken, and an infinity
      // where the reference is finite (or the other infinity) is as far off as it gets.
      double err = g == w || (std::isnan(g) && std::isnan(w)) ? 0.0
                                                             : std::fabs(g - w) / (tol.atol + tol.rtol * std::fabs(w));
      if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
      if (o.worst < 0 || err > o.err) {
        o.err = err;
        o.worst = i;
        o.got = g;
        o.want = w;
      }
    }
    if (o.worst >= 0) o.at = index_str(got.shape(), o.worst);
    report.err = std::max(report.err, o.err);
    report.outputs.push_back(std::move(o));
  }
  return report;
}

std::uint64_t Problem::bytes() const { return impl_->typed->bytes(); }

}  // namespace opreg
