// rope, forward and backward, on the npu: each head's D elements turn in D/2 pairs (x1, x2) by
// the angle of their (b, t) position,
//   fwd (x1, x2) -> (x1 c - x2 s, x2 c + x1 s)     bwd: the same with s negated,
// computed in float and rounded once to x's dtype on the way out.
//
// The walk (plan.h): a core's positions in groups of one batch row; for each group and chunk of
// pairs, the cos and sin rows of its positions come in once (queues of the table's dtype: row
// positions[b, t] when position_ids are given, else the row at b * stride[0] + t * stride[1]) and
// are made the float angles every head at those positions uses: q's heads, then k's, a tile of
// `heads_per_tile` heads at a time, pipelined (the next tile, and the next group's table rows,
// copied in while the current one computes). A position whose row is outside the table is not
// read: its angles are NaN, so its outputs are.
//
// A tile holds its heads' runs one after another: x1 of every head at every position, then x2
// (half pairs (i, i + D/2): two runs a head, each row landing 32-byte aligned), or the pairs as
// they are (interleaved (2i, 2i + 1): one run). The angles are made over the same span (the
// group's rows once for each head of a tile: copies by Muls, doubling), so one instruction covers
// the tile:
//   o1 = x1 c - x2 s,  o2 = x2 c + x1 s          (Mul, Mul, Mul, Mul, Sub, Add)
// For interleaved pairs the vector unit has no lane shift, so Gather does the two moves across
// lanes: once a table tile it spreads each angle over its pair (c and s at lanes 2i and 2i + 1,
// from entry i or 2i of the row: the table's step), and a masked Muls signs s (-s at even lanes
// forward, at odd lanes backward); a tile then takes
//   o = x * c' + swap(x) * s'                    (Gather, Mul, Mul, Add)
// where swap exchanges the lanes of each pair (Gather with byte offsets (j ^ 1) * 4). The two
// offset tensors are built once a launch: eight by the scalar unit, the rest by doubling with
// Adds. An f32 x takes each output exactly instead (ExactTile, below).
//
// q, k and their outputs are read and written through their strides (the last dim contiguous):
// a tile's copy walks its positions (one DataCopyPad a head) or its heads (one a position),
// whichever gives the longer copies and has a GM gap DataCopyPad can express (else one copy a
// run). An output may be its input: a tile reads all its elements before it writes them, and
// tiles do not share elements. Where the tiles' copies of an in-place side are strided so that
// one copy's span reaches over another tile's elements (HF's transposed views walked by
// positions), MTE2 waits for MTE3 before each copy in: the emulator checks GM hazards by spans.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/npu/kernel_util.h"
#include "backends/npu/npu_backend.h"
#include "backends/npu/rope/plan.h"

