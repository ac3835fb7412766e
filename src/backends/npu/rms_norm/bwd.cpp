// rms_norm backward on the npu (CANN's RmsNormGrad, deterministic mode):
//   w' = offset + w, m = dy * w', xhat = x * rstd, c = sum(m * xhat) / H,
//   dx = rstd * (m - c * xhat)   (= rstd * m - rstd^3 * sum(m * x) / H * x, without the cube,
//                                  which under- and overflows float for large x),
//   dw = sum over rows of dy * xhat (xhat rounded to x's dtype under llama and none).
// Each core keeps one float dW partial in UB across its whole row range (rows summed 32 at a time
// into a block partial, the blocks into the core's partial), writes it once to a GM workspace
// [cores x hidden], and after SyncAll each core sums its share of the columns over the partials
// in core order: the same bits whatever order the blocks ran in. Rows too long for UB are walked
// in BLOCK_SIZE_SUB chunks, columns outside and rows inside, so that a chunk's partial stays in UB
// while the core's rows pass. The atomic variant instead adds each partial into GM with MTE3's
// atomic-add mode (CANN's default): its float bits depend on the order the cores arrive.
// fused_add_rms_norm's backward is this one on s, with ds_out (the gradient into the new
// residual) added to dx before it is rounded, as the reference does.
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

// Rows summed into the block partial before it joins the core's partial: the float chains stay
// short however many rows a core has.
constexpr int64_t kRowsPerBlockPartial = 32;
// The column reduction hands out columns in 512-byte pieces.
constexpr int64_t kReduceUnit = 128;

struct BwdParams {
  Tiles plan;
  Impl impl = Impl::single_pass;
  float offset = 0;
  family::Mode mode = family::Mode::llama;
  bool has_weight = true;
  bool fused = false;  // ds_out is added to dx
  family::Elem scale_round = family::Elem::f32;
  bool exact = false;         // dW as (hi, lo) pairs (compensated.h)
  int64_t ws_lo = 0;     // floats into the workspace: the lo partials [cores x cols] (exact)
  int64_t ws_acc = 0;    // the atomic accumulator [cols]
  int64_t ws_coeff = 0;  // the coefficients of split rows in several groups [rows]
  int64_t ws_floats = 0;
  int64_t reduce_width = 0;  // columns a reduction step takes
  int reduce_depth = 2;
};

template <class X, class W>
class KernelRmsNormGrad : public kernel::RowKernel<BwdParams> {
 public:
  static constexpr KernelMetaType kType = KERNEL_TYPE_MIX_AIV_1_0;  // SyncAll before the dW reduction
  explicit KernelRmsNormGrad(const BwdParams& p) : RowKernel(p, p.plan) {}

