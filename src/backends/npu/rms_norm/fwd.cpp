// rms_norm forward on the npu: y = x * rstd * (offset + w), rstd = 1 / sqrt(mean(x^2) + eps).
//
// single_pass (CANN's MERGE_N / NORMAL): each core takes a contiguous range of rows, several
// whole rows a tile (each row 32-byte padded in UB), one DataCopyPad in and out per tile; x is
// read once, the weight once per core.
// chunked (CANN's SPLIT_D): a row that does not fit UB is walked in BLOCK_SIZE_SUB chunks twice,
// a sum-of-squares pass for a group of rows and then, chunk by chunk, the normalise pass over the
// group, so that each chunk of the weight is read once per core and x at most twice.
//
// fused_add_rms_norm (the same kernel with a residual): s = x + residual, rounded to x's dtype,
// is formed in UB, written once and normalised from UB (gm_read = X + R + W a core). Split rows
// write s in pass 1 and read it back in pass 2 (one tensor, where re-reading x and the residual
// would be two).
#include <string>
#include <vector>

#include "backends/npu/kernel_util.h"
#include "backends/npu/npu_backend.h"
#include "backends/npu/rms_norm/plan.h"

namespace opreg::npu::rms_norm {
namespace {

// ascend-c: begin
// The building blocks (kernel_util.h) and, through them, Ascend C's names.
using namespace kernel;

struct FwdParams {
  Tiles plan;
  float eps = 0;
  float offset = 0;
  family::Mode mode = family::Mode::llama;
  bool has_weight = true;
  bool fused = false;                             // fused_add_rms_norm: residual in, s out
  family::Elem scale_round = family::Elem::f32;  // what (offset + w) is rounded to (casting none)
};

template <class X, class W>
class KernelRmsNorm : public kernel::RowKernel<FwdParams> {
 public:
  static constexpr KernelMetaType kType = KERNEL_TYPE_AIV_ONLY;
  explicit KernelRmsNorm(const FwdParams& p) : RowKernel(p, p.plan) {}