namespace opreg::npu::rope {
namespace {

// What the kernel reads beside the plan (a CANN kernel's tiling struct): the descriptor's sizes
// and strides, in elements.
struct SideTiling {
  std::int64_t heads = 0;
  std::int64_t in_stride[3] = {};   // b, h, t
  std::int64_t out_stride[3] = {};  // b, h, t
  bool in_place = false;
};

struct RopeTiling {
  RopePlan plan;
  SideTiling side[2];  // q, k
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t dim = 0;
  std::int64_t table_rows = 0;
  std::int64_t table_step = 1;
  std::int64_t cos_stride[2] = {};
  std::int64_t sin_stride[2] = {};
  std::int64_t pos_stride[2] = {};
  bool gathered = false;  // position_ids given
  bool backward = false;
  // Elements of each GM argument the kernel may touch: q, k, cos, sin, position_ids, q_out, k_out.
  std::int64_t extent[7] = {};
};

// ascend-c: begin
// The building blocks (kernel_util.h) and, through them, Ascend C's names.
using namespace kernel;

constexpr uint32_t kQuietNan = 0x7FC00000U;

// ---- copies of runs of a tile

// Whether `count` runs of `len` elements `stride` apart fit one DataCopyPad: the gap between runs
// (bytes) within what the planner allows, the count within blockCount.
template <class T>
bool OneCopy(int64_t count, int64_t len, int64_t stride) {
  const int64_t gap = (stride - len) * static_cast<int64_t>(sizeof(T));
  return count == 1 || (count <= kMaxBlockCount && gap >= 0 && gap <= kMaxGmStride);
}

// DataCopyPad's parameters for `count` runs of `len` elements, GM runs `gm_stride` apart and UB
// runs `ub_stride` apart (a multiple of 32 bytes); `in`: GM -> UB.
template <class T>
DataCopyExtParams RunParams(int64_t count, int64_t len, int64_t gm_stride, int64_t ub_stride, bool in) {
  const int64_t bytes = len * static_cast<int64_t>(sizeof(T));
  const int64_t ub_gap = count > 1 ? (ub_stride * static_cast<int64_t>(sizeof(T)) - (bytes + 31) / 32 * 32) / 32 : 0;
  const int64_t gm_gap = count > 1 ? gm_stride * static_cast<int64_t>(sizeof(T)) - bytes : 0;
  const auto c = field<uint16_t>("blockCount", count);
  const auto l = field<uint32_t>("blockLen", bytes);
  const auto g = field<uint32_t>(in ? "srcStride" : "dstStride", gm_gap);
  const auto u = field<uint32_t>(in ? "dstStride" : "srcStride", ub_gap);
  return {c, l, in ? g : u, in ? u : g, 0};
}

// `count` runs: run i at gm[i * gm_stride] and ub[i * ub_stride], in one copy where it can be.
template <class T>
void RunsIn(const LocalTensor<T>& ub, const GlobalTensor<T>& gm, int64_t count, int64_t len, int64_t gm_stride,
            int64_t ub_stride) {
  if (count <= 0 || len <= 0) return;
  if (OneCopy<T>(count, len, gm_stride)) {
    DataCopyPad(ub, gm, RunParams<T>(count, len, gm_stride, ub_stride, true), DataCopyPadExtParams<T>{});
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    DataCopyPad(ub[static_cast<uint32_t>(i * ub_stride)], gm[static_cast<uint64_t>(i * gm_stride)],
                RunParams<T>(1, len, 0, 0, true), DataCopyPadExtParams<T>{});
  }
}

template <class T>
void RunsOut(const GlobalTensor<T>& gm, const LocalTensor<T>& ub, int64_t count, int64_t len, int64_t gm_stride,
             int64_t ub_stride) {
  if (count <= 0 || len <= 0) return;
  if (OneCopy<T>(count, len, gm_stride)) {
    DataCopyPad(gm, ub, RunParams<T>(count, len, gm_stride, ub_stride, false));
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    DataCopyPad(gm[static_cast<uint64_t>(i * gm_stride)], ub[static_cast<uint32_t>(i * ub_stride)],
                RunParams<T>(1, len, 0, 0, false));
  }
}

// ---- the walk

// One tile: heads h0 .. h0 + heads - 1 of one side at positions t0 .. t0 + rows - 1 of batch row
// b, pairs of one chunk. The first tile of a (group, chunk) brings its table rows in; the last
// lets them go.
struct Item {
  int64_t b = 0;
  int64_t t0 = 0;
  int64_t rows = 0;
  int64_t chunk = 0;
  int side = 0;
  int64_t h0 = 0;
  int64_t heads = 0;
  bool first = false;
  bool last = false;
};

class Walk {
 public:
  Walk(const RopeTiling& t, int64_t first, int64_t count) : t_(t), at_(first), end_(first + count) {
    first_side_ = t.side[0].heads > 0 ? 0 : 1;
    last_side_ = t.side[1].heads > 0 ? 1 : 0;
    Group();
  }

  bool Done() const { return at_ >= end_; }

  Item Get() const {
    Item it;
    it.b = at_ / t_.seq;
    it.t0 = at_ % t_.seq;
    it.rows = rows_;
    it.chunk = chunk_;
    it.side = side_;
    it.h0 = h0_;
    it.heads = Std::min(t_.plan.heads_per_tile, t_.side[side_].heads - h0_);
    it.first = side_ == first_side_ && h0_ == 0;
    it.last = side_ == last_side_ && h0_ + it.heads >= t_.side[side_].heads;
    return it;
  }

  void Next() {
    h0_ += t_.plan.heads_per_tile;
    if (h0_ < t_.side[side_].heads) return;
    h0_ = 0;
    if (side_ < last_side_) {
      side_ = last_side_;
      return;
    }
    side_ = first_side_;
    if (++chunk_ < t_.plan.chunks) return;
    chunk_ = 0;
    at_ += rows_;
    Group();
  }

  // Tiles in all (a walk of its own).
  static int64_t Count(const RopeTiling& t, int64_t first, int64_t count) {
    int64_t n = 0;
    for (Walk w(t, first, count); !w.Done(); w.Next()) ++n;
    return n;
  }

 private:
  // The group from at_: as many positions as the plan's group, within the core's range and the batch row.
  void Group() {
    if (Done()) return;
    rows_ = Std::min(Std::min(t_.plan.group, end_ - at_), t_.seq - at_ % t_.seq);
    side_ = first_side_;
    h0_ = 0;
    chunk_ = 0;
  }

  const RopeTiling& t_;
  int64_t at_;
  int64_t end_;
  int64_t rows_ = 0;
  int64_t chunk_ = 0;
  int side_ = 0;
  int64_t h0_ = 0;
  int first_side_ = 0;
  int last_side_ = 1;
};

// ---- the kernel

template <class X, class W>
class KernelRope {
 public:
  static constexpr KernelMetaType kType = KERNEL_TYPE_AIV_ONLY;

