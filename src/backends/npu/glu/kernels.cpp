// geglu and swiglu, forward and backward, on the npu: c = act(a) * b; da = dc * b * act'(a),
// db = dc * act(a), with act gelu_tanh (geglu) or silu (swiglu).
//
// One body for every variant: a tile of a, b (and dc) comes in with DataCopyPad through depth-1
// or depth-2 queues, is computed in float and rounded once on its way out; with rounding torch (a
// 16-bit X only), where Liger-Kernel rounds to X too: act(a) before it multiplies (c, geglu's db),
// and geglu's dc * b before it meets act'(a) (swiglu's backward keeps Liger's f32 products). The variants differ
// only in which GM span each tile is (plan.h): flat tiles grid-strided over the cores,
// BLOCK_SIZE_SUB chunks of a core's rows, or one whole row per block (gpu_port).
//
// Both gates go through one sigmoid: gelu_tanh(a) = a (1 + tanh u) / 2 = a * sigmoid(2u) with
// u = sqrt(2/pi) (a + 0.044715 a^3), silu(a) = a * sigmoid(a). The complement 1 - sigmoid(z) is
// sigmoid(-z), computed as its own reciprocal rather than by a subtraction that cancels, so the
// derivatives keep their relative accuracy where the sigmoid saturates:
//   silu'(a)  = s (1 + a (1 - s))
//   gelu'(a)  = s + 2 a s (1 - s) k (1 + 3 c a^2)     (s = sigmoid(2u), k = sqrt(2/pi), c = 0.044715)
// An overflowing a^3 makes u infinite and s exactly 0 or 1, as the double reference's tanh does;
// a^2 in the polynomial is capped at 1e30 where s (1 - s) is already 0, so that 0 * inf makes no
// NaN the reference lacks, while an infinite a still gives the reference's NaN.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "backends/npu/glu/plan.h"
#include "backends/npu/gpu_port.h"
#include "backends/npu/kernel_util.h"
#include "backends/npu/npu_backend.h"

namespace opreg::npu::glu {
namespace {

// ascend-c: begin
// The building blocks (kernel_util.h) and, through them, Ascend C's names.
using namespace kernel;

constexpr float kK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kC = 0.044715f;
constexpr float kSquareCap = 1e30f;

// ---- the tiles of a block: which GM span each one is

struct Span {
  int64_t at = 0;   // first element
  int64_t len = 0;  // elements
};

class Walk {
 public:
  Walk(const GluPlan& p, int64_t block) : p_(p), block_(block) {
    if (p.impl == Impl::sub_block) {
      Tiles rows;  // the planner's contiguous row ranges
      rows.partition = Partition::contiguous;
      rows.rows = p.rows;
      rows.block_dim = p.block_dim;
      range_ = rows_of_block(rows, block);
    }
  }

  int64_t count() const {
    switch (p_.impl) {
      case Impl::flat:
        return block_ < p_.tiles ? (p_.tiles - block_ + p_.block_dim - 1) / p_.block_dim : 0;
      case Impl::sub_block:
        return range_.count * p_.tiles;
      case Impl::gpu_port:
        return 1;
    }
    return 0;
  }

  Span span(int64_t i) const {
    switch (p_.impl) {
      case Impl::flat: {
        const int64_t at = (block_ + i * p_.block_dim) * p_.tile;
        return {at, Std::min(p_.tile, p_.n - at)};
      }
      case Impl::sub_block: {
        // A row's chunks one after another: the core walks its range of GM forwards.
        const int64_t row = range_.first + i / p_.tiles;
        const int64_t col = (i % p_.tiles) * p_.tile;
        return {row * p_.cols + col, Std::min(p_.tile, p_.cols - col)};
      }
      case Impl::gpu_port:
        return {block_ * p_.cols, p_.cols};
    }
    return {};
  }

