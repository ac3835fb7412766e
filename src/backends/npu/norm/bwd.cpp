// layer_norm / group_norm backward on the npu, per set (mean and rstd from the forward):
//   xhat = (x - mean) * rstd, g = w * dy, c1 = sum(xhat * g) / n, c2 = sum(g) / n,
//   dx = (g - (xhat * c1 + c2)) * rstd, dw += dy * xhat, db += dy (per element in row mode, per
//   channel in channel mode).
// Each core keeps float dW / dB partials in UB across its sets (row mode: the slice of columns in
// flight, sets summed 32 at a time into a block partial first; channel mode: all C channels),
// writes them once to a GM workspace [cores x params], and after SyncAll each core sums its share
// of the params over the partials in core order: no atomics, the same bits run to run. Sets too
// large for UB: pass 1 (groups of sets, piece by piece) the two coefficients, pass 2 piece by piece
// over all the core's sets dx and the partials, so a row-mode partial slice stays in UB while the
// core's sets pass. dy and x are read twice then.
#include <string>
#include <vector>

#include "backends/npu/norm/kernels.h"

namespace opreg::npu::norm {
namespace {

// ascend-c: begin
// The building blocks (kernel_util.h) and, through them, Ascend C's names.
using namespace kernel;
using namespace kernel_norm;

constexpr int64_t kSetsPerBlockPartial = 32;
constexpr int64_t kReduceUnit = 128;
constexpr int64_t kPiece = 8192;  // floats a DataCopyPad of a resident [C] array moves

struct BwdParams {
  NormPlan plan;
  NormSizes s;
  bool grads_w = false;
  bool grads_b = false;
  bool exact = false;      // row mode, f32 x: dW and dB as (hi, lo) pairs (compensated.h)
  int64_t ws_lo = 0;  // exact: floats from a hi partial to its lo partial
  int64_t ws_dw = 0;  // floats into the workspace: dW partials [cores x params]
  int64_t ws_db = 0;  // dB partials [cores x params]
  int64_t ws_c = 0;   // c1 [sets] then c2 [sets] (split sets in several groups)
  int64_t ws_floats = 0;
};

template <class X, class P>
class KernelNormGrad : public kernel::RowKernel<BwdParams> {
 public:
  static constexpr KernelMetaType kType = KERNEL_TYPE_MIX_AIV_1_0;  // SyncAll before the dW / dB reduction
  explicit KernelNormGrad(const BwdParams& p) : RowKernel(p, p.plan.tiles), s_(p.s) {}