  void Init(GM_ADDR x, GM_ADDR residual, GM_ADDR weight, GM_ADDR y, GM_ADDR s, GM_ADDR rstd) {
    const Tiles& plan = p_.plan;
    cols_ = plan.cols;
    const auto elems = static_cast<uint64_t>(plan.rows * cols_);
    xGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(x), elems);
    yGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(y), elems);
    if (p_.fused) {
      rGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(residual), elems);
      sGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(s), elems);
    }
    rstdGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(rstd), static_cast<uint64_t>(plan.rows));
    if (p_.has_weight) wGm_.SetGlobalBuffer(reinterpret_cast<__gm__ W*>(weight), static_cast<uint64_t>(cols_));
    const FwdLayout l = fwd_layout(kernel::elem_of<X>(), p_.has_weight, p_.fused, short_rows(cols_));
    InitUb(pipe_, shape_, plan.depth, inX_, l.x, inR_, l.res, outY_, l.y, outS_, l.s, xfBuf_, l.xf, sqBuf_, l.sq, wfBuf_,
           l.wf, sumsBuf_, l.sums, scaleBuf_, l.scale, rstdBuf_, l.rstd, rstdBlocksBuf_, l.rstd_blocks, accBuf_, l.acc,
           workBuf_, l.work);
  }

  void Process() {
    if (p_.plan.mode == TileMode::split_row) {
      ProcessChunks();
    } else {
      ProcessRows();
    }
  }

 private:
  uint64_t at(int64_t row, int64_t col = 0) const {
    return static_cast<uint64_t>(row * cols_ + col);
  }

  // ---- whole rows: a tile of up to rows_per_tile rows
  void ProcessRows() {
    PrepareWeight(0, cols_);
    kernel::RowTiles(
        range_.first, range_.count, p_.plan.rows_per_tile, p_.plan.depth,
        [&](int64_t row0, int64_t n) { CopyIn(row0, n, 0, cols_); },
        [&](int64_t row0, int64_t n) {
          ComputeRows(n);
          CopyOut(row0, n, 0, cols_);
        });
  }

  // x (with the residual, for the fused op), or s already written (`stored`: split rows' second
  // reads), into the x queue.
  void CopyIn(int64_t row0, int64_t n, int64_t col0, int64_t width, bool stored = false) {
    LocalTensor<X> x = inX_.AllocTensor<X>();
    CopyRowsIn(x, (stored ? sGm_ : xGm_)[at(row0, col0)], n, width, cols_);
    inX_.EnQue(x);
    if (p_.fused && !stored) {
      LocalTensor<X> r = inR_.AllocTensor<X>();
      CopyRowsIn(r, rGm_[at(row0, col0)], n, width, cols_);
      inR_.EnQue(r);
    }
  }

  // The fused op's s = X(x + residual) for `span` elements of the x tile: returned as float
  // (16-bit x: in xf; float x: the s tile itself), the s tile queued for CopyOutS. `sq` is free
  // scratch of the span (the residual's float copy).
  LocalTensor<float> AddResidual(const LocalTensor<X>& x, const LocalTensor<float>& xf, const LocalTensor<float>& sq,
                                 int64_t span) {
    LocalTensor<X> r = inR_.DeQue<X>();
    LocalTensor<X> s = outS_.AllocTensor<X>();
    LocalTensor<float> sf;
    if constexpr (IsSameType<X, float>::value) {
      static_cast<void>(xf);
      static_cast<void>(sq);
      PipeBarrier<PIPE_V>();
      Add(s, x, r, static_cast<uint32_t>(span));
      sf = s;
    } else {
      const LocalTensor<float> rf = AsFloat(r, sq, span);
      PipeBarrier<PIPE_V>();
      Add(xf, xf, rf, static_cast<uint32_t>(span));
      PipeBarrier<PIPE_V>();
      Cast(s, xf, RoundMode::CAST_RINT, static_cast<uint32_t>(span));
      PipeBarrier<PIPE_V>();
      Cast(xf, s, RoundMode::CAST_NONE, static_cast<uint32_t>(span));
      sf = xf;
    }
    inR_.FreeTensor(r);
    pendingS_ = s;
    return sf;
  }

  void CopyOutS(int64_t row0, int64_t n, int64_t col0, int64_t width) {
    outS_.EnQue(pendingS_);
    LocalTensor<X> s = outS_.DeQue<X>();
    CopyRowsOut(sGm_[at(row0, col0)], s, n, width, cols_);
    outS_.FreeTensor(s);
  }

  void CopyOut(int64_t row0, int64_t n, int64_t col0, int64_t width) {
    if (p_.fused && p_.plan.mode != TileMode::split_row) CopyOutS(row0, n, col0, width);
    LocalTensor<X> y = outY_.DeQue<X>();
    CopyRowsOut(yGm_[at(row0, col0)], y, n, width, cols_);
    outY_.FreeTensor(y);
    if (col0 == 0 && p_.plan.mode != TileMode::split_row) {
      PipeSync<HardEvent::V_MTE3>();  // rstd is a vector result in a TBuf
      CopyRowsOut(rstdGm_[static_cast<uint64_t>(row0)], rstdBuf_.Get<float>(), 1, n, n);
    }
  }

  void ComputeRows(int64_t n) {
    LocalTensor<X> x = inX_.DeQue<X>();
    LocalTensor<X> y = outY_.AllocTensor<X>();
    const int64_t pitch = shape_.pitch();
    const int64_t span = n * pitch;
    LocalTensor<float> xf = AsFloat(x, kernel::FloatScratch<X>(xfBuf_), span);
    // x^2 goes where y is computed next: y's own tile for float x.
    const LocalTensor<float> yf = kernel::FloatTile(y, kernel::FloatScratch<X>(sqBuf_));
    const LocalTensor<float> sq = yf;
    if (p_.fused) xf = AddResidual(x, xf, sq, span);  // normalise s
    const LocalTensor<float> sums = sumsBuf_.Get<float>();
    const LocalTensor<float> rstd = rstdBuf_.Get<float>();
    PipeBarrier<PIPE_V>();
    Mul(sq, xf, xf, static_cast<uint32_t>(span));
    if (short_rows(cols_)) {
      ShortRowSums(sums, sq, n, pitch);
    } else {
      for (int64_t r = 0; r < n; ++r) {
        PipeBarrier<PIPE_V>();
        ReduceSum(sums[static_cast<uint32_t>(r)], sq[static_cast<uint32_t>(r * pitch)],
                  workBuf_.Get<float>(), static_cast<uint32_t>(cols_));
      }
    }
    const LocalTensor<float> scale = scaleBuf_.Get<float>();
    Duplicate(scale, 1.0f, static_cast<uint32_t>(n));
    PipeSync<HardEvent::V_S>();  // the sums, read by the scalar unit
    for (int64_t r = 0; r < n; ++r) {
      const auto off = static_cast<uint32_t>(r * pitch);
      if (sums.GetValue(static_cast<uint32_t>(r)) == kernel::BitsFloat(kernel::kInfBits)) RescaleRow(r, xf[off], sq[off]);
    }
    PipeSync<HardEvent::S_V>();     // a rescaled row's scale, set by the scalar unit
    PipeSync<HardEvent::MTE3_V>();  // the last tile's rstd has left UB
    Rstd(rstd, sums, n);
    if (short_rows(cols_)) {
      ShortRowsTimesRstd(yf, xf, rstd, n, pitch);
    } else {
      PipeSync<HardEvent::V_S>();
      for (int64_t r = 0; r < n; ++r) {
        const auto off = static_cast<uint32_t>(r * pitch);
        PipeBarrier<PIPE_V>();
        Muls(yf[off], xf[off], rstd.GetValue(static_cast<uint32_t>(r)), static_cast<uint32_t>(cols_));
      }
    }
    Scale(yf, y, n, pitch, cols_);
    outY_.EnQue(y);
    inX_.FreeTensor(x);
  }

  // Short rows (one repeat of floats each), up to 255 rows an instruction, the rows' pitch as the
  // repeat stride. Each row's sum is the tree ReduceSum forms for one repeat, so the bits are the
  // same as the long-row path's.
  void ShortRowSums(const LocalTensor<float>& sums, const LocalTensor<float>& sq, int64_t n,
                    int64_t pitch) {
    const auto rep = static_cast<int32_t>(pitch / 8);
    for (int64_t r0 = 0; r0 < n; r0 += MAX_REPEAT_TIMES) {
      const auto k = static_cast<int32_t>(Std::min<int64_t>(MAX_REPEAT_TIMES, n - r0));
      PipeBarrier<PIPE_V>();
      WholeReduceSum(sums[static_cast<uint32_t>(r0)], sq[static_cast<uint32_t>(r0 * pitch)],
                     static_cast<uint64_t>(cols_), k, 1, 1, rep);
    }
  }

  // y = x * rstd for short rows without the scalar unit: Brcb puts each row's rstd in a 32-byte
  // block of its own, and the repeat-form Mul reads that block for all 8 blocks of the row's
  // repeat (src1 block stride 0, repeat stride 1 block).
  void ShortRowsTimesRstd(const LocalTensor<float>& yf, const LocalTensor<float>& xf, const LocalTensor<float>& rstd,
                          int64_t n, int64_t pitch) {
    const LocalTensor<float> blocks = rstdBlocksBuf_.Get<float>();
    PipeBarrier<PIPE_V>();
    Brcb(blocks, rstd, static_cast<int32_t>((n + 7) / 8), BrcbRepeatParams(1, 8));
    const int64_t rep = pitch / 8;
    for (int64_t r0 = 0; r0 < n; r0 += MAX_REPEAT_TIMES) {
      const auto k = static_cast<int32_t>(Std::min<int64_t>(MAX_REPEAT_TIMES, n - r0));
      const auto off = static_cast<uint32_t>(r0 * pitch);
      PipeBarrier<PIPE_V>();
      Mul(yf[off], xf[off], blocks[static_cast<uint32_t>(r0 * 8)], static_cast<uint64_t>(cols_), k,
          BinaryRepeatParams(1, 1, 0, rep, rep, 1));
    }
  }

  // ---- split rows: BLOCK_SIZE_SUB chunks, statistics of stat_rows rows at a time
  kernel::SplitRows Walk() const {
    const Tiles& plan = p_.plan;
    return {range_.first, range_.count, plan.stat_rows, cols_, plan.block_size_sub, plan.chunks, plan.depth};
  }

  void ProcessChunks() {
    const kernel::SplitRows walk = Walk();
    const LocalTensor<float> sums = sumsBuf_.Get<float>();
    const LocalTensor<float> rstd = rstdBuf_.Get<float>();
    auto in = [&](int64_t row, int64_t c) { CopyIn(row, 1, walk.start(c), walk.width(c)); };
    // Pass 1: the sum of squares of each row of a group, chunk by chunk, then the group's rstd.
    walk.pass1(
        [&](int64_t g0, int64_t gn) {
          groupStart_ = g0;
          Duplicate(sums, 0.0f, static_cast<uint32_t>(gn));
        },
        in,
               [&](int64_t r, int64_t c) { SumChunk(r, groupStart_ + r, walk.start(c), walk.width(c)); },
               [&](int64_t g0, int64_t gn) {
                 PipeSync<HardEvent::S_V>();  // the sums (and scales) the scalar unit set
                 Duplicate(scaleBuf_.Get<float>(), 1.0f, static_cast<uint32_t>(gn));
                 for (int64_t r = 0; r < gn; ++r) {
                   if (sums.GetValue(static_cast<uint32_t>(r)) == kernel::BitsFloat(kernel::kInfBits)) RescaleSplitRow(g0 + r, r);
                 }
                 PipeSync<HardEvent::S_V>();
                 PipeSync<HardEvent::MTE3_V>();  // the last group's rstd has left UB
                 Rstd(rstd, sums, gn);
                 PipeSync<HardEvent::V_MTE3>();
                 CopyRowsOut(rstdGm_[static_cast<uint64_t>(g0)], rstd, 1, gn, gn);
               });
    // Pass 2: chunk by chunk (its weight loaded once), normalise every row of the core; with
    // several groups their rstd comes back from GM (MTE3 -> MTE2: a barrier first).
    // The fused op's pass 2 reads s back from GM (MTE3 -> MTE2 as well).
    if (walk.groups() > 1 || p_.fused) PipeBarrier<PIPE_ALL>();
    PipeSync<HardEvent::V_S>();  // one group's rstd stays in UB for pass 2's scalar reads
    auto in2 = [&](int64_t row, int64_t c) { CopyIn(row, 1, walk.start(c), walk.width(c), p_.fused); };
    walk.pass2([&](int64_t c) { PrepareWeight(walk.start(c), walk.width(c)); },
               [&](int64_t row, int64_t gn) {
                 if (walk.groups() > 1) {
                   CopyRowsIn(rstd, rstdGm_[static_cast<uint64_t>(row)], 1, gn, gn);
                   PipeSync<HardEvent::MTE2_S>();
                 }
               },
               in2,
               [&](int64_t j, int64_t c) {
                 NormaliseChunk(rstd.GetValue(static_cast<uint32_t>(j % walk.group)), walk.width(c));
                 CopyOut(range_.first + j, 1, walk.start(c), walk.width(c));
               },
               [](int64_t) {});
  }

  // sums[r] += the chunk's sum of squares; `row`, `col0`: where the chunk is (the fused op writes
  // its s there). The per-row sums are added on the scalar unit: a vector operand starts 32-byte
  // aligned, sums[r] does not.
  void SumChunk(int64_t r, int64_t row, int64_t col0, int64_t width) {
    LocalTensor<X> x = inX_.DeQue<X>();
    LocalTensor<float> xf = AsFloat(x, kernel::FloatScratch<X>(xfBuf_), width);
    const LocalTensor<float> acc = accBuf_.Get<float>();
    LocalTensor<float> sq = xf;  // x is not needed after its squares
    if (p_.fused) {
      const LocalTensor<float> sf = AddResidual(x, xf, kernel::FloatScratch<X>(sqBuf_), width);
      if constexpr (IsSameType<X, float>::value) {
        PipeBarrier<PIPE_V>();
        Mul(x, sf, sf, static_cast<uint32_t>(width));  // s's tile leaves as it is: x takes the squares
        sq = x;
      } else {
        PipeBarrier<PIPE_V>();
        Mul(xf, sf, sf, static_cast<uint32_t>(width));
      }
      CopyOutS(row, 1, col0, width);
    } else {
      PipeBarrier<PIPE_V>();
      Mul(xf, xf, xf, static_cast<uint32_t>(width));
    }
    PipeBarrier<PIPE_V>();
    ReduceSum(acc, sq, workBuf_.Get<float>(), static_cast<uint32_t>(width));
    PipeSync<HardEvent::V_S>();
    const LocalTensor<float> sums = sumsBuf_.Get<float>();
    const auto i = static_cast<uint32_t>(r);
    sums.SetValue(i, sums.GetValue(i) + acc.GetValue(0));
    inX_.FreeTensor(x);
  }

  void NormaliseChunk(float rstd, int64_t width) {
    LocalTensor<X> x = inX_.DeQue<X>();
    LocalTensor<X> y = outY_.AllocTensor<X>();
    const LocalTensor<float> xf = AsFloat(x, kernel::FloatScratch<X>(xfBuf_), width);
    const LocalTensor<float> yf = kernel::FloatTile(y, kernel::FloatScratch<X>(sqBuf_));
    PipeBarrier<PIPE_V>();
    Muls(yf, xf, rstd, static_cast<uint32_t>(width));
    Scale(yf, y, 1, width, width);
    outY_.EnQue(y);
    inX_.FreeTensor(x);
  }

  // ---- shared steps

  // rstd of n rows from their sums of squares (kernel::ScaledRstd; the mean of an empty row is 0).
  // Consumes sums.
  void Rstd(const LocalTensor<float>& rstd, const LocalTensor<float>& sums, int64_t n) {
    kernel::ScaledRstd(rstd, sums, scaleBuf_.Get<float>(), cols_, p_.eps, n);
  }

  // A row whose sum of squares overflowed float (values past ~2^64): summed again scaled by a
  // power of two that brings its largest magnitude into [0.5, 1). A row holding an infinity keeps
  // the infinite sum (rstd 0), as the reference does. `x` is the row as float, `scratch` a row.
  void RescaleRow(int64_t r, const LocalTensor<float>& x, const LocalTensor<float>& scratch) {
    const auto width = static_cast<uint32_t>(cols_);
    const LocalTensor<float> acc = accBuf_.Get<float>();
    PipeBarrier<PIPE_V>();
    Abs(scratch, x, width);
    PipeBarrier<PIPE_V>();
    ReduceMax(acc, scratch, workBuf_.Get<float>(), width);
    PipeSync<HardEvent::V_S>();
    const float largest = acc.GetValue(0);
    if (!kernel::IsFinite(largest)) return;
    const float scale = ScaleFor(largest);
    PipeBarrier<PIPE_V>();
    Muls(scratch, x, scale, width);
    PipeBarrier<PIPE_V>();
    Mul(scratch, scratch, scratch, width);
    PipeBarrier<PIPE_V>();
    ReduceSum(sumsBuf_.Get<float>()[static_cast<uint32_t>(r)], scratch, workBuf_.Get<float>(), width);
    PipeSync<HardEvent::V_S>();  // the next row's sum is read by the scalar unit
    scaleBuf_.Get<float>().SetValue(static_cast<uint32_t>(r), scale);
  }

  // The same for a split row: its chunks come in once for the largest magnitude, once for the
  // scaled squares (only overflowing rows pay the two extra reads).
  void RescaleSplitRow(int64_t row, int64_t r) {
    const LocalTensor<float> acc = accBuf_.Get<float>();
    const kernel::SplitRows walk = Walk();
    auto each_chunk = [&](auto&& f) {
      for (int64_t c = 0; c < walk.chunks; ++c) {
        CopyIn(row, 1, walk.start(c), walk.width(c), p_.fused);
        LocalTensor<X> x = inX_.DeQue<X>();
        f(AsFloat(x, kernel::FloatScratch<X>(xfBuf_), walk.width(c)), static_cast<uint32_t>(walk.width(c)));
        inX_.FreeTensor(x);
      }
    };
    if (p_.fused) PipeBarrier<PIPE_ALL>();  // s was written in this pass: MTE3 -> MTE2
    float largest = 0.0f;
    each_chunk([&](const LocalTensor<float>& xf, uint32_t width) {
      PipeBarrier<PIPE_V>();
      Abs(xf, xf, width);
      PipeBarrier<PIPE_V>();
      ReduceMax(acc, xf, workBuf_.Get<float>(), width);
      PipeSync<HardEvent::V_S>();
      largest = Std::max(largest, acc.GetValue(0));
    });
    if (!kernel::IsFinite(largest)) return;
    const float scale = ScaleFor(largest);
    float sum = 0.0f;
    each_chunk([&](const LocalTensor<float>& xf, uint32_t width) {
      PipeBarrier<PIPE_V>();
      Muls(xf, xf, scale, width);
      PipeBarrier<PIPE_V>();
      Mul(xf, xf, xf, width);
      PipeBarrier<PIPE_V>();
      ReduceSum(acc, xf, workBuf_.Get<float>(), width);
      PipeSync<HardEvent::V_S>();
      sum += acc.GetValue(0);
    });
    sumsBuf_.Get<float>().SetValue(static_cast<uint32_t>(r), sum);
    scaleBuf_.Get<float>().SetValue(static_cast<uint32_t>(r), scale);
  }

  static float ScaleFor(float largest) { return kernel::ScaleFor(largest); }

  // y = xhat * (offset + w) as the casting mode rounds it, then stored as X: xhat (yf, n rows of
  // `pitch`) is rounded to X first except under gemma; y is the X tile (its scratch for the
  // rounding).
  void Scale(const LocalTensor<float>& yf, const LocalTensor<X>& y, int64_t n, int64_t pitch,
             int64_t width) {
    const int64_t span = n * pitch;
    if (p_.mode != family::Mode::gemma) kernel::RoundTo(yf, y, span);
    if (p_.has_weight) {
      const LocalTensor<float> wf = wfBuf_.Get<float>();
      for (int64_t r = 0; r < n; ++r) {
        const auto off = static_cast<uint32_t>(r * pitch);
        PipeBarrier<PIPE_V>();
        Mul(yf[off], yf[off], wf, static_cast<uint32_t>(width));
      }
    }
    StoreFloat(y, yf, span);
  }

  void PrepareWeight(int64_t col0, int64_t width) {
    // A 16-bit weight goes through sq on its way to float (a float x has a float weight).
    if (p_.has_weight)
      kernel::PrepareScale(wfBuf_.Get<float>(), wGm_, kernel::FloatScratch<X>(sqBuf_), col0, width, p_.offset, p_.scale_round);
  }

  int64_t cols_ = 0;
  int64_t groupStart_ = 0;  // split rows: the first row of the statistics group in pass 1
  TQue<TPosition::VECIN, 2> inX_, inR_;
  TQue<TPosition::VECOUT, 2> outY_, outS_;
  LocalTensor<X> pendingS_;  // the fused op's s tile between AddResidual and CopyOutS
  TBuf<TPosition::VECCALC> xfBuf_, sqBuf_, wfBuf_, sumsBuf_, scaleBuf_, rstdBuf_, rstdBlocksBuf_, accBuf_, workBuf_;
  GlobalTensor<X> xGm_, yGm_, rGm_, sGm_;
  GlobalTensor<W> wGm_;
  GlobalTensor<float> rstdGm_;
};
// ascend-c: end

}  // namespace