 private:
  const GluPlan& p_;
  int64_t block_;
  RowRange range_;
};

// A span into a tile: `line`-element blocks of one DataCopyPad (contiguous in GM and, each a
// multiple of 32 bytes, in UB), then the rest as one more block.
template <class X>
void CopyTileIn(const LocalTensor<X>& dst, const GlobalTensor<X>& src, Span s, int64_t line) {
  const int64_t full = s.len > line ? s.len / line : 0;
  const int64_t rest = s.len - full * line;
  if (full > 0) CopyRowsIn(dst, src[static_cast<uint64_t>(s.at)], full, line, line);
  if (rest > 0)
    CopyRowsIn(dst[static_cast<uint32_t>(full * line)], src[static_cast<uint64_t>(s.at + full * line)], 1,
               rest, rest);
}

template <class X>
void CopyTileOut(const GlobalTensor<X>& dst, const LocalTensor<X>& src, Span s, int64_t line) {
  const int64_t full = s.len > line ? s.len / line : 0;
  const int64_t rest = s.len - full * line;
  if (full > 0) CopyRowsOut(dst[static_cast<uint64_t>(s.at)], src, full, line, line);
  if (rest > 0)
    CopyRowsOut(dst[static_cast<uint64_t>(s.at + full * line)], src[static_cast<uint32_t>(full * line)], 1,
                rest, rest);
}

// ---- the gates, on float tiles of n elements

// The sigmoid's argument z: a itself for silu; 2u for gelu_tanh, computed into `tmp`.
template <Act A>
LocalTensor<float> GateArg(const LocalTensor<float>& tmp, const LocalTensor<float>& a, uint32_t n) {
  if constexpr (A == Act::silu) {
    static_cast<void>(tmp);
    return a;
  } else {
    PipeBarrier<PIPE_V>();
    Mul(tmp, a, a, n);
    PipeBarrier<PIPE_V>();
    Mul(tmp, tmp, a, n);
    PipeBarrier<PIPE_V>();
    Muls(tmp, tmp, kC, n);
    PipeBarrier<PIPE_V>();
    Add(tmp, tmp, a, n);
    PipeBarrier<PIPE_V>();
    Muls(tmp, tmp, 2.0f * kK, n);
    return tmp;
  }
}

// dst = sigmoid(z) = 1 / (1 + e^-z), or with complement, 1 - sigmoid(z) = 1 / (1 + e^z). dst may be z.
inline void Sigmoid(const LocalTensor<float>& dst, const LocalTensor<float>& z, uint32_t n, bool complement) {
  if (complement) {
    PipeBarrier<PIPE_V>();
    Exp(dst, z, n);
  } else {
    PipeBarrier<PIPE_V>();
    Muls(dst, z, -1.0f, n);
    PipeBarrier<PIPE_V>();
    Exp(dst, dst, n);
  }
  PipeBarrier<PIPE_V>();
  Adds(dst, dst, 1.0f, n);
  PipeBarrier<PIPE_V>();
  Reciprocal(dst, dst, n);
}

// t = act'(a) from t = 1 - s and s; `scratch` is a float tile free until the gate's value.
template <Act A>
void Slope(const LocalTensor<float>& t, const LocalTensor<float>& a, const LocalTensor<float>& s,
           const LocalTensor<float>& scratch, uint32_t n) {
  if constexpr (A == Act::silu) {
    static_cast<void>(scratch);
    PipeBarrier<PIPE_V>();
    Mul(t, t, a, n);
    PipeBarrier<PIPE_V>();
    Adds(t, t, 1.0f, n);
    PipeBarrier<PIPE_V>();
    Mul(t, t, s, n);
  } else {
    PipeBarrier<PIPE_V>();
    Mul(t, t, s, n);
    PipeBarrier<PIPE_V>();
    Mul(t, t, a, n);
    PipeBarrier<PIPE_V>();
    Muls(t, t, 2.0f * kK, n);
    PipeBarrier<PIPE_V>();
    Mul(scratch, a, a, n);
    PipeBarrier<PIPE_V>();
    Mins(scratch, scratch, kSquareCap, n);
    PipeBarrier<PIPE_V>();
    Muls(scratch, scratch, 3.0f * kC, n);
    PipeBarrier<PIPE_V>();
    Adds(scratch, scratch, 1.0f, n);
    PipeBarrier<PIPE_V>();
    Mul(t, t, scratch, n);
    PipeBarrier<PIPE_V>();
    Add(t, t, s, n);
  }
}

// ---- the kernels

// What both directions share: the plan, the pipe, and Process: the tile walk over the kernel's
// own stages (Kernel::CopyIn, then Compute and CopyOut, pipelined).
template <class X, class Kernel>
class KernelGluBase {
 public:
  void Process() {
    Kernel& k = static_cast<Kernel&>(*this);
    const Walk walk(p_, GetBlockIdx());
    kernel::Pipelined(
        walk.count(), p_.depth, [&](int64_t i) { k.CopyIn(walk.span(i)); },
        [&](int64_t i) {
          const Span s = walk.span(i);
          k.Compute(static_cast<uint32_t>(s.len));
          k.CopyOut(s);
        });
  }