  void Init(GM_ADDR dy, GM_ADDR x, GM_ADDR weight, GM_ADDR mean, GM_ADDR rstd, GM_ADDR dx, GM_ADDR dweight,
            GM_ADDR dbias, GM_ADDR workspace) {
    const Tiles& t = p_.plan.tiles;
    size_ = s_.size();
    params_ = s_.params();
    const auto elems = static_cast<uint64_t>(s_.sets * size_);
    dyGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(dy), elems);
    xGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(x), elems);
    dxGm_.SetGlobalBuffer(reinterpret_cast<__gm__ X*>(dx), elems);
    meanGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(mean), static_cast<uint64_t>(s_.sets));
    rstdGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(rstd), static_cast<uint64_t>(s_.sets));
    if (s_.has_weight) {
      wGm_.SetGlobalBuffer(reinterpret_cast<__gm__ P*>(weight), static_cast<uint64_t>(params_));
      dwGm_.SetGlobalBuffer(reinterpret_cast<__gm__ P*>(dweight), static_cast<uint64_t>(params_));
    }
    if (s_.has_bias) dbGm_.SetGlobalBuffer(reinterpret_cast<__gm__ P*>(dbias), static_cast<uint64_t>(params_));
    if (p_.ws_floats > 0) {
      wsGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(workspace), static_cast<uint64_t>(p_.ws_floats));
    }
    const BwdLayout l = bwd_layout(s_);
    InitUb(pipe_, shape_, t.depth, inDy_, l.dy, inX_, l.x, outDx_, l.dx, dyfBuf_, l.dyf, xfBuf_, l.xf, tBuf_, l.t, wfBuf_,
           l.wf, dwpBuf_, l.dwp, dwbBuf_, l.dwb, dbpBuf_, l.dbp, dbbBuf_, l.dbb, wcBuf_, l.wc, dwcBuf_, l.dwc, dbcBuf_,
           l.dbc, rawBuf_, l.p_raw, meanBuf_, l.mean, rstdBuf_, l.rstd, c1Buf_, l.c1, c2Buf_, l.c2, accBuf_, l.acc, workBuf_,
           l.work, exactBuf_, l.exact);
  }

  void Process() {
    if (s_.channel_mode()) {
      if (s_.has_weight) {
        const LocalTensor<float> raw = bwd_layout(s_).p_raw.size != 0 ? rawBuf_.Get<float>() : LocalTensor<float>{};
        LoadParams(wcBuf_.Get<float>(), wGm_, params_, raw);
      }
      if (p_.grads_w) Duplicate(dwcBuf_.Get<float>(), 0.0f, u32(params_));
      if (p_.grads_b) Duplicate(dbcBuf_.Get<float>(), 0.0f, u32(params_));
    }
    if (p_.plan.tiles.mode == TileMode::split_row) {
      ProcessPieces();
    } else {
      ProcessSets();
    }
    if (s_.channel_mode()) {
      if (p_.grads_w) FlushResident(dwcBuf_.Get<float>(), p_.ws_dw);
      if (p_.grads_b) FlushResident(dbcBuf_.Get<float>(), p_.ws_db);
    }
    if (!p_.grads_w && !p_.grads_b) return;
    SyncAll();
    ReduceParams();
  }

 private:
  uint64_t at(int64_t set, int64_t row = 0, int64_t col = 0) const {
    return static_cast<uint64_t>(set * size_ + row * p_.plan.row_len + col);
  }
  LocalTensor<float> Acc() { return accBuf_.Get<float>(); }
  LocalTensor<float> Work() { return workBuf_.Get<float>(); }

  // ---- whole sets
  void ProcessSets() {
    const int64_t R = p_.plan.dma_rows;
    const int64_t L = p_.plan.row_len;
    StartPartials(0, L);
    kernel::RowTiles(
        range_.first, range_.count, p_.plan.sets_per_tile, p_.plan.tiles.depth,
        [&](int64_t set0, int64_t n) { CopyIn(at(set0), n * R, L); },
        [&](int64_t set0, int64_t n) {
          CopyRowsIn(meanBuf_.Get<float>(), meanGm_[static_cast<uint64_t>(set0)], 1, n, n);
          CopyRowsIn(rstdBuf_.Get<float>(), rstdGm_[static_cast<uint64_t>(set0)], 1, n, n);
          PipeSync<HardEvent::MTE2_S>();  // mean and rstd, read by the scalar unit
          GradTile(set0, n);
          CopyOut(at(set0), n * R, L);
        });
    FlushPartials(0, L);
  }

  void CopyIn(uint64_t offset, int64_t rows, int64_t width) {
    QueueRowsIn(inDy_, dyGm_[offset], rows, width, p_.plan.row_len);
    QueueRowsIn(inX_, xGm_[offset], rows, width, p_.plan.row_len);
  }

  void CopyOut(uint64_t offset, int64_t rows, int64_t width) {
    QueueRowsOut(dxGm_[offset], outDx_, rows, width, p_.plan.row_len);
  }

  void GradTile(int64_t set0, int64_t n) {
    const int64_t R = p_.plan.dma_rows;
    const int64_t L = p_.plan.row_len;
    const int64_t pitch = shape_.pitch();
    const int64_t span = n * R * pitch;
    const Tile tile = TakeTile(span);
    const LocalTensor<float> dyf = tile.dyf;
    const LocalTensor<float> xf = tile.xf;
    const LocalTensor<float> dxf = tile.dxf;
    const LocalTensor<float> t = tBuf_.Get<float>();
    const LocalTensor<float> mean = meanBuf_.Get<float>();
    const LocalTensor<float> rstd = rstdBuf_.Get<float>();
    for (int64_t k = 0; k < n; ++k) {
      const auto base = u32(k * R * pitch);
      const float mu = mean.GetValue(u32(k));
      const float rs = rstd.GetValue(u32(k));
      ExactPartials(dyf[base], xf[base], t[base], L, mu, rs);
      Xhat(xf[base], R, pitch, mu, rs);
      Partials(dyf[base], xf[base], t[base], set0 + k, 0, R, L, pitch);
      float s1 = 0;
      float s2 = 0;
      GradSums(dyf[base], xf[base], t[base], set0 + k, 0, R, L, pitch, s1, s2);
      const float inv = size_ == 0 ? 0.0f : 1.0f / static_cast<float>(size_);
      Dx(dxf[base], dyf[base], xf[base], t[base], R, pitch, s1 * inv, s2 * inv, rs);
    }
    GiveTile(tile, span);
  }

  // A tile's dy and x taken from their queues and dx's tile allocated, as floats (dx computed in
  // dy's float tile); GiveTile stores dx and sends it out, freeing dy and x.
  struct Tile {
    LocalTensor<X> dy, x, dx;
    LocalTensor<float> dyf, xf, dxf;
  };
  Tile TakeTile(int64_t span) {
    Tile t;
    t.dy = inDy_.DeQue<X>();
    t.x = inX_.DeQue<X>();
    t.dx = outDx_.AllocTensor<X>();
    t.dyf = AsFloat(t.dy, kernel::FloatScratch<X>(dyfBuf_), span);
    t.xf = AsFloat(t.x, kernel::FloatScratch<X>(xfBuf_), span);
    t.dxf = kernel::FloatTile(t.dx, t.dyf);
    return t;
  }
  void GiveTile(const Tile& t, int64_t span) {
    StoreFloat(t.dx, t.dxf, span);
    outDx_.EnQue(t.dx);
    inDy_.FreeTensor(t.dy);
    inX_.FreeTensor(t.x);
  }

  // ---- pieces
  void ProcessPieces() {
    const Tiles& tl = p_.plan.tiles;
    const kernel::SplitRows walk{range_.first, range_.count, tl.stat_rows, 0, 0, p_.plan.pieces, tl.depth};
    const LocalTensor<float> mean = meanBuf_.Get<float>();
    const LocalTensor<float> rstd = rstdBuf_.Get<float>();
    const LocalTensor<float> c1 = c1Buf_.Get<float>();
    const LocalTensor<float> c2 = c2Buf_.Get<float>();
    const bool spill = walk.groups() > 1;
    const int64_t pitch = shape_.pitch();
    int64_t group0 = 0;
    auto in = [&](int64_t set, int64_t i) {
      const Piece pc = p_.plan.piece(i);
      CopyIn(at(set, pc.row0, pc.col0), pc.rows, pc.width);
    };
    walk.pass1(
        [&](int64_t g0, int64_t gn) {
          group0 = g0;
          PipeSync<HardEvent::MTE3_V>();  // the last group's c1 and c2 have left UB
          Duplicate(c1, 0.0f, u32(gn));
          Duplicate(c2, 0.0f, u32(gn));
          CopyRowsIn(mean, meanGm_[static_cast<uint64_t>(g0)], 1, gn, gn);
          CopyRowsIn(rstd, rstdGm_[static_cast<uint64_t>(g0)], 1, gn, gn);
          PipeSync<HardEvent::V_S>();     // c1 and c2 are accumulated on the scalar unit
          PipeSync<HardEvent::MTE2_S>();  // mean and rstd, read by it
        },
        in,
        [&](int64_t r, int64_t i) {
          const Piece pc = p_.plan.piece(i);
          if (r == 0 && !s_.channel_mode()) LoadRowWeight(pc.col0, pc.width);
          const int64_t span = pc.rows * pitch;
          LocalTensor<X> dy = inDy_.DeQue<X>();
          LocalTensor<X> x = inX_.DeQue<X>();
          const LocalTensor<float> dyf = AsFloat(dy, kernel::FloatScratch<X>(dyfBuf_), span);
          const LocalTensor<float> xf = AsFloat(x, kernel::FloatScratch<X>(xfBuf_), span);
          Xhat(xf, pc.rows, pitch, mean.GetValue(u32(r)), rstd.GetValue(u32(r)));
          float s1 = 0;
          float s2 = 0;
          GradSums(dyf, xf, tBuf_.Get<float>(), group0 + r, pc.row0, pc.rows, pc.width, pitch, s1, s2);
          c1.SetValue(u32(r), c1.GetValue(u32(r)) + s1);
          c2.SetValue(u32(r), c2.GetValue(u32(r)) + s2);
          inDy_.FreeTensor(dy);
          inX_.FreeTensor(x);
        },
        [&](int64_t g0, int64_t gn) {
          const float inv = size_ == 0 ? 0.0f : 1.0f / static_cast<float>(size_);
          PipeSync<HardEvent::S_V>();  // the sums the scalar unit set
          PipeBarrier<PIPE_V>();
          Muls(c1, c1, inv, u32(gn));
          PipeBarrier<PIPE_V>();
          Muls(c2, c2, inv, u32(gn));
          if (spill) {
            PipeSync<HardEvent::V_MTE3>();
            CopyRowsOut(wsGm_[static_cast<uint64_t>(p_.ws_c + g0)], c1, 1, gn, gn);
            CopyRowsOut(wsGm_[static_cast<uint64_t>(p_.ws_c + s_.sets + g0)], c2, 1, gn, gn);
          }
        });
    StatsPass2(
        walk, mean, rstd, meanGm_, rstdGm_,
        [&](int64_t i) {
          const Piece pc = p_.plan.piece(i);
          if (!s_.channel_mode()) StartPartials(pc.col0, pc.width);
        },
        [&](int64_t set, int64_t gn) {  // and the group's c1 and c2
          CopyRowsIn(c1, wsGm_[static_cast<uint64_t>(p_.ws_c + set)], 1, gn, gn);
          CopyRowsIn(c2, wsGm_[static_cast<uint64_t>(p_.ws_c + s_.sets + set)], 1, gn, gn);
        },
        in,
        [&](int64_t j, int64_t i) {
          const Piece pc = p_.plan.piece(i);
          const int64_t set = range_.first + j;
          const auto r = u32(j % walk.group);
          const int64_t span = pc.rows * pitch;
          const Tile tile = TakeTile(span);
          const LocalTensor<float> dyf = tile.dyf;
          const LocalTensor<float> xf = tile.xf;
          const LocalTensor<float> t = tBuf_.Get<float>();
          const float rs = rstd.GetValue(r);
          ExactPartials(dyf, xf, t, pc.width, mean.GetValue(r), rs);
          Xhat(xf, pc.rows, pitch, mean.GetValue(r), rs);
          Partials(dyf, xf, t, set, pc.row0, pc.rows, pc.width, pitch);
          Gradient(dyf, set, pc.row0, pc.rows, pc.width, pitch);
          Dx(tile.dxf, dyf, xf, t, pc.rows, pitch, c1.GetValue(r), c2.GetValue(r), rs);
          GiveTile(tile, span);
          CopyOut(at(set, pc.row0, pc.col0), pc.rows, pc.width);
        },
        [&](int64_t i) {
          const Piece pc = p_.plan.piece(i);
          if (!s_.channel_mode()) FlushPartials(pc.col0, pc.width);
        });
  }

  // ---- the steps, on `rows` DMA rows of `width` (`pitch` apart) from row0 of set `set`

  // xhat = (x - mean) * rstd, in x's float tile.
  void Xhat(const LocalTensor<float>& xf, int64_t rows, int64_t pitch, float mean, float rstd) {
    const uint32_t span = u32(rows * pitch);
    PipeBarrier<PIPE_V>();
    Adds(xf, xf, -mean, span);
    PipeBarrier<PIPE_V>();
    Muls(xf, xf, rstd, span);
  }

  // Row mode, f32 x: (dwp, dwb) += dy * xhat and (dbp, dbb) += dy exactly, from x before Xhat
  // (the terms of large rows cancel across the sets). A set whose rstd is not finite (or past
  // 2^63) adds its plain products into lo.
  void ExactPartials(const LocalTensor<float>& dyf, const LocalTensor<float>& xf, const LocalTensor<float>& t,
                     int64_t width, float mean, float rstd) {
    if (!p_.exact || width == 0) return;
    const kernel::ExactScratch ex(exactBuf_.Get<float>(), kernel::kExactNormTemps);
    if (p_.grads_w) {
      if (kernel::IsFinite(rstd) && kernel::Fabs(rstd) <= kernel::kExactBound && kernel::IsFinite(mean)) {
        kernel::AddNormProductExact(dwpBuf_.Get<float>(), dwbBuf_.Get<float>(), dyf, xf, mean, rstd, ex, width);
      } else {
        PipeBarrier<PIPE_V>();
        Adds(t, xf, -mean, u32(width));
        PipeBarrier<PIPE_V>();
        Muls(t, t, rstd, u32(width));
        PipeBarrier<PIPE_V>();
        Mul(t, t, dyf, u32(width));
        PipeBarrier<PIPE_V>();
        Add(dwbBuf_.Get<float>(), dwbBuf_.Get<float>(), t, u32(width));
      }
    }
    if (p_.grads_b) kernel::AddExact(dbpBuf_.Get<float>(), dbbBuf_.Get<float>(), dyf, ex, width);
  }

  // dW += dy * xhat, dB += dy into the core's partials (dy still raw).
  void Partials(const LocalTensor<float>& dyf, const LocalTensor<float>& xh, const LocalTensor<float>& t,
                int64_t set, int64_t row0, int64_t rows, int64_t width, int64_t pitch) {
    if ((!p_.grads_w && !p_.grads_b) || width == 0 || p_.exact) return;
    if (!s_.channel_mode()) {
      if (p_.grads_w) {
        PipeBarrier<PIPE_V>();
        Mul(t, dyf, xh, u32(width));
        PipeBarrier<PIPE_V>();
        Add(dwbBuf_.Get<float>(), dwbBuf_.Get<float>(), t, u32(width));
      }
      PipeBarrier<PIPE_V>();
      if (p_.grads_b) Add(dbbBuf_.Get<float>(), dbbBuf_.Get<float>(), dyf, u32(width));
      if (++block_sets_ == kSetsPerBlockPartial) FoldBlock(width);
      return;
    }
    const int64_t c0 = (set % s_.groups) * s_.channels + row0;
    PipeBarrier<PIPE_V>();
    if (p_.grads_w) Mul(t, dyf, xh, u32(rows * pitch));
    for (int64_t r = 0; r < rows; ++r) {
      const auto off = u32(r * pitch);
      const auto c = u32(c0 + r);
      if (p_.grads_w) {
        const float a = RowsSum(t[off], 1, width, pitch, Acc(), Work());
        dwcBuf_.Get<float>().SetValue(c, dwcBuf_.Get<float>().GetValue(c) + a);
      }
      if (p_.grads_b) {
        const float b = RowsSum(dyf[off], 1, width, pitch, Acc(), Work());
        dbcBuf_.Get<float>().SetValue(c, dbcBuf_.Get<float>().GetValue(c) + b);
      }
    }
  }

  // g = w * dy, in dy's float tile.
  void Gradient(const LocalTensor<float>& dyf, int64_t set, int64_t row0, int64_t rows,
                int64_t width, int64_t pitch) {
    if (!s_.has_weight || width == 0) return;
    if (!s_.channel_mode()) {
      PipeBarrier<PIPE_V>();
      Mul(dyf, dyf, wfBuf_.Get<float>(), u32(width));
      return;
    }
    const int64_t c0 = (set % s_.groups) * s_.channels + row0;
    for (int64_t r = 0; r < rows; ++r) {
      PipeBarrier<PIPE_V>();
      Muls(dyf[u32(r * pitch)], dyf[u32(r * pitch)], wcBuf_.Get<float>().GetValue(u32(c0 + r)), u32(width));
    }
  }

  // s1 += sum(xhat * g), s2 += sum(g); dy's float tile becomes g.
  void GradSums(const LocalTensor<float>& dyf, const LocalTensor<float>& xh, const LocalTensor<float>& t,
                int64_t set, int64_t row0, int64_t rows, int64_t width, int64_t pitch,
                float& s1, float& s2) {
    Gradient(dyf, set, row0, rows, width, pitch);
    if (width == 0) return;
    PipeBarrier<PIPE_V>();
    Mul(t, dyf, xh, u32(rows * pitch));
    s1 += RowsSum(t, rows, width, pitch, Acc(), Work());
    s2 += RowsSum(dyf, rows, width, pitch, Acc(), Work());
  }

  // dx = (g - (xhat * c1 + c2)) * rstd.
  void Dx(const LocalTensor<float>& dxf, const LocalTensor<float>& g, const LocalTensor<float>& xh,
          const LocalTensor<float>& t, int64_t rows, int64_t pitch, float c1, float c2, float rstd) {
    const uint32_t span = u32(rows * pitch);
    PipeBarrier<PIPE_V>();
    Muls(t, xh, c1, span);
    PipeBarrier<PIPE_V>();
    Adds(t, t, c2, span);
    PipeBarrier<PIPE_V>();
    Sub(dxf, g, t, span);
    PipeBarrier<PIPE_V>();
    Muls(dxf, dxf, rstd, span);
  }

  // ---- row mode's partial slices
  void StartPartials(int64_t col0, int64_t width) {
    if (s_.channel_mode()) return;
    LoadRowWeight(col0, width);
    if (width == 0) return;
    if (p_.grads_w) {
      Duplicate(dwpBuf_.Get<float>(), 0.0f, u32(width));
      Duplicate(dwbBuf_.Get<float>(), 0.0f, u32(width));
    }
    if (p_.grads_b) {
      Duplicate(dbpBuf_.Get<float>(), 0.0f, u32(width));
      Duplicate(dbbBuf_.Get<float>(), 0.0f, u32(width));
    }
    block_sets_ = 0;
  }

  void FoldBlock(int64_t width) {
    if (p_.grads_w) {
      PipeBarrier<PIPE_V>();
      Add(dwpBuf_.Get<float>(), dwpBuf_.Get<float>(), dwbBuf_.Get<float>(), u32(width));
      Duplicate(dwbBuf_.Get<float>(), 0.0f, u32(width));
    }
    if (p_.grads_b) {
      PipeBarrier<PIPE_V>();
      Add(dbpBuf_.Get<float>(), dbpBuf_.Get<float>(), dbbBuf_.Get<float>(), u32(width));
      Duplicate(dbbBuf_.Get<float>(), 0.0f, u32(width));
    }
    block_sets_ = 0;
  }

  // Exact: the hi partials (dwp, dbp) and their lo parts (dwb, dbb) ws_lo floats after them.
  void FlushPartials(int64_t col0, int64_t width) {
    if (s_.channel_mode() || width == 0) return;
    if (!p_.exact) FoldBlock(width);
    const auto row = static_cast<uint64_t>(block_ * params_ + col0);
    const auto lo = static_cast<uint64_t>(p_.ws_lo);
    PipeSync<HardEvent::V_MTE3>();  // the partials, vector results
    if (p_.grads_w) CopyRowsOut(wsGm_[static_cast<uint64_t>(p_.ws_dw) + row], dwpBuf_.Get<float>(), 1, width, width);
    if (p_.grads_b) CopyRowsOut(wsGm_[static_cast<uint64_t>(p_.ws_db) + row], dbpBuf_.Get<float>(), 1, width, width);
    if (p_.exact && p_.grads_w)
      CopyRowsOut(wsGm_[static_cast<uint64_t>(p_.ws_dw) + lo + row], dwbBuf_.Get<float>(), 1, width, width);
    if (p_.exact && p_.grads_b)
      CopyRowsOut(wsGm_[static_cast<uint64_t>(p_.ws_db) + lo + row], dbbBuf_.Get<float>(), 1, width, width);
    PipeSync<HardEvent::MTE3_V>();  // the partials are the vector unit's again (the next slice)
  }

  // v: channel partials the vector unit zeroed and the scalar unit accumulated.
  void FlushResident(const LocalTensor<float>& v, int64_t ws) {
    PipeSync<HardEvent::V_MTE3>();
    PipeSync<HardEvent::S_MTE3>();
    for (int64_t a = 0; a < params_; a += kPiece) {
      const int64_t w = Std::min(kPiece, params_ - a);
      CopyRowsOut(wsGm_[static_cast<uint64_t>(ws + block_ * params_ + a)], v[u32(a)], 1, w, w);
    }
  }

  void LoadRowWeight(int64_t col0, int64_t width) {
    if (!s_.has_weight || width == 0) return;
    kernel::LoadRowAsFloat(wfBuf_.Get<float>(), wGm_, col0, width, tBuf_.Get<float>());
  }

  // dweight[c] (dbias[c]) = the sum over cores k of the workspace's partial k, in k order, for
  // this core's share of the params; UB re-planned for it.
  void ReduceParams() {
    pipe_.Reset();
    const int64_t cores = p_.plan.tiles.block_dim;
    const kernel::ColumnRange mine = kernel::columns_of(params_, cores, block_, kReduceUnit);
    kernel::ParamReduce<P> reduce(pipe_, p_.exact, p_.plan.reduce.width, p_.plan.reduce.depth);
    const int64_t lo = p_.exact ? p_.ws_lo : -1;
    if (p_.grads_w) reduce.Run(dwGm_, {wsGm_, p_.ws_dw, cores, params_, lo}, mine);
    if (p_.grads_b) reduce.Run(dbGm_, {wsGm_, p_.ws_db, cores, params_, lo}, mine);
  }

  NormSizes s_;
  int64_t size_ = 0;
  int64_t params_ = 0;
  int64_t block_sets_ = 0;
  TQue<TPosition::VECIN, 2> inDy_, inX_;
  TQue<TPosition::VECOUT, 2> outDx_;
  TBuf<TPosition::VECCALC> dyfBuf_, xfBuf_, tBuf_, wfBuf_, dwpBuf_, dwbBuf_, dbpBuf_, dbbBuf_, wcBuf_, dwcBuf_, dbcBuf_,
      rawBuf_, meanBuf_, rstdBuf_, c1Buf_, c2Buf_, accBuf_, workBuf_, exactBuf_;
  GlobalTensor<X> dyGm_, xGm_, dxGm_;
  GlobalTensor<P> wGm_, dwGm_, dbGm_;
  GlobalTensor<float> meanGm_, rstdGm_, wsGm_;
};
// ascend-c: end

}  // namespace