  explicit KernelRope(const RopeTiling& t) : t_(t), p_(t.plan) {}

  void Init(GM_ADDR q, GM_ADDR k, GM_ADDR cos, GM_ADDR sin, GM_ADDR pos, GM_ADDR q_out, GM_ADDR k_out) {
    Bind(inGm_[0], q, t_.extent[0]);
    Bind(inGm_[1], k, t_.extent[1]);
    Bind(cosGm_, cos, t_.extent[2]);
    Bind(sinGm_, sin, t_.extent[3]);
    if (t_.gathered && t_.extent[4] > 0) {
      posGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int64_t*>(pos), static_cast<uint64_t>(t_.extent[4]));
    }
    Bind(outGm_[0], q_out, t_.extent[5]);
    Bind(outGm_[1], k_out, t_.extent[6]);
    const RopeLayout l = layout(p_);
    InitUb(pipe_, shape_of(p_), p_.depth, inX_, l.x_in, outX_, l.x_out, inCos_, l.cos_raw, inSin_, l.sin_raw, xfBuf_,
           l.x_f32, cosBuf_, l.cos_f32, sinBuf_, l.sin_f32, t1Buf_, l.t1, t2Buf_, l.t2, spreadBuf_, l.spread, swapBuf_,
           l.swap, padBuf_, l.pad, partsBuf_, l.parts, exactBuf_, l.exact);
    for (int s = 0; s < 2; ++s) Nests(s);
    if (!Half()) {
      Offsets(spreadBuf_.Get<int32_t>(), false);
      Offsets(swapBuf_.Get<int32_t>(), true);
    }
  }

  void Process() {
    const RangeOf range = Range();
    Walk in(t_, range.first, range.count);
    Walk body(t_, range.first, range.count);
    Pipelined(
        Walk::Count(t_, range.first, range.count), p_.depth,
        [&](int64_t) {
          Load(in.Get());
          in.Next();
        },
        [&](int64_t) {
          const Item it = body.Get();
          Compute(it);
          Store(it);
          body.Next();
        });
  }

 private:
  struct RangeOf {
    int64_t first = 0;
    int64_t count = 0;
  };
  // The planner's contiguous partition of the positions.
  RangeOf Range() const {
    Tiles tiles;
    tiles.partition = Partition::contiguous;
    tiles.rows = p_.positions;
    tiles.block_dim = p_.block_dim;
    const RowRange r = rows_of_block(tiles, GetBlockIdx());
    return {r.first, r.count};
  }

  template <class T>
  static void Bind(GlobalTensor<T>& gm, GM_ADDR addr, int64_t extent) {
    if (extent > 0) gm.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(addr), static_cast<uint64_t>(extent));
  }

  bool Half() const { return p_.pairing == family::Pairing::half; }
  int64_t Pairs(int64_t chunk) const { return Std::min(p_.chunk, p_.pairs - chunk * p_.chunk); }
  // Elements of a head a tile row holds, and where the row's run s starts in the head.
  int64_t RunLen(int64_t chunk) const { return Half() ? Pairs(chunk) : 2 * Pairs(chunk); }
  int64_t RunAt(int64_t chunk, int64_t s) const {
    return Half() ? s * p_.pairs + chunk * p_.chunk : 2 * chunk * p_.chunk;
  }
  // Tile element (run s, head g, position r), from the tile's start: a run of every head of the
  // tile is one span of heads_per_tile x group rows, which one instruction covers.
  uint32_t TileAt(int64_t g, int64_t s, int64_t r) const {
    return static_cast<uint32_t>(((s * p_.heads_per_tile + g) * p_.group + r) * p_.pitch);
  }
  uint32_t Span() const { return static_cast<uint32_t>(p_.heads_per_tile * p_.group * p_.pitch); }

  // Whether a side's copies walking positions (by_pos) or heads reach only their own tile's
  // elements: a copy of several runs spans from its first run to its last, and the emulator
  // compares spans (a device checks nothing). Walking positions, each head's positions must lie
  // nested inside the head (and heads inside the batch row); walking heads, the reverse. Only an
  // in-place side reads what it wrote; where its copies' spans do not nest, MTE2 waits for MTE3
  // before the tile's copy in (Load).
  void Nests(int s) {
    const SideTiling& side = t_.side[s];
    const int64_t* st = side.in_stride;
    const bool one = t_.batch <= 1;
    nests_[s][1] = !side.in_place || (st[2] >= t_.dim && st[1] >= t_.seq * st[2] && (one || st[0] >= side.heads * st[1]));
    nests_[s][0] = !side.in_place || (st[1] >= t_.dim && st[2] >= side.heads * st[1] && (one || st[0] >= t_.seq * st[2]));
  }