 protected:
  explicit KernelGluBase(const GluPlan& p) : p_(p), shape_{1, p.tile, 1, kernel::kRowAlign<X>} {}

  uint32_t bytes(const UbItem& item) const { return static_cast<uint32_t>(item_bytes(item, shape_)); }
  uint8_t depth() const { return static_cast<uint8_t>(p_.depth); }
  void Bind(GlobalTensor<X>& gm, GM_ADDR addr) const {
    gm.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(addr), static_cast<uint64_t>(p_.n));
  }

  GluPlan p_;
  TileShape shape_;
  TPipe pipe_;
};

template <class X, Act A>
class KernelGluFwd : public KernelGluBase<X, KernelGluFwd<X, A>> {
  using Base = KernelGluBase<X, KernelGluFwd<X, A>>;
  friend Base;
  using Base::bytes;
  using Base::depth;
  using Base::p_;
  using Base::pipe_;

 public:
  // torch: act(a) rounded to X before it multiplies b.
  KernelGluFwd(const GluPlan& p, bool torch) : Base(p), torch_(torch) {}

  void Init(GM_ADDR a, GM_ADDR b, GM_ADDR c) {
    this->Bind(aGm_, a);
    this->Bind(bGm_, b);
    this->Bind(cGm_, c);
    const FwdLayout l = fwd_layout(kernel::elem_of<X>());
    pipe_.InitBuffer(inA_, depth(), bytes(l.a));
    pipe_.InitBuffer(inB_, depth(), bytes(l.b));
    pipe_.InitBuffer(padC_, bytes(l.pad_c));
    pipe_.InitBuffer(outC_, depth(), bytes(l.c));
    if (l.af.size != 0) pipe_.InitBuffer(afBuf_, bytes(l.af));
    if (l.pad_t.size != 0) pipe_.InitBuffer(padT_, bytes(l.pad_t));
    pipe_.InitBuffer(tBuf_, bytes(l.t));
  }

 private:
  void CopyIn(Span s) {
    LocalTensor<X> a = inA_.template AllocTensor<X>();
    LocalTensor<X> b = inB_.template AllocTensor<X>();
    CopyTileIn(a, aGm_, s, p_.line);
    CopyTileIn(b, bGm_, s, p_.line);
    inA_.EnQue(a);
    inB_.EnQue(b);
  }

  void Compute(uint32_t n) {
    LocalTensor<X> a = inA_.template DeQue<X>();
    LocalTensor<X> b = inB_.template DeQue<X>();
    LocalTensor<X> c = outC_.template AllocTensor<X>();
    const LocalTensor<float> af = FloatScratch<X>(afBuf_);
    const LocalTensor<float> t = tBuf_.Get<float>();
    const LocalTensor<float> xa = AsFloat(a, af, n);
    Sigmoid(t, GateArg<A>(t, xa, n), n, false);
    // act(a) = a * s lands in c's tile (float) or over a's float copy (16-bit), then times b.
    const LocalTensor<float> out = FloatTile(c, af);
    PipeBarrier<PIPE_V>();
    Mul(out, xa, t, n);
    if (torch_) kernel::RoundTo(out, c, n);  // through c's tile, written only after
    const LocalTensor<float> bf = AsFloat(b, t, n);
    PipeBarrier<PIPE_V>();
    Mul(out, out, bf, n);
    StoreFloat(c, out, n);
    outC_.EnQue(c);
    inA_.FreeTensor(a);
    inB_.FreeTensor(b);
  }