void run_fwd(const family::RowNormFwd& d, const FwdPlan& plan, const KernelContext& ctx) {
  Emulator& emulator = emulator_in(ctx);
  const RowNormSizes s = sizes_of(d);
  FwdParams p;
  p.plan = plan.tiles;
  p.eps = static_cast<float>(d.eps);
  p.offset = static_cast<float>(d.offset);
  p.mode = d.mode;
  p.has_weight = s.has_weight;
  p.fused = s.fused;
  // casting none rounds (offset + w) to the weight's dtype, as the reference defines it (with an
  // f32 weight none equals llama).
  p.scale_round = d.mode == family::Mode::none ? s.w : family::Elem::f32;
  const std::string name = std::string(s.fused ? "fused_add_rms_norm" : "rms_norm") + "_fwd_" +
                           std::string(to_string(plan.impl));
  if (p.plan.block_dim == 0) {
    emulator.record(empty_launch(name, emulator));
    return;
  }
  const std::size_t xbytes = static_cast<std::size_t>(s.rows * s.cols) * elem_bytes(s.x);
  std::vector<GmArg> args{{"x", d.x, xbytes}, {"y", d.y, xbytes, true}, {"rstd", d.rstd, static_cast<std::size_t>(s.rows) * 4, true}};
  if (s.has_weight) args.push_back({"weight", d.weight, static_cast<std::size_t>(s.cols) * elem_bytes(s.w)});
  if (s.fused) {
    args.push_back({"residual", d.residual, xbytes});
    args.push_back({"s", d.s, xbytes, true});
  }
  kernel::launch<KernelRmsNorm>(emulator, name, p.plan.block_dim, args, s.x, s.w, p, gm_addr(d.x), gm_addr(d.residual),
                                gm_addr(d.weight), gm_addr(d.y), gm_addr(d.s), gm_addr(d.rstd));
}

}  // namespace opreg::npu::rms_norm