  // A tile's copies walk its positions (one copy a head) or its heads (one a position): the more
  // runs a copy, where one copy takes them (RunsIn / RunsOut), the same way in and out.
  bool ByPositions(const Item& it, const int64_t* st) const {
    const int64_t len = RunLen(it.chunk);
    const bool pos_one = OneCopy<X>(it.rows, len, st[2]);
    const bool head_one = OneCopy<X>(it.heads, len, st[1]);
    return it.rows >= it.heads ? (pos_one || !head_one) : (pos_one && !head_one);
  }

  // A tile between GM and UB: each run s of each head g at each position r.
  void MoveTile(const LocalTensor<X>& ub, const GlobalTensor<X>& gm, const int64_t* st, const Item& it, bool in) const {
    const int64_t len = RunLen(it.chunk);
    const bool by_pos = ByPositions(it, st);
    for (int64_t s = 0; s < p_.segments; ++s) {
      const int64_t base = it.b * st[0] + it.h0 * st[1] + it.t0 * st[2] + RunAt(it.chunk, s);
      const int64_t outer = by_pos ? it.heads : it.rows;
      for (int64_t o = 0; o < outer; ++o) {
        const int64_t at = base + o * (by_pos ? st[1] : st[2]);
        const LocalTensor<X> u = ub[by_pos ? TileAt(o, s, 0) : TileAt(0, s, o)];
        const int64_t count = by_pos ? it.rows : it.heads;
        const int64_t gm_stride = by_pos ? st[2] : st[1];
        const int64_t ub_stride = by_pos ? p_.pitch : p_.group * p_.pitch;
        if (in) {
          RunsIn(u, gm[static_cast<uint64_t>(at)], count, len, gm_stride, ub_stride);
        } else {
          RunsOut(gm[static_cast<uint64_t>(at)], u, count, len, gm_stride, ub_stride);
        }
      }
    }
  }

  // ---- copy in: the table rows (with the first tile of a group and chunk), then the tile

  void Load(const Item& it) {
    if (it.first) LoadTables(it);
    LocalTensor<X> x = inX_.template AllocTensor<X>();
    const int64_t* st = t_.side[it.side].in_stride;
    const bool by_pos = ByPositions(it, st);
    const int64_t runs = by_pos ? it.rows : it.heads;  // a copy's runs (one: its span is itself)
    if (runs > 1 && !nests_[it.side][by_pos ? 1 : 0]) PipeSync<HardEvent::MTE3_MTE2>();
    MoveTile(x, inGm_[it.side], st, it, true);
    inX_.EnQue(x);
  }

  // The group's cos and sin rows of this chunk; a position whose row is outside the table is
  // counted (its angles become NaN when they are computed) and not read.
  void LoadTables(const Item& it) {
    LocalTensor<W> c = inCos_.template AllocTensor<W>();
    LocalTensor<W> s = inSin_.template AllocTensor<W>();
    const int64_t len = (Pairs(it.chunk) - 1) * t_.table_step + 1;  // through the chunk's last angle
    const int64_t at = it.chunk * p_.chunk * t_.table_step;
    int64_t bad = 0;
    if (!t_.gathered) {
      RunsIn(c, cosGm_[static_cast<uint64_t>(it.b * t_.cos_stride[0] + it.t0 * t_.cos_stride[1] + at)], it.rows, len,
             t_.cos_stride[1], p_.pitch);
      RunsIn(s, sinGm_[static_cast<uint64_t>(it.b * t_.sin_stride[0] + it.t0 * t_.sin_stride[1] + at)], it.rows, len,
             t_.sin_stride[1], p_.pitch);
    } else {
      for (int64_t r = 0; r < it.rows; ++r) {
        const int64_t row = Position(it, r);
        if (row < 0 || row >= t_.table_rows) {
          ++bad;
          continue;
        }
        const uint32_t u = static_cast<uint32_t>(r * p_.pitch);
        RunsIn(c[u], cosGm_[static_cast<uint64_t>(row * t_.cos_stride[1] + at)], 1, len, 0, p_.pitch);
        RunsIn(s[u], sinGm_[static_cast<uint64_t>(row * t_.sin_stride[1] + at)], 1, len, 0, p_.pitch);
      }
    }
    bad_[loads_++ % 2] = bad;
    inCos_.EnQue(c);
    inSin_.EnQue(s);
  }

  int64_t Position(const Item& it, int64_t r) const {
    return posGm_.GetValue(static_cast<uint64_t>(it.b * t_.pos_stride[0] + (it.t0 + r) * t_.pos_stride[1]));
  }

  // ---- compute

  // Whether the angles are made over the tile's span rather than being the float rows: spread
  // over interleaved pairs (an angle a pair), or copied for several heads a tile.
  bool Spreads() const { return !Half() || p_.heads_per_tile > 1; }

