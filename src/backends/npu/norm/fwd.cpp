// layer_norm / group_norm forward on the npu: y = (x - mean) * rstd * w + b per set, with
// rstd = 1 / sqrt(M2 / n + eps).
//
// single_pass: each core takes a contiguous range of sets, several whole sets a tile (one
// DataCopyPad of their DMA rows in and out); the statistics are two-pass on the UB-resident set.
// chunked: a set too large for UB is walked in pieces (DMA rows, or BLOCK_SIZE_SUB chunks of one
// row) twice: pass 1 gives each piece's moments, merged with Chan's formula, for a group of sets;
// pass 2 goes piece by piece over all the core's sets (each weight chunk loaded once a core) and
// normalises. x is read twice. A set whose M2 overflows float (values past ~2^63) is summed again
// scaled by a power of two (the chunked kernel re-reads it twice, only then).
#include <string>
#include <vector>

#include "backends/npu/norm/kernels.h"

namespace opreg::npu::norm {
namespace {

// ascend-c: begin
// The building blocks (kernel_util.h) and, through them, Ascend C's names.
using namespace kernel;
using namespace kernel_norm;

struct FwdParams {
  NormPlan plan;
  NormSizes s;
  float eps = 0;
};

template <class X, class P>
class KernelNorm : public kernel::RowKernel<FwdParams> {
 public:
  static constexpr KernelMetaType kType = KERNEL_TYPE_AIV_ONLY;
  explicit KernelNorm(const FwdParams& p) : RowKernel(p, p.plan.tiles), s_(p.s) {}