void launch_bwd(const family::NormBwd& d, const NormSizes& s, const NormPlan& plan, Emulator& emulator,
                const KernelContext& ctx) {
  BwdParams p;
  p.plan = plan;
  p.s = s;
  p.grads_w = d.dweight != nullptr && s.params() > 0;
  p.grads_b = d.dbias != nullptr && s.params() > 0;
  const std::string name = std::string(s.layer ? "layer_norm" : "group_norm") + "_bwd_" +
                           std::string(to_string(plan.impl == Impl::gpu_port ? Impl::single_pass : plan.impl));
  if (plan.tiles.block_dim == 0 || (s.size() == 0 && !p.grads_w && !p.grads_b)) {
    emulator.record(empty_launch(name, emulator));
    return;
  }
  const std::int64_t cores = plan.tiles.block_dim;
  // The workspace (floats): dW partials [cores x params], dB's, each (exact) followed by its lo
  // parts, then the coefficients of split sets.
  p.exact = exact_params(s) && (p.grads_w || p.grads_b);
  const std::int64_t partials = (p.exact ? 2 : 1) * cores * s.params();
  p.ws_lo = cores * s.params();
  std::int64_t floats = 0;
  p.ws_dw = floats;
  if (p.grads_w) floats += partials;
  p.ws_db = floats;
  if (p.grads_b) floats += partials;
  p.ws_c = floats;
  if (plan.tiles.mode == TileMode::split_row && plan.tiles.stat_rows < plan.tiles.block_factor) floats += 2 * s.sets;
  p.ws_floats = floats;
  Workspace::Lease lease;
  if (floats > 0) lease = acquire_scratch(ctx, static_cast<std::size_t>(floats) * 4);
  const auto xbytes = static_cast<std::size_t>(s.sets * s.size()) * elem_bytes(s.x);
  const auto pbytes = static_cast<std::size_t>(s.params()) * elem_bytes(s.p);
  const auto sbytes = static_cast<std::size_t>(s.sets) * 4;
  std::vector<GmArg> args{{"dy", d.dy, xbytes},       {"x", d.x, xbytes},   {"mean", d.mean, sbytes},
                          {"rstd", d.rstd, sbytes},   {"dx", d.dx, xbytes, true}, {"workspace", lease.data(), lease.bytes()}};
  if (s.has_weight) args.push_back({"weight", d.weight, pbytes});
  if (d.dweight != nullptr) args.push_back({"dweight", d.dweight, pbytes, true});
  if (d.dbias != nullptr) args.push_back({"dbias", d.dbias, pbytes, true});
  kernel::launch<KernelNormGrad>(emulator, name, cores, args, s.x, s.p, p, gm_addr(d.dy), gm_addr(d.x), gm_addr(d.weight),
                                 gm_addr(d.mean), gm_addr(d.rstd), gm_addr(d.dx), gm_addr(d.dweight), gm_addr(d.dbias),
                                 gm_addr(lease.data()));
}

}  // namespace opreg::npu::norm