  void Compute(const Item& it) {
    if (it.first) Angles(it);
    LocalTensor<X> xin = inX_.template DeQue<X>();
    LocalTensor<X> xout = outX_.template AllocTensor<X>();
    const uint32_t tile = TileAt(0, p_.segments, 0);
    // A run's elements through the last head's last position (later rows of a short group are
    // computed on and never stored).
    const uint32_t n = static_cast<uint32_t>(((it.heads - 1) * p_.group + it.rows) * p_.pitch);
    PipeBarrier<PIPE_V>();
    const LocalTensor<float> x = AsFloat(xin, FloatScratch<X>(xfBuf_), tile);
    const LocalTensor<float> o = FloatTile(xout, x);  // 16-bit: computed over x's float copy
    if constexpr (IsSameType<X, float>::value) {
      ExactTile(x, o, n);
    } else {
      PlainTile(x, o, n);
    }
    StoreFloat(xout, o, tile);
    outX_.EnQue(xout);
    inX_.FreeTensor(xin);
    if (it.last) {
      inCos_.FreeTensor(cosRaw_);
      inSin_.FreeTensor(sinRaw_);
    }
  }

  // A 16-bit tile over its float copy (o is x): the products in float, rounded once on the way out.
  void PlainTile(const LocalTensor<float>& x, const LocalTensor<float>& o, uint32_t n) {
    const LocalTensor<float> t1 = t1Buf_.Get<float>();
    PipeBarrier<PIPE_V>();
    if (Half()) {
      const LocalTensor<float> t2 = t2Buf_.Get<float>();
      const LocalTensor<float> x1 = x, x2 = x[Span()];
      const LocalTensor<float> o1 = o, o2 = o[Span()];
      Mul(t1, x2, sin_, n);
      Mul(t2, x1, sin_, n);
      Mul(o1, x1, cos_, n);  // over x1 and x2 only after both products read them
      Mul(o2, x2, cos_, n);
      PipeBarrier<PIPE_V>();
      if (t_.backward) {
        Add(o1, o1, t1, n);
        Sub(o2, o2, t2, n);
      } else {
        Sub(o1, o1, t1, n);
        Add(o2, o2, t2, n);
      }
    } else {
      Gather(t1, x, swapBuf_.Get<uint32_t>(), 0, n);  // swap(x)
      Mul(o, x, cos_, n);
      PipeBarrier<PIPE_V>();
      Mul(t1, t1, sin_, n);
      PipeBarrier<PIPE_V>();
      Add(o, o, t1, n);
    }
  }

  // ---- f32: each output a x b +- c x d to about an ulp, also where the products nearly cancel
  // (large inputs): the vector unit has no fused multiply-add, so each product's rounding error
  // is recovered by Dekker's TwoProduct on Veltkamp's halves (compensated.h's Split) and added
  // back once: o = ((p +- q) + e_p) +- e_q. The error terms come from the operands clamped to
  // +-2^63 (finite halves and products; exact within the bound), the products themselves from
  // the operands as they are, so an infinity or NaN reaches the output as in plain arithmetic.

  // An operand with its clamped value and halves (v = the value, c = clamped, h + l = c).
  struct Parts {
    LocalTensor<float> v, c, h, l;
  };
  // Row k of the exact path's `buf` (parts or exact), in the second half of the bank groups
  // (`shifted`: 256 bytes into its 512-byte lines) or the first. The halves are chosen so that
  // the sources of every binary instruction of a tile differ: an operand's halves (h, l) and the
  // error sums (q, e, t) in the first, its clamped value (c) and the product scratch (u) in the
  // second; an angle's halves in the second and its clamped value in the first.
  LocalTensor<float> Row(const LocalTensor<float>& buf, int64_t k, bool shifted) const {
    return buf[static_cast<uint32_t>((k * exact_row_bytes(p_) + (shifted ? 256 : 0)) / 4)];
  }
  Parts PartsAt(const LocalTensor<float>& buf, const LocalTensor<float>& v, int64_t row, bool angle) const {
    return {v, Row(buf, row, !angle), Row(buf, row + 1, angle), Row(buf, row + 2, angle)};
  }
  LocalTensor<float> Scratch(int64_t k) { return Row(exactBuf_.Get<float>(), k, k == 9); }  // q, e, t, u: rows 6..9
  static void Prepare(const Parts& a, const LocalTensor<float>& tmp, uint32_t n) {
    Clamp(a.c, a.v, kExactBound, n);
    Split(a.h, a.l, a.c, tmp, n);
  }
  // e = a.c b.c - fl(a.c b.c), exactly (u scratch).
  static void ProductErr(const LocalTensor<float>& e, const Parts& a, const Parts& b, const LocalTensor<float>& u,
                         uint32_t n) {
    PipeBarrier<PIPE_V>();
    Mul(e, a.c, b.c, n);
    Mul(u, a.h, b.h, n);
    PipeBarrier<PIPE_V>();
    Sub(e, u, e, n);
    PipeBarrier<PIPE_V>();
    Mul(u, a.h, b.l, n);
    PipeBarrier<PIPE_V>();
    Add(e, e, u, n);
    PipeBarrier<PIPE_V>();
    Mul(u, a.l, b.h, n);
    PipeBarrier<PIPE_V>();
    Add(e, e, u, n);
    PipeBarrier<PIPE_V>();
    Mul(u, a.l, b.l, n);
    PipeBarrier<PIPE_V>();
    Add(e, e, u, n);
  }
  // o = a b + c d, or a b - c d with `minus`: summed in u (((p +- q) + e_p) +- e_q), then moved
  // to o (Muls by 1: a copy that keeps every bit).
  void DotTwo(const LocalTensor<float>& o, const Parts& a, const Parts& b, const Parts& c, const Parts& d, bool minus,
              uint32_t n) {
    const LocalTensor<float> q = Scratch(6), e = Scratch(7), t = Scratch(8), u = Scratch(9);
    PipeBarrier<PIPE_V>();
    Mul(q, c.v, d.v, n);
    ProductErr(e, a, b, u, n);
    ProductErr(t, c, d, u, n);
    PipeBarrier<PIPE_V>();
    Mul(u, a.v, b.v, n);
    PipeBarrier<PIPE_V>();
    if (minus) {
      Sub(u, u, q, n);
    } else {
      Add(u, u, q, n);
    }
    PipeBarrier<PIPE_V>();
    Add(u, u, e, n);
    PipeBarrier<PIPE_V>();
    if (minus) {
      Sub(u, u, t, n);
    } else {
      Add(u, u, t, n);
    }
    PipeBarrier<PIPE_V>();
    Muls(o, u, 1.0f, n);
  }