  void Init(GM_ADDR dy, GM_ADDR ds, GM_ADDR x, GM_ADDR weight, GM_ADDR rstd, GM_ADDR dx, GM_ADDR dweight,
            GM_ADDR workspace) {
    const Tiles& plan = p_.plan;
    cols_ = plan.cols;
    const auto elems = static_cast<uint64_t>(plan.rows * cols_);
    dyGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(dy), elems);
    xGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(x), elems);
    dxGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(dx), elems);
    if (p_.fused) dsGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(ds), elems);
    rstdGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(rstd), static_cast<uint64_t>(plan.rows));
    if (p_.has_weight) {
      wGm_.SetGlobalBuffer(reinterpret_cast<__gm__ W*>(weight), static_cast<uint64_t>(cols_));
      dwGm_.SetGlobalBuffer(reinterpret_cast<__gm__ W*>(dweight), static_cast<uint64_t>(cols_));
    }
    if (p_.ws_floats > 0) {
      wsGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(workspace), static_cast<uint64_t>(p_.ws_floats));
    }
    const BwdLayout l = bwd_layout(kernel::elem_of<X>(), p_.has_weight, p_.fused);
    InitUb(pipe_, shape_, plan.depth, inDy_, l.dy, inDs_, l.ds, inX_, l.x, outDx_, l.dx, dyfBuf_, l.dyf, xfBuf_, l.xf,
           tBuf_, l.t, wfBuf_, l.wf, dwpBuf_, l.dwp, blkBuf_, l.blk, rstdBuf_, l.rstd, dotBuf_, l.dot, coeffBuf_, l.coeff,
           accBuf_, l.acc, workBuf_, l.work, exactBuf_, l.exact);
  }

  void Process() {
    const bool atomic = p_.impl == Impl::atomic && p_.has_weight;
    if (atomic) {
      // The accumulator starts at zero (block 0 clears it) before any core adds into it.
      if (block_ == 0) kernel::ZeroGm(AtomicTarget(), cols_, tBuf_.Get<float>());
      SyncAll();
    }
    if (p_.plan.mode == TileMode::split_row) {
      ProcessChunks();
    } else {
      ProcessRows();
    }
    if (!p_.has_weight) return;
    if (atomic && IsSameType<W, float>::value) return;  // the adds landed in dweight itself
    SyncAll();
    // After the barrier the partials (or the atomic sum) are complete: each core finishes its
    // share of dweight's columns.
    pipe_.Reset();
    kernel::ParamReduce<W> reduce(pipe_, p_.exact && !atomic, p_.reduce_width, p_.reduce_depth);
    typename kernel::ParamReduce<W>::Partials in{wsGm_, 0, p_.plan.block_dim, cols_, -1};
    if (atomic) {
      in.first = p_.ws_acc;
      in.parts = 1;
    } else if (p_.exact) {
      in.lo_offset = p_.ws_lo;
    }
    reduce.Run(dwGm_, in, kernel::columns_of(cols_, p_.plan.block_dim, block_, kReduceUnit));
  }

 private:
  uint64_t at(int64_t row, int64_t col = 0) const {
    return static_cast<uint64_t>(row * cols_ + col);
  }
  static uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

  GlobalTensor<float> AtomicTarget() {
    if constexpr (IsSameType<W, float>::value) {
      return dwGm_;
    } else {
      return wsGm_[static_cast<uint64_t>(p_.ws_acc)];
    }
  }

  // ---- whole rows
  void ProcessRows() {
    StartPartial(0, cols_);
    kernel::RowTiles(
        range_.first, range_.count, p_.plan.rows_per_tile, p_.plan.depth,
        [&](int64_t row0, int64_t n) { CopyIn(row0, n, 0, cols_, true); },
        [&](int64_t row0, int64_t n) {
          CopyRowsIn(rstdBuf_.Get<float>(), rstdGm_[static_cast<uint64_t>(row0)], 1, n, n);
          PipeSync<HardEvent::MTE2_S>();  // rstd is read by the scalar unit
          stat0_ = 0;
          Grad(n, shape_.pitch(), cols_, true);
          CopyOut(row0, n, 0, cols_);
        });
    FlushPartial(0, cols_);
  }

  // ---- split rows: pass 1 the coefficients, pass 2 dx and dW, chunk by chunk
  void ProcessChunks() {
    const Tiles& plan = p_.plan;
    const kernel::SplitRows walk{range_.first,        range_.count, plan.stat_rows, cols_,
                                 plan.block_size_sub, plan.chunks,  plan.depth};
    const LocalTensor<float> dot = dotBuf_.Get<float>();
    const LocalTensor<float> rstd = rstdBuf_.Get<float>();
    const LocalTensor<float> coeff = coeffBuf_.Get<float>();
    const bool spill = walk.groups() > 1;  // coefficients of several groups go through GM
    // Pass 1 needs no ds_out (it only forms the coefficients); pass 2 adds it to dx.
    auto in = [&](int64_t row, int64_t c) { CopyIn(row, 1, walk.start(c), walk.width(c), false); };
    auto in2 = [&](int64_t row, int64_t c) { CopyIn(row, 1, walk.start(c), walk.width(c), true); };
    walk.pass1(
        [&](int64_t g0, int64_t gn) {
          Duplicate(dot, 0.0f, u32(gn));
          CopyRowsIn(rstd, rstdGm_[static_cast<uint64_t>(g0)], 1, gn, gn);
          PipeSync<HardEvent::MTE2_S>();
        },
        in,
        [&](int64_t r, int64_t c) {
          if (r == 0) PrepareWeight(walk.start(c), walk.width(c));
          DotChunk(r, rstd.GetValue(u32(r)), walk.width(c));
        },
        [&](int64_t g0, int64_t gn) {
          PipeSync<HardEvent::S_V>();     // the dots the scalar unit summed
          PipeSync<HardEvent::MTE3_V>();  // the last group's coefficients have left UB
          Coeff(coeff, dot, gn);
          if (spill) {
            PipeSync<HardEvent::V_MTE3>();
            CopyRowsOut(wsGm_[static_cast<uint64_t>(p_.ws_coeff + g0)], coeff, 1, gn, gn);
          }
        });
    if (spill) PipeBarrier<PIPE_ALL>();  // the coefficients come back from GM: MTE3 -> MTE2
    walk.pass2([&](int64_t c) { StartPartial(walk.start(c), walk.width(c)); },
               [&](int64_t row, int64_t gn) {
                 if (!spill) return;
                 CopyRowsIn(rstd, rstdGm_[static_cast<uint64_t>(row)], 1, gn, gn);
                 CopyRowsIn(coeff, wsGm_[static_cast<uint64_t>(p_.ws_coeff + row)], 1, gn, gn);
                 PipeSync<HardEvent::MTE2_S>();
               },
               in2,
               [&](int64_t j, int64_t c) {
                 stat0_ = j % walk.group;
                 Grad(1, walk.width(c), walk.width(c), false);
                 CopyOut(range_.first + j, 1, walk.start(c), walk.width(c));
               },
               [&](int64_t c) { FlushPartial(walk.start(c), walk.width(c)); });
  }

  // dy and x, and ds_out where dx is formed (`with_ds`) for the fused op.
  void CopyIn(int64_t row0, int64_t n, int64_t col0, int64_t width, bool with_ds) {
    LocalTensor<X> dy = inDy_.AllocTensor<X>();
    LocalTensor<X> x = inX_.AllocTensor<X>();
    CopyRowsIn(dy, dyGm_[at(row0, col0)], n, width, cols_);
    CopyRowsIn(x, xGm_[at(row0, col0)], n, width, cols_);
    inDy_.EnQue(dy);
    inX_.EnQue(x);
    if (p_.fused && with_ds) {
      LocalTensor<X> ds = inDs_.AllocTensor<X>();
      CopyRowsIn(ds, dsGm_[at(row0, col0)], n, width, cols_);
      inDs_.EnQue(ds);
    }
  }

  void CopyOut(int64_t row0, int64_t n, int64_t col0, int64_t width) {
    LocalTensor<X> dx = outDx_.DeQue<X>();
    CopyRowsOut(dxGm_[at(row0, col0)], dx, n, width, cols_);
    outDx_.FreeTensor(dx);
  }

  // dot[r] += sum(dy * w' * xhat) over one chunk of a row (pass 1 of split rows), added on the
  // scalar unit (dot[r] is no 32-byte aligned vector operand).
  void DotChunk(int64_t r, float rstd, int64_t width) {
    LocalTensor<X> dy = inDy_.DeQue<X>();
    LocalTensor<X> x = inX_.DeQue<X>();
    const LocalTensor<float> dyf = AsFloat(dy, kernel::FloatScratch<X>(dyfBuf_), width);
    const LocalTensor<float> xf = AsFloat(x, kernel::FloatScratch<X>(xfBuf_), width);
    const LocalTensor<float> t = tBuf_.Get<float>();
    const LocalTensor<float> acc = accBuf_.Get<float>();
    PipeBarrier<PIPE_V>();
    Muls(xf, xf, rstd, u32(width));  // xhat, in x's float tile
    if (p_.has_weight) {
      PipeBarrier<PIPE_V>();
      Mul(t, dyf, wfBuf_.Get<float>(), u32(width));
      PipeBarrier<PIPE_V>();
      Mul(t, t, xf, u32(width));
    } else {
      PipeBarrier<PIPE_V>();
      Mul(t, dyf, xf, u32(width));
    }
    PipeBarrier<PIPE_V>();
    ReduceSum(acc, t, workBuf_.Get<float>(), u32(width));
    PipeSync<HardEvent::V_S>();
    const LocalTensor<float> dot = dotBuf_.Get<float>();
    dot.SetValue(u32(r), dot.GetValue(u32(r)) + acc.GetValue(0));
    inDy_.FreeTensor(dy);
    inX_.FreeTensor(x);
  }

  // dx (and the dW partial) for n rows of `width` columns `pitch` apart, their statistics at
  // stat0_ on. With `whole`, the rows are whole and their coefficients are computed here.
  void Grad(int64_t n, int64_t pitch, int64_t width, bool whole) {
    LocalTensor<X> dy = inDy_.DeQue<X>();
    LocalTensor<X> x = inX_.DeQue<X>();
    LocalTensor<X> dx = outDx_.AllocTensor<X>();
    const int64_t span = n * pitch;
    const LocalTensor<float> dyf = AsFloat(dy, kernel::FloatScratch<X>(dyfBuf_), span);
    const LocalTensor<float> xf = AsFloat(x, kernel::FloatScratch<X>(xfBuf_), span);
    const LocalTensor<float> t = tBuf_.Get<float>();
    const int64_t s0 = stat0_;
    const LocalTensor<float> rstd = rstdBuf_.Get<float>();
    const LocalTensor<float> coeff = coeffBuf_.Get<float>();
    auto row = [&](const LocalTensor<float>& v, int64_t r) { return v[u32(r * pitch)]; };
    // xhat = x * rstd, in x's float tile (x itself is not needed again).
    PipeBarrier<PIPE_V>();
    for (int64_t r = 0; r < n; ++r) Muls(row(xf, r), row(xf, r), rstd.GetValue(u32(s0 + r)), u32(width));
    if (p_.has_weight) {
      // dW: dy * xhat, xhat rounded to X first (not under gemma); dx's tile is the scratch.
      bool rounded = false;
      if constexpr (!IsSameType<X, float>::value) {
        if (p_.mode != family::Mode::gemma) {
          PipeBarrier<PIPE_V>();
          Cast(dx, xf, RoundMode::CAST_RINT, u32(span));
          PipeBarrier<PIPE_V>();
          Cast(t, dx, RoundMode::CAST_NONE, u32(span));
          PipeBarrier<PIPE_V>();
          Mul(t, t, dyf, u32(span));
          rounded = true;
        }
      }
      PipeBarrier<PIPE_V>();
      if (!rounded) Mul(t, xf, dyf, u32(span));
      const LocalTensor<float> blk = blkBuf_.Get<float>();
      if (p_.exact) {  // (dwp, blk) += dy * xhat exactly: the terms of large rows cancel
        const kernel::ExactScratch ex(exactBuf_.Get<float>());
        for (int64_t r = 0; r < n; ++r)
          kernel::AddProductExact(dwpBuf_.Get<float>(), blk, row(dyf, r), row(xf, r), row(t, r), ex, width);
      } else {
        for (int64_t r = 0; r < n; ++r) {
          PipeBarrier<PIPE_V>();
          Add(blk, blk, row(t, r), u32(width));
          if (++block_rows_ == kRowsPerBlockPartial) FoldBlock(width);
        }
      }
      // m = dy * w', in dy's float tile.
      const LocalTensor<float> wf = wfBuf_.Get<float>();
      PipeBarrier<PIPE_V>();
      for (int64_t r = 0; r < n; ++r) Mul(row(dyf, r), row(dyf, r), wf, u32(width));
    }
    if (whole) {
      const LocalTensor<float> dot = dotBuf_.Get<float>();
      PipeBarrier<PIPE_V>();
      Mul(t, dyf, xf, u32(span));
      PipeBarrier<PIPE_V>();
      for (int64_t r = 0; r < n; ++r) ReduceSum(dot[u32(r)], row(t, r), workBuf_.Get<float>(), u32(width));
      Coeff(coeff, dot, n);
    }
    PipeSync<HardEvent::V_S>();  // the coefficients, read by the scalar unit
    // dx = rstd * (m - c * xhat), in dx's tile for float, else in m's.
    const LocalTensor<float> dxf = kernel::FloatTile(dx, dyf);
    for (int64_t r = 0; r < n; ++r) {
      PipeBarrier<PIPE_V>();
      Muls(row(t, r), row(xf, r), coeff.GetValue(u32(s0 + r)), u32(width));
      PipeBarrier<PIPE_V>();
      Sub(row(dxf, r), row(dyf, r), row(t, r), u32(width));
      PipeBarrier<PIPE_V>();
      Muls(row(dxf, r), row(dxf, r), rstd.GetValue(u32(s0 + r)), u32(width));
    }
    if (p_.fused) {  // + ds_out, before dx is rounded (its float copy goes through t, free now)
      LocalTensor<X> ds = inDs_.DeQue<X>();
      const LocalTensor<float> dsf = AsFloat(ds, t, span);
      PipeBarrier<PIPE_V>();
      Add(dxf, dxf, dsf, u32(span));
      inDs_.FreeTensor(ds);
    }
    StoreFloat(dx, dxf, span);
    outDx_.EnQue(dx);
    inDy_.FreeTensor(dy);
    inX_.FreeTensor(x);
  }

  // c = dot / cols for n rows.
  void Coeff(const LocalTensor<float>& coeff, const LocalTensor<float>& dot, int64_t n) {
    PipeBarrier<PIPE_V>();
    Muls(coeff, dot, cols_ == 0 ? 0.0f : 1.0f / static_cast<float>(cols_), u32(n));
  }

  // ---- the dW partial of columns [col0, col0 + width)
  void StartPartial(int64_t col0, int64_t width) {
    PrepareWeight(col0, width);
    if (!p_.has_weight) return;
    Duplicate(dwpBuf_.Get<float>(), 0.0f, u32(width));
    Duplicate(blkBuf_.Get<float>(), 0.0f, u32(width));
    block_rows_ = 0;
  }

  void FoldBlock(int64_t width) {
    const LocalTensor<float> dwp = dwpBuf_.Get<float>();
    const LocalTensor<float> blk = blkBuf_.Get<float>();
    PipeBarrier<PIPE_V>();
    Add(dwp, dwp, blk, u32(width));
    Duplicate(blk, 0.0f, u32(width));
    block_rows_ = 0;
  }

  // The partial leaves UB once: into this core's workspace row (exact: hi and lo rows), or added
  // atomically (exact: hi + lo, one float).
  void FlushPartial(int64_t col0, int64_t width) {
    if (!p_.has_weight || width == 0) return;
    const bool atomic = p_.impl == Impl::atomic;
    if (!p_.exact || atomic) FoldBlock(width);
    const LocalTensor<float> dwp = dwpBuf_.Get<float>();
    PipeSync<HardEvent::V_MTE3>();
    const auto row = static_cast<uint64_t>(block_ * cols_ + col0);
    if (atomic) {
      SetAtomicAdd<float>();
      CopyRowsOut(AtomicTarget()[static_cast<uint64_t>(col0)], dwp, 1, width, width);
      SetAtomicNone();
    } else {
      CopyRowsOut(wsGm_[row], dwp, 1, width, width);
      if (p_.exact) CopyRowsOut(wsGm_[static_cast<uint64_t>(p_.ws_lo) + row], blkBuf_.Get<float>(), 1, width, width);
    }
    PipeSync<HardEvent::MTE3_V>();  // the next chunk's partial starts in the same buffer
  }

  void PrepareWeight(int64_t col0, int64_t width) {
    if (p_.has_weight)
      kernel::PrepareScale(wfBuf_.Get<float>(), wGm_, tBuf_.Get<float>(), col0, width, p_.offset, p_.scale_round);
  }

  int64_t cols_ = 0;
  int64_t stat0_ = 0;
  int64_t block_rows_ = 0;
  TQue<TPosition::VECIN, 2> inDy_, inDs_, inX_;
  TQue<TPosition::VECOUT, 2> outDx_;
  TBuf<TPosition::VECCALC> dyfBuf_, xfBuf_, tBuf_, wfBuf_, dwpBuf_, blkBuf_, rstdBuf_, dotBuf_, coeffBuf_, accBuf_,
      workBuf_, exactBuf_;
  GlobalTensor<X> dyGm_, dsGm_, xGm_, dxGm_;
  GlobalTensor<W> wGm_, dwGm_;
  GlobalTensor<float> rstdGm_, wsGm_;
};
// ascend-c: end

}  // namespace