  void CopyOut(Span s) {
    LocalTensor<X> c = outC_.template DeQue<X>();
    CopyTileOut(cGm_, c, s, p_.line);
    outC_.FreeTensor(c);
  }

  bool torch_;
  TQue<TPosition::VECIN, 2> inA_, inB_;
  TQue<TPosition::VECOUT, 2> outC_;
  TBuf<TPosition::VECCALC> padC_, afBuf_, padT_, tBuf_;
  GlobalTensor<X> aGm_, bGm_, cGm_;
};

template <class X, Act A>
class KernelGluBwd : public KernelGluBase<X, KernelGluBwd<X, A>> {
  using Base = KernelGluBase<X, KernelGluBwd<X, A>>;
  friend Base;
  using Base::bytes;
  using Base::depth;
  using Base::p_;
  using Base::pipe_;

 public:
  // torch: geglu's db = dc * X(act(a)) and da = X(dc * b) * act'(a) (swiglu: unchanged).
  KernelGluBwd(const GluPlan& p, bool torch) : Base(p), torch_(torch && A == Act::gelu) {}

  // da may be a and db may be b: a tile's inputs are all in UB before its outputs go out, and
  // no two tiles overlap.
  void Init(GM_ADDR dc, GM_ADDR a, GM_ADDR b, GM_ADDR da, GM_ADDR db) {
    this->Bind(dcGm_, dc);
    this->Bind(aGm_, a);
    this->Bind(bGm_, b);
    this->Bind(daGm_, da);
    this->Bind(dbGm_, db);
    const BwdLayout l = bwd_layout(kernel::elem_of<X>());
    pipe_.InitBuffer(inDc_, depth(), bytes(l.dc));
    pipe_.InitBuffer(inA_, depth(), bytes(l.a));
    pipe_.InitBuffer(inB_, depth(), bytes(l.b));
    pipe_.InitBuffer(outDa_, depth(), bytes(l.da));
    pipe_.InitBuffer(outDb_, depth(), bytes(l.db));
    if (l.af.size != 0) pipe_.InitBuffer(afBuf_, bytes(l.af));
    pipe_.InitBuffer(sBuf_, bytes(l.s));
    if (l.slope.size != 0) pipe_.InitBuffer(slopeBuf_, bytes(l.slope));
    if (l.value.size != 0) pipe_.InitBuffer(valueBuf_, bytes(l.value));
  }

 private:
  void CopyIn(Span s) {
    LocalTensor<X> dc = inDc_.template AllocTensor<X>();
    LocalTensor<X> a = inA_.template AllocTensor<X>();
    LocalTensor<X> b = inB_.template AllocTensor<X>();
    CopyTileIn(dc, dcGm_, s, p_.line);
    CopyTileIn(a, aGm_, s, p_.line);
    CopyTileIn(b, bGm_, s, p_.line);
    inDc_.EnQue(dc);
    inA_.EnQue(a);
    inB_.EnQue(b);
  }