  void Init(GM_ADDR x, GM_ADDR weight, GM_ADDR bias, GM_ADDR y, GM_ADDR mean, GM_ADDR rstd) {
    const Tiles& t = p_.plan.tiles;
    size_ = s_.size();
    const auto elems = static_cast<uint64_t>(s_.sets * size_);
    xGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(x), elems);
    yGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(y), elems);
    meanGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(mean), static_cast<uint64_t>(s_.sets));
    rstdGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(rstd), static_cast<uint64_t>(s_.sets));
    const auto params = static_cast<uint64_t>(s_.params());
    if (s_.has_weight) wGm_.SetGlobalBuffer(reinterpret_cast<__gm__ P*>(weight), params);
    if (s_.has_bias) bGm_.SetGlobalBuffer(reinterpret_cast<__gm__ P*>(bias), params);
    const FwdLayout l = fwd_layout(s_);
    InitUb(pipe_, shape_, t.depth, inX_, l.x, outY_, l.y, xfBuf_, l.xf, yfBuf_, l.yf, wfBuf_, l.wf, bfBuf_, l.bf, wcBuf_,
           l.wc, bcBuf_, l.bc, rawBuf_, l.p_raw, meanBuf_, l.mean, m2Buf_, l.m2, scaleBuf_, l.scale, rstdBuf_, l.rstd,
           accBuf_, l.acc, workBuf_, l.work);
  }

  void Process() {
    if (s_.channel_mode()) {
      const LocalTensor<float> raw = l_raw();
      if (s_.has_weight) LoadParams(wcBuf_.Get<float>(), wGm_, s_.params(), raw);
      if (s_.has_bias) LoadParams(bcBuf_.Get<float>(), bGm_, s_.params(), raw);
    }
    if (p_.plan.tiles.mode == TileMode::split_row) {
      ProcessPieces();
    } else {
      ProcessSets();
    }
  }

 private:
  LocalTensor<float> l_raw() { return fwd_layout(s_).p_raw.size != 0 ? rawBuf_.Get<float>() : LocalTensor<float>{}; }
  uint64_t at(int64_t set, int64_t row = 0, int64_t col = 0) const {
    return static_cast<uint64_t>(set * size_ + row * p_.plan.row_len + col);
  }
  LocalTensor<float> Acc() { return accBuf_.Get<float>(); }
  LocalTensor<float> Work() { return workBuf_.Get<float>(); }

  // ---- whole sets, several a tile
  void ProcessSets() {
    const int64_t R = p_.plan.dma_rows;
    const int64_t L = p_.plan.row_len;
    if (!s_.channel_mode()) LoadRowParams(0, L);
    kernel::RowTiles(
        range_.first, range_.count, p_.plan.sets_per_tile, p_.plan.tiles.depth,
        [&](int64_t set0, int64_t n) { CopyIn(at(set0), n * R, L); },
        [&](int64_t set0, int64_t n) {
          ComputeSets(set0, n);
          CopyOut(at(set0), n * R, L);
          PipeSync<HardEvent::S_MTE3>();  // mean, set by the scalar unit
          PipeSync<HardEvent::V_MTE3>();  // rstd, a vector result
          CopyRowsOut(meanGm_[static_cast<uint64_t>(set0)], meanBuf_.Get<float>(), 1, n, n);
          CopyRowsOut(rstdGm_[static_cast<uint64_t>(set0)], rstdBuf_.Get<float>(), 1, n, n);
        });
  }

  void CopyIn(uint64_t offset, int64_t rows, int64_t width) {
    QueueRowsIn(inX_, xGm_[offset], rows, width, p_.plan.row_len);
  }

  void CopyOut(uint64_t offset, int64_t rows, int64_t width) {
    QueueRowsOut(yGm_[offset], outY_, rows, width, p_.plan.row_len);
  }

  void ComputeSets(int64_t set0, int64_t n) {
    const int64_t R = p_.plan.dma_rows;
    const int64_t L = p_.plan.row_len;
    const int64_t pitch = shape_.pitch();
    LocalTensor<X> x = inX_.DeQue<X>();
    LocalTensor<X> y = outY_.AllocTensor<X>();
    const int64_t span = n * R * pitch;
    const LocalTensor<float> xf = AsFloat(x, kernel::FloatScratch<X>(xfBuf_), span);
    const LocalTensor<float> yf = kernel::FloatTile(y, kernel::FloatScratch<X>(yfBuf_));
    PipeSync<HardEvent::MTE3_S>();  // the last tile's mean has left UB
    for (int64_t k = 0; k < n; ++k) {
      const auto base = u32(k * R * pitch);
      Moments m = PieceMoments(xf[base], yf[base], R, L, pitch, Acc(), Work());
      float scale = 1.0f;
      if (Overflowed(m)) scale = RescaleResident(xf[base], yf[base], R, L, pitch, m);
      PutStats(k, m, scale);
    }
    PipeSync<HardEvent::S_V>();     // the statistics the scalar unit set
    PipeSync<HardEvent::MTE3_V>();  // the last tile's rstd has left UB
    Rstd(n);
    PipeSync<HardEvent::V_S>();  // rstd, read by the scalar unit
    const LocalTensor<float> mean = meanBuf_.Get<float>();
    const LocalTensor<float> rstd = rstdBuf_.Get<float>();
    for (int64_t k = 0; k < n; ++k) {
      const auto base = u32(k * R * pitch);
      Apply(xf[base], yf[base], set0 + k, 0, R, L, pitch, mean.GetValue(u32(k)), rstd.GetValue(u32(k)));
    }
    StoreFloat(y, yf, span);
    outY_.EnQue(y);
    inX_.FreeTensor(x);
  }

  // ---- pieces of sets too large for UB
  kernel::SplitRows Walk() const {
    const Tiles& t = p_.plan.tiles;
    return {range_.first, range_.count, t.stat_rows, 0, 0, p_.plan.pieces, t.depth};
  }

  void PieceIn(int64_t set, int64_t i) {
    const Piece pc = p_.plan.piece(i);
    CopyIn(at(set, pc.row0, pc.col0), pc.rows, pc.width);
  }

  void ProcessPieces() {
    const kernel::SplitRows walk = Walk();
    const LocalTensor<float> mean = meanBuf_.Get<float>();
    const LocalTensor<float> m2 = m2Buf_.Get<float>();
    const LocalTensor<float> rstd = rstdBuf_.Get<float>();
    const int64_t pitch = shape_.pitch();
    auto in = [&](int64_t set, int64_t i) { PieceIn(set, i); };
    // Pass 1: each piece's moments merged into its set's (mean, M2), held in UB for the group.
    walk.pass1(
        [&](int64_t, int64_t) {
          PipeSync<HardEvent::MTE3_S>();  // the last group's mean has left UB
          PipeSync<HardEvent::V_S>();     // and the vector unit is done with its m2 and scale
        }, in,
               [&](int64_t r, int64_t i) {
                 const Piece pc = p_.plan.piece(i);
                 LocalTensor<X> x = inX_.DeQue<X>();
                 const int64_t span = pc.rows * pitch;
                 const LocalTensor<float> xf = AsFloat(x, kernel::FloatScratch<X>(xfBuf_), span);
                 Moments piece;
                 WithScratch([&](const LocalTensor<float>& t) {
                   piece = PieceMoments(xf, t, pc.rows, pc.width, pitch, Acc(), Work());
                 });
                 inX_.FreeTensor(x);
                 Moments set;
                 if (i > 0) {
                   set.n = static_cast<float>(p_.plan.before(i));
                   set.mean = mean.GetValue(u32(r));
                   set.m2 = m2.GetValue(u32(r));
                 }
                 Merge(set, piece);
                 mean.SetValue(u32(r), set.mean);
                 m2.SetValue(u32(r), set.m2);
               },
               [&](int64_t g0, int64_t gn) {
                 for (int64_t r = 0; r < gn; ++r) {
                   Moments m{static_cast<float>(size_), mean.GetValue(u32(r)), m2.GetValue(u32(r))};
                   if (size_ == 0) m = {};
                   float scale = 1.0f;
                   if (Overflowed(m)) scale = RescaleSet(g0 + r, m);
                   PutStats(r, m, scale);
                 }
                 PipeSync<HardEvent::S_V>();     // the statistics the scalar unit set
                 PipeSync<HardEvent::MTE3_V>();  // the last group's rstd has left UB
                 Rstd(gn);
                 PipeSync<HardEvent::S_MTE3>();
                 PipeSync<HardEvent::V_MTE3>();
                 CopyRowsOut(meanGm_[static_cast<uint64_t>(g0)], mean, 1, gn, gn);
                 CopyRowsOut(rstdGm_[static_cast<uint64_t>(g0)], rstd, 1, gn, gn);
               });
    // Pass 2: piece by piece over every set of the core.
    StatsPass2(
        walk, mean, rstd, meanGm_, rstdGm_,
        [&](int64_t i) {
          const Piece pc = p_.plan.piece(i);
          if (!s_.channel_mode()) LoadRowParams(pc.col0, pc.width);
        },
        [](int64_t, int64_t) {},
        in,
        [&](int64_t j, int64_t i) {
          const Piece pc = p_.plan.piece(i);
          const int64_t set = range_.first + j;
          LocalTensor<X> x = inX_.DeQue<X>();
          LocalTensor<X> y = outY_.AllocTensor<X>();
          const int64_t span = pc.rows * pitch;
          const LocalTensor<float> xf = AsFloat(x, kernel::FloatScratch<X>(xfBuf_), span);
          const LocalTensor<float> yf = kernel::FloatTile(y, kernel::FloatScratch<X>(yfBuf_));
          const auto r = u32(j % walk.group);
          Apply(xf, yf, set, pc.row0, pc.rows, pc.width, pitch, mean.GetValue(r), rstd.GetValue(r));
          StoreFloat(y, yf, span);
          outY_.EnQue(y);
          inX_.FreeTensor(x);
          CopyOut(at(set, pc.row0, pc.col0), pc.rows, pc.width);
        },
        [](int64_t) {});
  }

  // f(t) with a float tile for d = x - mean: y's float tile, or for float x a y tile of the out
  // queue taken and given back (pass 1 copies nothing out).
  template <class F>
  void WithScratch(F&& f) {
    if constexpr (IsSameType<X, float>::value) {
      LocalTensor<float> t = outY_.AllocTensor<float>();
      f(t);
      outY_.FreeTensor(t);
    } else {
      f(yfBuf_.Get<float>());
    }
  }

  // ---- statistics
  static bool Overflowed(const Moments& m) { return kernel::IsInf(m.m2) && kernel::IsFinite(m.mean); }

  void PutStats(int64_t k, const Moments& m, float scale) {
    meanBuf_.Get<float>().SetValue(u32(k), m.mean);
    m2Buf_.Get<float>().SetValue(u32(k), m.m2);
    scaleBuf_.Get<float>().SetValue(u32(k), scale);
  }

  // rstd of n sets from their M2 and scale (kernel::ScaledRstd; an empty set has M2 0).
  void Rstd(int64_t n) {
    kernel::ScaledRstd(rstdBuf_.Get<float>(), m2Buf_.Get<float>(), scaleBuf_.Get<float>(), size_, p_.eps, n);
  }

  // A resident set whose M2 overflowed: M2 of (x - mean) scaled by the power of two that brings
  // the largest |x - mean| below 1. Returns the scale (1 when that largest is not finite).
  float RescaleResident(const LocalTensor<float>& x, const LocalTensor<float>& t, int64_t rows,
                        int64_t width, int64_t pitch, Moments& m) {
    const uint32_t span = u32(rows * pitch);
    PipeBarrier<PIPE_V>();
    Adds(t, x, -m.mean, span);
    PipeBarrier<PIPE_V>();
    Abs(t, t, span);
    const float largest = RowsMax(t, rows, width, pitch, Acc(), Work());
    if (!kernel::IsFinite(largest)) return 1.0f;
    const float scale = ScaleFor(largest);
    PipeBarrier<PIPE_V>();
    Adds(t, x, -m.mean, span);
    PipeBarrier<PIPE_V>();
    Muls(t, t, scale, span);
    PipeBarrier<PIPE_V>();
    Mul(t, t, t, span);
    m.m2 = RowsSum(t, rows, width, pitch, Acc(), Work());
    return scale;
  }

  // The same for a set in pieces: its pieces come in once for the largest |x - mean|, once for
  // the scaled squares.
  float RescaleSet(int64_t set, Moments& m) {
    const int64_t pitch = shape_.pitch();
    auto each_piece = [&](auto&& f) {
      for (int64_t i = 0; i < p_.plan.pieces; ++i) {
        const Piece pc = p_.plan.piece(i);
        PieceIn(set, i);
        LocalTensor<X> x = inX_.DeQue<X>();
        const int64_t span = pc.rows * pitch;
        f(AsFloat(x, kernel::FloatScratch<X>(xfBuf_), span), pc, u32(span));
        inX_.FreeTensor(x);
      }
    };
    float largest = 0.0f;
    float sum = 0.0f;
    float scale = 1.0f;
    WithScratch([&](const LocalTensor<float>& t) {
    each_piece([&](const LocalTensor<float>& xf, const Piece& pc, uint32_t span) {
      PipeBarrier<PIPE_V>();
      Adds(t, xf, -m.mean, span);
      PipeBarrier<PIPE_V>();
      Abs(t, t, span);
      const float piece = RowsMax(t, pc.rows, pc.width, pitch, Acc(), Work());
      largest = kernel::IsNan(piece) || piece > largest ? piece : largest;
    });
    if (!kernel::IsFinite(largest)) return;
    scale = ScaleFor(largest);
    each_piece([&](const LocalTensor<float>& xf, const Piece& pc, uint32_t span) {
      PipeBarrier<PIPE_V>();
      Adds(t, xf, -m.mean, span);
      PipeBarrier<PIPE_V>();
      Muls(t, t, scale, span);
      PipeBarrier<PIPE_V>();
      Mul(t, t, t, span);
      sum += RowsSum(t, pc.rows, pc.width, pitch, Acc(), Work());
    });
    m.m2 = sum;
    });
    return scale;
  }

  // ---- y = (x - mean) * rstd * w + b over `rows` DMA rows (from row0 of set `set`) of `width`
  void Apply(const LocalTensor<float>& xf, const LocalTensor<float>& yf, int64_t set, int64_t row0,
             int64_t rows, int64_t width, int64_t pitch, float mean, float rstd) {
    if (width == 0) return;
    const uint32_t span = u32(rows * pitch);
    PipeBarrier<PIPE_V>();
    Adds(yf, xf, -mean, span);
    if (!s_.channel_mode()) {
      PipeBarrier<PIPE_V>();
      Muls(yf, yf, rstd, span);
      PipeBarrier<PIPE_V>();
      if (s_.has_weight) Mul(yf, yf, wfBuf_.Get<float>(), u32(width));
      PipeBarrier<PIPE_V>();
      if (s_.has_bias) Add(yf, yf, bfBuf_.Get<float>(), u32(width));
      return;
    }
    // Channel mode: each DMA row is one channel; its gamma and beta are scalars of the row.
    const int64_t c0 = (set % s_.groups) * s_.channels + row0;
    for (int64_t r = 0; r < rows; ++r) {
      const LocalTensor<float> v = yf[u32(r * pitch)];
      const float a = s_.has_weight ? rstd * wcBuf_.Get<float>().GetValue(u32(c0 + r)) : rstd;
      PipeBarrier<PIPE_V>();
      Muls(v, v, a, u32(width));
      PipeBarrier<PIPE_V>();
      if (s_.has_bias) Adds(v, v, bcBuf_.Get<float>().GetValue(u32(c0 + r)), u32(width));
    }
  }

  // Row mode: the weight and bias of columns [col0, col0 + width) as float (16-bit params pass
  // through y's float tile).
  void LoadRowParams(int64_t col0, int64_t width) {
    if (width == 0) return;
    const LocalTensor<float> scratch = kernel::FloatScratch<X>(yfBuf_);
    if (s_.has_weight) kernel::LoadRowAsFloat(wfBuf_.Get<float>(), wGm_, col0, width, scratch);
    if (s_.has_bias) kernel::LoadRowAsFloat(bfBuf_.Get<float>(), bGm_, col0, width, scratch);
  }

  NormSizes s_;
  int64_t size_ = 0;
  TQue<TPosition::VECIN, 2> inX_;
  TQue<TPosition::VECOUT, 2> outY_;
  TBuf<TPosition::VECCALC> xfBuf_, yfBuf_, wfBuf_, bfBuf_, wcBuf_, bcBuf_, rawBuf_, meanBuf_, m2Buf_, scaleBuf_, rstdBuf_,
      accBuf_, workBuf_;
  GlobalTensor<X> xGm_, yGm_;
  GlobalTensor<P> wGm_, bGm_;
  GlobalTensor<float> meanGm_, rstdGm_;
};
// ascend-c: end

}  // namespace