  // An f32 tile into o (the output tile).
  void ExactTile(const LocalTensor<float>& x, const LocalTensor<float>& o, uint32_t n) {
    const LocalTensor<float> buf = exactBuf_.Get<float>();
    const LocalTensor<float> u = Scratch(9);
    const Parts ca = PartsAt(partsBuf_.Get<float>(), cos_, 0, true);
    const Parts sa = PartsAt(partsBuf_.Get<float>(), sin_, 3, true);
    if (Half()) {
      const Parts x1 = PartsAt(buf, x, 0, false);
      const Parts x2 = PartsAt(buf, x[Span()], 3, false);
      Prepare(x1, u, n);
      Prepare(x2, u, n);
      DotTwo(o, x1, ca, x2, sa, !t_.backward, n);         // x1 c -+ x2 s
      DotTwo(o[Span()], x2, ca, x1, sa, t_.backward, n);  // x2 c +- x1 s
    } else {
      const LocalTensor<float> xs = t1Buf_.Get<float>();
      const Parts xp = PartsAt(buf, x, 0, false);
      const Parts sw = PartsAt(buf, xs, 3, false);
      PipeBarrier<PIPE_V>();
      Gather(xs, x, swapBuf_.Get<uint32_t>(), 0, n);  // swap(x); s is signed by lane
      Prepare(xp, u, n);
      Prepare(sw, u, n);
      DotTwo(o, xp, ca, sw, sa, false, n);
    }
  }

  // The float angles of a group and chunk, over the span of a tile (the group's rows once a head
  // of the tile): the rows themselves (float tables, half pairs, one head a tile), cast (16-bit
  // tables), or spread by Gather (interleaved pairs: with sin signed by lane; several heads a
  // tile: a copy of the rows a head). A position outside the table gets NaN rows first.
  void Angles(const Item& it) {
    cosRaw_ = inCos_.template DeQue<W>();
    sinRaw_ = inSin_.template DeQue<W>();
    const uint32_t rows = static_cast<uint32_t>(it.rows * p_.pitch);
    const bool bad = bad_[uses_++ % 2] != 0;
    cos_ = Angle(cosRaw_, cosBuf_, it, rows, bad);
    sin_ = Angle(sinRaw_, sinBuf_, it, rows, bad);
    const uint32_t n = Spreads() ? Span() : rows;
    if (!Half()) {
      // -s at the lanes whose partner is added: even lanes forward (o1 = x1 c - x2 s), odd backward.
      const uint64_t lanes[2] = {t_.backward ? 0xAAAAAAAAAAAAAAAAULL : 0x5555555555555555ULL, 0};
      const int64_t repeats = (static_cast<int64_t>(n) + 63) / 64;
      for (int64_t r0 = 0; r0 < repeats; r0 += 255) {
        PipeBarrier<PIPE_V>();
        const LocalTensor<float> at = sin_[static_cast<uint32_t>(r0 * 64)];
        Muls(at, at, -1.0f, lanes, static_cast<int32_t>(Std::min<int64_t>(255, repeats - r0)), UnaryRepeatParams{});
      }
    }
    if constexpr (IsSameType<X, float>::value) {  // the exact path's angles: clamped and split once
      const LocalTensor<float> u = Scratch(9);
      Prepare(PartsAt(partsBuf_.Get<float>(), cos_, 0, true), u, n);
      Prepare(PartsAt(partsBuf_.Get<float>(), sin_, 3, true), u, n);
    }
  }