  void Compute(uint32_t n) {
    LocalTensor<X> dc = inDc_.template DeQue<X>();
    LocalTensor<X> a = inA_.template DeQue<X>();
    LocalTensor<X> b = inB_.template DeQue<X>();
    LocalTensor<X> da = outDa_.template AllocTensor<X>();
    LocalTensor<X> db = outDb_.template AllocTensor<X>();
    const LocalTensor<float> af = FloatScratch<X>(afBuf_);
    const LocalTensor<float> s = sBuf_.Get<float>();
    const LocalTensor<float> slope = FloatTile(da, FloatScratch<X>(slopeBuf_));
    const LocalTensor<float> value = FloatTile(db, FloatScratch<X>(valueBuf_));
    const LocalTensor<float> xa = AsFloat(a, af, n);
    const LocalTensor<float> z = GateArg<A>(slope, xa, n);
    Sigmoid(s, z, n, false);
    Sigmoid(slope, z, n, true);
    Slope<A>(slope, xa, s, value, n);
    PipeBarrier<PIPE_V>();
    Mul(value, xa, s, n);
    // db = dc * act(a); da = dc * act'(a) * b (b as float over a's float copy, now unused).
    // torch: act(a) rounded through db's tile and dc * b through da's, each written only after.
    if (torch_) kernel::RoundTo(value, db, n);
    const LocalTensor<float> g = AsFloat(dc, s, n);
    PipeBarrier<PIPE_V>();
    Mul(value, value, g, n);
    StoreFloat(db, value, n);
    if (torch_) {
      const LocalTensor<float> gb = AsFloat(b, af, n);
      PipeBarrier<PIPE_V>();
      Mul(gb, g, gb, n);
      kernel::RoundTo(gb, da, n);
      PipeBarrier<PIPE_V>();
      Mul(slope, slope, gb, n);
    } else {
      PipeBarrier<PIPE_V>();
      Mul(slope, slope, g, n);
      const LocalTensor<float> bf = AsFloat(b, af, n);
      PipeBarrier<PIPE_V>();
      Mul(slope, slope, bf, n);
    }
    StoreFloat(da, slope, n);
    outDa_.EnQue(da);
    outDb_.EnQue(db);
    inDc_.FreeTensor(dc);
    inA_.FreeTensor(a);
    inB_.FreeTensor(b);
  }

  void CopyOut(Span s) {
    LocalTensor<X> da = outDa_.template DeQue<X>();
    LocalTensor<X> db = outDb_.template DeQue<X>();
    CopyTileOut(daGm_, da, s, p_.line);
    CopyTileOut(dbGm_, db, s, p_.line);
    outDa_.FreeTensor(da);
    outDb_.FreeTensor(db);
  }

  bool torch_;
  TQue<TPosition::VECIN, 2> inDc_, inA_, inB_;
  TQue<TPosition::VECOUT, 2> outDa_, outDb_;
  TBuf<TPosition::VECCALC> afBuf_, sBuf_, slopeBuf_, valueBuf_;
  GlobalTensor<X> dcGm_, aGm_, bGm_, daGm_, dbGm_;
};

template <class X, Act A>
__global__ __aicore__ void glu_fwd(GM_ADDR a, GM_ADDR b, GM_ADDR c, const GluPlan& plan, bool torch) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
  KernelGluFwd<X, A> op(plan, torch);
  op.Init(a, b, c);
  op.Process();
}

template <class X, Act A>
__global__ __aicore__ void glu_bwd(GM_ADDR dc, GM_ADDR a, GM_ADDR b, GM_ADDR da, GM_ADDR db, const GluPlan& plan,
                                   bool torch) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
  KernelGluBwd<X, A> op(plan, torch);
  op.Init(dc, a, b, da, db);
  op.Process();
}
// ascend-c: end

std::string kernel_name(Act act, bool backward, Impl impl) {
  return std::string(act == Act::gelu ? "geglu" : "swiglu") + (backward ? "_bwd_" : "_fwd_") +
         std::string(to_string(impl));
}

}  // namespace