void launch_fwd(const family::NormFwd& d, const NormSizes& s, const NormPlan& plan, Emulator& emulator) {
  FwdParams p;
  p.plan = plan;
  p.s = s;
  p.eps = static_cast<float>(d.eps);
  const std::string name = std::string(s.layer ? "layer_norm" : "group_norm") + "_fwd_" +
                           std::string(to_string(plan.impl == Impl::gpu_port ? Impl::single_pass : plan.impl));
  if (plan.tiles.block_dim == 0) {
    emulator.record(empty_launch(name, emulator));
    return;
  }
  const auto xbytes = static_cast<std::size_t>(s.sets * s.size()) * elem_bytes(s.x);
  const auto pbytes = static_cast<std::size_t>(s.params()) * elem_bytes(s.p);
  const auto sbytes = static_cast<std::size_t>(s.sets) * 4;
  std::vector<GmArg> args{{"x", d.x, xbytes}, {"y", d.y, xbytes, true}, {"mean", d.mean, sbytes, true}, {"rstd", d.rstd, sbytes, true}};
  if (s.has_weight) args.push_back({"weight", d.weight, pbytes});
  if (s.has_bias) args.push_back({"bias", d.bias, pbytes});
  kernel::launch<KernelNorm>(emulator, name, plan.tiles.block_dim, args, s.x, s.p, p, gm_addr(d.x), gm_addr(d.weight),
                             gm_addr(d.bias), gm_addr(d.y), gm_addr(d.mean), gm_addr(d.rstd));
}

}  // namespace opreg::npu::norm