  // One table's angles: its rows as float (the raw rows, or cast), NaN rows where the position is
  // outside the table; then for interleaved pairs spread over the pairs by Gather, and for
  // several heads a tile copied for every head (Muls by 1, doubling what is there).
  LocalTensor<float> Angle(const LocalTensor<W>& raw, TBuf<TPosition::VECCALC>& buf, const Item& it, uint32_t rows,
                           bool bad) {
    const bool spread = !Half();
    LocalTensor<float> f;
    PipeBarrier<PIPE_V>();
    if constexpr (IsSameType<W, float>::value) {
      f = raw;
    } else {
      f = spread ? t1Buf_.Get<float>() : buf.Get<float>();
      Cast(f, raw, RoundMode::CAST_NONE, rows);
    }
    if (bad) {
      for (int64_t r = 0; r < it.rows; ++r) {
        const int64_t row = Position(it, r);
        if (row >= 0 && row < t_.table_rows) continue;
        PipeBarrier<PIPE_V>();
        Duplicate(f[static_cast<uint32_t>(r * p_.pitch)], BitsFloat(kQuietNan), static_cast<uint32_t>(p_.pitch));
      }
    }
    if (!Spreads()) return f;
    const LocalTensor<float> out = buf.Get<float>();
    const uint32_t head = static_cast<uint32_t>(p_.group * p_.pitch);
    PipeBarrier<PIPE_V>();
    if (spread) {
      Gather(out, f, spreadBuf_.Get<uint32_t>(), 0, head);
    } else if constexpr (IsSameType<W, float>::value) {
      Muls(out, f, 1.0f, head);  // (a 16-bit table was cast into out's first head)
    }
    for (int64_t g = 1; g < p_.heads_per_tile; g *= 2) {
      PipeBarrier<PIPE_V>();
      Muls(out[static_cast<uint32_t>(g * head)], out, 1.0f, static_cast<uint32_t>(Std::min(g, p_.heads_per_tile - g) * head));
    }
    return out;
  }

  void Store(const Item& it) {
    LocalTensor<X> x = outX_.template DeQue<X>();
    MoveTile(x, outGm_[it.side], t_.side[it.side].out_stride, it, false);
    outX_.FreeTensor(x);
  }

  // The Gather offsets (bytes) of interleaved pairs: spread, over a table tile (group rows of
  // `pitch`), lane j of row r reads the row's entry (j / 2) * step (the pair's angle); swap, over a
  // tile's span (heads_per_tile x group rows), lane j reads lane j ^ 1 of its own row. The first
  // eight by the scalar unit, the rest by Adds doubling what is there: a row's lanes, then the rows.
  void Offsets(const LocalTensor<int32_t>& o, bool swap) {
    const int64_t step = t_.table_step;
    for (int32_t i = 0; i < 8; ++i) {
      o.SetValue(static_cast<uint32_t>(i), static_cast<int32_t>((swap ? (i ^ 1) : (i >> 1) * step) * 4));
    }
    PipeSync<HardEvent::S_V>();
    for (int64_t k = 8; k < p_.pitch; k *= 2) {
      PipeBarrier<PIPE_V>();
      const int64_t delta = swap ? k : (k / 2) * step;
      Adds(o[static_cast<uint32_t>(k)], o, static_cast<int32_t>(delta * 4),
           static_cast<uint32_t>(Std::min(k, p_.pitch - k)));
    }
    const int64_t rows = swap ? p_.heads_per_tile * p_.group : p_.group;
    for (int64_t r = 1; r < rows; r *= 2) {
      PipeBarrier<PIPE_V>();
      Adds(o[static_cast<uint32_t>(r * p_.pitch)], o, static_cast<int32_t>(r * p_.pitch * 4),
           static_cast<uint32_t>(Std::min(r, rows - r) * p_.pitch));
    }
  }

  const RopeTiling& t_;
  const RopePlan& p_;
  bool nests_[2][2] = {};  // [side][walking positions]
  int64_t bad_[2] = {};
  int64_t loads_ = 0;
  int64_t uses_ = 0;
  TPipe pipe_;
  TQue<TPosition::VECIN, 2> inX_, inCos_, inSin_;
  TQue<TPosition::VECOUT, 2> outX_;
  TBuf<TPosition::VECCALC> xfBuf_, cosBuf_, sinBuf_, t1Buf_, t2Buf_, spreadBuf_, swapBuf_, padBuf_, partsBuf_, exactBuf_;
  LocalTensor<W> cosRaw_, sinRaw_;
  LocalTensor<float> cos_, sin_;
  GlobalTensor<X> inGm_[2], outGm_[2];
  GlobalTensor<W> cosGm_, sinGm_;
  GlobalTensor<int64_t> posGm_;
};
// ascend-c: end