// gpu_port, forced (gpu_port.h): Liger's GPU kernel's failures, once and before anything runs;
// where it would run, the result from the flat kernel, then the port's program on scratch
// outputs (its counters are the last launch's).
template <Act A, class Desc>
void port_run(const Desc& d, const KernelContext& ctx) {
  constexpr bool kBwd = std::is_same_v<Desc, family::GluBwd>;
  Emulator& emulator = emulator_in(ctx);
  const GluSizes s = sizes_of(d);
  const gpu_port::Port port = port_of(A, s, emulator.model());
  gpu_port::check(port, fmt::format("{}.{}", A == Act::gelu ? "geglu" : "swiglu", kBwd ? "bwd" : "fwd"));
  const GluPlan flat = plan(Impl::flat, s, emulator.model());
  if constexpr (kBwd) {
    run_bwd<A>(d, flat, ctx);
  } else {
    run_fwd<A>(d, flat, ctx);
  }
  if (port.programs == 0 || s.cols == 0) return;
  const auto bytes = static_cast<std::size_t>(d.n) * elem_bytes(d.type);
  const std::size_t pitch = (bytes + 63) / 64 * 64;
  const Workspace::Lease scratch = acquire_scratch(ctx, pitch * (kBwd ? 2 : 1));
  auto* base = static_cast<std::byte*>(scratch.data());
  std::vector<GmArg> args;
  if constexpr (kBwd) {
    args = {{"dc", d.dc, bytes}, {"a", d.a, bytes}, {"b", d.b, bytes}, {"da_scratch", base, bytes, true},
            {"db_scratch", base + pitch, bytes, true}};
  } else {
    args = {{"a", d.a, bytes}, {"b", d.b, bytes}, {"c_scratch", base, bytes, true}};
  }
  gpu_port::emulate(emulator, port.kernel + "_gpu_port", port, args);
}

template <Act A>
void run_fwd(const family::GluFwd& d, const GluPlan& plan, const KernelContext& ctx) {
  Emulator& emulator = emulator_in(ctx);
  if (plan.impl == Impl::gpu_port) return port_run<A>(d, ctx);
  const std::string name = kernel_name(A, false, plan.impl);
  if (plan.block_dim == 0) return emulator.record(empty_launch(name, emulator));
  const auto bytes = static_cast<std::size_t>(d.n) * elem_bytes(d.type);
  const std::vector<GmArg> args{{"a", d.a, bytes}, {"b", d.b, bytes}, {"c", d.c, bytes, true}};
  const bool torch = d.rounding == family::GluRounding::torch;
  emulator.launch(name, plan.block_dim, args, [&] {
    kernel::with_types(d.type, d.type, [&](auto xt, auto) {
      glu_fwd<typename decltype(xt)::type, A>(gm_addr(d.a), gm_addr(d.b), gm_addr(d.c), plan, torch);
    });
  });
}

template <Act A>
void run_bwd(const family::GluBwd& d, const GluPlan& plan, const KernelContext& ctx) {
  Emulator& emulator = emulator_in(ctx);
  if (plan.impl == Impl::gpu_port) return port_run<A>(d, ctx);
  const std::string name = kernel_name(A, true, plan.impl);
  if (plan.block_dim == 0) return emulator.record(empty_launch(name, emulator));
  const auto bytes = static_cast<std::size_t>(d.n) * elem_bytes(d.type);
  const std::vector<GmArg> args{
      {"dc", d.dc, bytes}, {"a", d.a, bytes}, {"b", d.b, bytes}, {"da", d.da, bytes, true}, {"db", d.db, bytes, true}};
  const bool torch = d.rounding == family::GluRounding::torch;
  emulator.launch(name, plan.block_dim, args, [&] {
    kernel::with_types(d.type, d.type, [&](auto xt, auto) {
      glu_bwd<typename decltype(xt)::type, A>(gm_addr(d.dc), gm_addr(d.a), gm_addr(d.b), gm_addr(d.da), gm_addr(d.db),
                                              plan, torch);
    });
  });
}

template void run_fwd<Act::gelu>(const family::GluFwd&, const GluPlan&, const KernelContext&);
template void run_fwd<Act::silu>(const family::GluFwd&, const GluPlan&, const KernelContext&);
template void run_bwd<Act::gelu>(const family::GluBwd&, const GluPlan&, const KernelContext&);
template void run_bwd<Act::silu>(const family::GluBwd&, const GluPlan&, const KernelContext&);

}  // namespace opreg::npu::glu