void run_bwd(const family::RowNormBwd& d, const BwdPlan& plan, const KernelContext& ctx) {
  Emulator& emulator = emulator_in(ctx);
  const RowNormSizes s = sizes_of(d);
  const Impl impl = plan.impl;
  BwdParams p;
  p.plan = plan.tiles;
  p.impl = impl;
  p.offset = static_cast<float>(d.offset);
  p.mode = d.mode;
  p.has_weight = s.has_weight;
  p.fused = s.fused;
  p.scale_round = d.mode == family::Mode::none ? s.w : family::Elem::f32;  // as the forward's
  const std::string name =
      std::string(s.fused ? "fused_add_rms_norm" : "rms_norm") + "_bwd_" + std::string(to_string(impl));
  // Nothing to compute: no columns, or no rows and no dweight to clear.
  if (s.cols == 0 || (s.rows == 0 && !s.has_weight)) {
    emulator.record(empty_launch(name, emulator));
    return;
  }
  const std::int64_t cores = p.plan.block_dim;
  // The workspace (floats): the partials [cores x cols] (exact: their lo parts [cores x cols] after
  // them), then the atomic accumulator [cols] of a
  // 16-bit dweight, then the coefficients [rows] of split rows in several groups.
  p.exact = exact_dw(s.x, s.has_weight);
  std::int64_t floats = s.has_weight && impl != Impl::atomic ? cores * s.cols : 0;
  p.ws_lo = floats;
  if (p.exact && impl != Impl::atomic) floats += cores * s.cols;
  p.ws_acc = floats;
  if (s.has_weight && impl == Impl::atomic && s.w != family::Elem::f32) floats += s.cols;
  p.ws_coeff = floats;
  if (p.plan.mode == TileMode::split_row && p.plan.stat_rows < p.plan.block_factor) floats += s.rows;
  p.ws_floats = floats;
  p.reduce_width = plan.reduce.width;
  p.reduce_depth = plan.reduce.depth;
  Workspace::Lease lease;
  if (p.ws_floats > 0) lease = acquire_scratch(ctx, static_cast<std::size_t>(p.ws_floats) * 4);
  // The fused op's forward input is s; the descriptor and the kernel call it x.
  const std::size_t xbytes = static_cast<std::size_t>(s.rows * s.cols) * elem_bytes(s.x);
  const std::size_t wbytes = static_cast<std::size_t>(s.cols) * elem_bytes(s.w);
  std::vector<GmArg> args{{"dy", d.dy, xbytes},
                          {"x", d.x, xbytes},
                          {"rstd", d.rstd, static_cast<std::size_t>(s.rows) * 4},
                          {"dx", d.dx, xbytes, true},
                          {"workspace", lease.data(), lease.bytes()}};
  if (s.has_weight) {
    args.push_back({"weight", d.weight, wbytes});
    args.push_back({"dweight", d.dweight, wbytes, true});
  }
  if (s.fused) args.push_back({"ds_out", d.ds_out, xbytes});
  kernel::launch<KernelRmsNormGrad>(emulator, name, cores, args, s.x, s.w, p, gm_addr(d.dy), gm_addr(d.ds_out),
                                    gm_addr(d.x), gm_addr(d.weight), gm_addr(d.rstd), gm_addr(d.dx), gm_addr(d.dweight),
                                    gm_addr(lease.data()));
}

}  // namespace opreg::npu::rms_norm