// Elements from a tensor's first to its last one, by sizes and strides ([b, h, t] then a run of len).
std::int64_t extent(const std::int64_t (&stride)[3], std::int64_t batch, std::int64_t heads, std::int64_t seq,
                    std::int64_t len) {
  if (batch == 0 || heads == 0 || seq == 0) return 0;
  return (batch - 1) * stride[0] + (heads - 1) * stride[1] + (seq - 1) * stride[2] + len;
}

RopeTiling tiling_of(const family::Rope& d, const RopePlan& plan) {
  RopeTiling t;
  t.plan = plan;
  const family::RopeSide* sides[2] = {&d.q, &d.k};
  for (int s = 0; s < 2; ++s) {
    const family::RopeSide& in = *sides[s];
    SideTiling& out = t.side[s];
    out.heads = in.heads;
    for (int i = 0; i < 3; ++i) {
      out.in_stride[i] = in.in_stride[i];
      out.out_stride[i] = in.out_stride[i];
    }
    out.in_place = in.in == in.out;
    t.extent[s] = extent(out.in_stride, d.batch, in.heads, d.seq, d.dim);
    t.extent[5 + s] = extent(out.out_stride, d.batch, in.heads, d.seq, d.dim);
  }
  t.batch = d.batch;
  t.seq = d.seq;
  t.dim = d.dim;
  t.table_rows = d.table_rows;
  t.table_step = d.table_step;
  t.gathered = d.positions != nullptr;
  t.backward = d.backward;
  for (int i = 0; i < 2; ++i) {
    t.cos_stride[i] = d.cos_stride[i];
    t.sin_stride[i] = d.sin_stride[i];
    t.pos_stride[i] = d.pos_stride[i];
  }
  // The table entries a row is read up to: pair D/2 - 1's at (D/2 - 1) * step.
  const std::int64_t entries = (d.dim / 2 - 1) * d.table_step + 1;
  if (t.gathered) {
    t.extent[2] = d.table_rows == 0 ? 0 : (d.table_rows - 1) * d.cos_stride[1] + entries;
    t.extent[3] = d.table_rows == 0 ? 0 : (d.table_rows - 1) * d.sin_stride[1] + entries;
    t.extent[4] = (d.batch - 1) * d.pos_stride[0] + (d.seq - 1) * d.pos_stride[1] + 1;
  } else {
    t.extent[2] = (d.batch - 1) * d.cos_stride[0] + (d.seq - 1) * d.cos_stride[1] + entries;
    t.extent[3] = (d.batch - 1) * d.sin_stride[0] + (d.seq - 1) * d.sin_stride[1] + entries;
  }
  return t;
}

}  // namespace

void run(const family::Rope& d, const RopePlan& plan, const KernelContext& ctx) {
  Emulator& emulator = emulator_in(ctx);
  const std::string name = std::string(d.backward ? "rope_bwd_" : "rope_fwd_") + std::string(to_string(plan.impl));
  if (plan.block_dim == 0 || d.q.heads + d.k.heads == 0) return emulator.record(empty_launch(name, emulator));
  const RopeTiling t = tiling_of(d, plan);
  const std::size_t xs = elem_bytes(d.type);
  const std::size_t ws = elem_bytes(d.table_type);
  auto bytes = [&](int i, std::size_t elem) { return static_cast<std::size_t>(t.extent[i]) * elem; };
  std::vector<GmArg> args;
  if (t.extent[0] > 0) args.push_back({"q", d.q.in, bytes(0, xs)});
  if (t.extent[1] > 0) args.push_back({"k", d.k.in, bytes(1, xs)});
  if (t.extent[2] > 0) args.push_back({"cos", d.cos, bytes(2, ws)});
  if (t.extent[3] > 0) args.push_back({"sin", d.sin, bytes(3, ws)});
  if (t.gathered) args.push_back({"position_ids", d.positions, bytes(4, sizeof(std::int64_t))});
  if (t.extent[5] > 0) args.push_back({"q_out", d.q.out, bytes(5, xs), true});
  if (t.extent[6] > 0) args.push_back({"k_out", d.k.out, bytes(6, xs), true});
  kernel::launch<KernelRope>(emulator, name, plan.block_dim, args, d.type, d.table_type, t, gm_addr(d.q.in),
                             gm_addr(d.k.in), gm_addr(d.cos), gm_addr(d.sin), gm_addr(d.positions), gm_addr(d.q.out),
                             gm_addr(d.k.out));
}

}  // namespace opreg::npu::rope
