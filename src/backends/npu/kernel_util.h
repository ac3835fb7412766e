// Building blocks the npu kernels share, written against the Ascend C device API: row tiles
// copied with one DataCopyPad (rows land 32-byte padded in UB), float views of 16-bit tiles, a
// float row rounded to a narrower type and back, GM zero fill. A kernel for another op reuses
// these rather than repeating the copy parameters.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/npu/ascend/kernel_operator.h"
#include "backends/npu/compensated.h"
#include "backends/npu/tiling.h"
#include "ops/families.h"

namespace opreg::npu::kernel {

// A value for a narrow DMA parameter field: refusing rather than wrapping, because a wrapped
// field (70000 rows in a uint16) would copy something else without any error. The emulator's
// check (host code): on the device this is the static_cast alone.
template <class Field>
Field field(const char* name, std::int64_t value) {
  if (value < 0 || static_cast<std::uint64_t>(value) > std::numeric_limits<Field>::max()) [[unlikely]] {
    npu::detail::kernel_fail(npu::detail::current(), std::string("DataCopyExtParams.") + name + " = " +
                                                         std::to_string(value) + " does not fit its field");
  }
  return static_cast<Field>(value);
}

// ascend-c: begin
using namespace AscendC;

// The synchronisation a kernel writes where data crosses pipes outside a queue: the target pipe
// of `event` waits here for everything its source pipe was issued so far (an eventID fetched
// from the pipe, raised and waited at once), e.g. PipeSync<HardEvent::V_S>() before GetValue of
// a vector result, PipeSync<HardEvent::MTE2_S>() before GetValue of copied-in data.
template <HardEvent event>
void PipeSync() {
  const auto id = static_cast<event_t>(GetTPipePtr()->FetchEventID(event));
  SetFlag<event>(id);
  WaitFlag<event>(id);
}

// Elements of T a tile row is padded to: rows of a tile start 32 bytes apart.
template <class T>
constexpr int64_t kRowAlign = 32 / static_cast<int64_t>(sizeof(T));

inline int64_t row_pitch(int64_t width, int64_t align) { return (width + align - 1) / align * align; }

// DataCopyPad's parameters for `rows` rows of `width` elements of T whose GM rows are `gm_pitch`
// elements apart (`gm_pitch` matters only for several rows): the GM gap is the source's stride
// copying in (`in`), the destination's copying out; UB rows land 32-byte padded.
template <class T>
DataCopyExtParams RowsParams(int64_t rows, int64_t width, int64_t gm_pitch, bool in) {
  const auto count = field<uint16_t>("blockCount", rows);
  const auto len = field<uint32_t>("blockLen", width * static_cast<int64_t>(sizeof(T)));
  const auto gap = field<uint32_t>(in ? "srcStride" : "dstStride",
                                   rows > 1 ? (gm_pitch - width) * static_cast<int64_t>(sizeof(T)) : 0);
  return {count, len, in ? gap : 0, in ? 0 : gap, 0};
}

// `rows` rows of `width` elements, row r at src[r * gm_pitch], into a tile of 32-byte padded rows.
template <class T>
void CopyRowsIn(const LocalTensor<T>& dst, const GlobalTensor<T>& src, int64_t rows, int64_t width,
                int64_t gm_pitch) {
  if (rows == 0 || width == 0) return;
  DataCopyPad(dst, src, RowsParams<T>(rows, width, gm_pitch, true), DataCopyPadExtParams<T>{});
}

// The inverse: a tile of 32-byte padded rows out to rows `gm_pitch` elements apart.
template <class T>
void CopyRowsOut(const GlobalTensor<T>& dst, const LocalTensor<T>& src, int64_t rows, int64_t width,
                 int64_t gm_pitch) {
  if (rows == 0 || width == 0) return;
  DataCopyPad(dst, src, RowsParams<T>(rows, width, gm_pitch, false));
}

// A tile copied in through queue `que` (allocated, filled by CopyRowsIn, enqueued), and the next
// tile of a queue copied out (dequeued, CopyRowsOut, freed).
template <class T, TPosition pos>
void QueueRowsIn(TQue<pos, 2>& que, const GlobalTensor<T>& src, int64_t rows, int64_t width, int64_t gm_pitch) {
  LocalTensor<T> t = que.template AllocTensor<T>();
  CopyRowsIn(t, src, rows, width, gm_pitch);
  que.EnQue(t);
}
template <class T, TPosition pos>
void QueueRowsOut(const GlobalTensor<T>& dst, TQue<pos, 2>& que, int64_t rows, int64_t width, int64_t gm_pitch) {
  LocalTensor<T> t = que.template DeQue<T>();
  CopyRowsOut(dst, t, rows, width, gm_pitch);
  que.FreeTensor(t);
}

// A float view of `n` elements of `src`: src itself when T is float, else src cast into `scratch`.
template <class T>
LocalTensor<float> AsFloat(const LocalTensor<T>& src, const LocalTensor<float>& scratch, int64_t n) {
  if constexpr (IsSameType<T, float>::value) {
    static_cast<void>(scratch);
    static_cast<void>(n);
    return src;
  } else {
    Cast(scratch, src, RoundMode::CAST_NONE, static_cast<uint32_t>(n));
    return scratch;
  }
}

// A float scratch tile that only kernels of a 16-bit T have: buf's tensor, or an empty one for
// float (which computes in its own tiles).
template <class T, TPosition pos>
LocalTensor<float> FloatScratch(TBuf<pos>& buf) {
  if constexpr (IsSameType<T, float>::value) {
    static_cast<void>(buf);
    return {};
  } else {
    return buf.template Get<float>();
  }
}

// The float tile a result of T is computed in: the output tile itself for float, else `scratch`.
template <class T>
LocalTensor<float> FloatTile(const LocalTensor<T>& out, const LocalTensor<float>& scratch) {
  if constexpr (IsSameType<T, float>::value) {
    static_cast<void>(scratch);
    return out;
  } else {
    static_cast<void>(out);
    return scratch;
  }
}

// v = T(v): rounds n floats to T and back through `tmp` (nothing for float).
template <class T>
void RoundTo(const LocalTensor<float>& v, const LocalTensor<T>& tmp, int64_t n) {
  if constexpr (!IsSameType<T, float>::value) {
    PipeBarrier<PIPE_V>();
    Cast(tmp, v, RoundMode::CAST_RINT, static_cast<uint32_t>(n));
    PipeBarrier<PIPE_V>();
    Cast(v, tmp, RoundMode::CAST_NONE, static_cast<uint32_t>(n));
  }
}

// v = elem(v) for an element type chosen at run time (f32: nothing), through `scratch` of n
// 16-bit values.
inline void RoundToElem(const LocalTensor<float>& v, const LocalTensor<float>& scratch, family::Elem elem, int64_t n) {
  if (elem == family::Elem::f16) RoundTo(v, scratch.ReinterpretCast<half>(), n);
  if (elem == family::Elem::bf16) RoundTo(v, scratch.ReinterpretCast<bfloat16_t>(), n);
}

// dst = T(src): casts into dst (for float, src must already be dst: the kernel computed in place).
template <class T>
void StoreFloat(const LocalTensor<T>& dst, const LocalTensor<float>& src, int64_t n) {
  if constexpr (!IsSameType<T, float>::value) {
    PipeBarrier<PIPE_V>();
    Cast(dst, src, RoundMode::CAST_RINT, static_cast<uint32_t>(n));
  } else {
    static_cast<void>(dst);
    static_cast<void>(src);
    static_cast<void>(n);
  }
}

// `width` elements of a GM row (from element col0) as floats into dst; `raw` is scratch of at
// least width elements of T when T is not float. Both are TBuf scratch the vector unit uses: the
// copy waits for its earlier work (V_MTE2) and the vector unit for the copy (MTE2_V).
template <class T>
void LoadRowAsFloat(const LocalTensor<float>& dst, const GlobalTensor<T>& src, int64_t col0, int64_t width,
                    const LocalTensor<float>& raw) {
  PipeSync<HardEvent::V_MTE2>();
  if constexpr (IsSameType<T, float>::value) {
    static_cast<void>(raw);
    CopyRowsIn(dst, src[static_cast<uint64_t>(col0)], 1, width, width);
    PipeSync<HardEvent::MTE2_V>();
  } else {
    const LocalTensor<T> narrow = raw.ReinterpretCast<T>();
    CopyRowsIn(narrow, src[static_cast<uint64_t>(col0)], 1, width, width);
    PipeSync<HardEvent::MTE2_V>();
    PipeBarrier<PIPE_V>();
    Cast(dst, narrow, RoundMode::CAST_NONE, static_cast<uint32_t>(width));
  }
}

// `count` zeros into GM from element 0 of dst, in DataCopyPad blocks, through `scratch` (a float
// tensor of at least 8 elements; zeroed here).
inline void ZeroGm(const GlobalTensor<float>& dst, int64_t count, const LocalTensor<float>& scratch) {
  const int64_t piece = Std::min<int64_t>(scratch.GetSize(), 16383) / 8 * 8;
  Duplicate(scratch, 0.0f, static_cast<uint32_t>(Std::min(piece, count)));
  PipeSync<HardEvent::V_MTE3>();
  for (int64_t at = 0; at < count; at += piece) {
    CopyRowsOut(dst[static_cast<uint64_t>(at)], scratch, 1, Std::min(piece, count - at), piece);
  }
  PipeSync<HardEvent::MTE3_V>();  // scratch is the vector unit's again
}

template <class T>
constexpr family::Elem elem_of() {
  if constexpr (IsSameType<T, float>::value) {
    return family::Elem::f32;
  } else if constexpr (IsSameType<T, half>::value) {
    return family::Elem::f16;
  } else {
    static_assert(IsSameType<T, bfloat16_t>::value, "npu kernels compute on float, half and bfloat16_t");
    return family::Elem::bf16;
  }
}

// wf = offset + w over columns [col0, col0 + width), as float, rounded to `round` (rms_norm's
// casting none); `scratch` holds the raw weight of a 16-bit dtype on the way.
template <class W>
void PrepareScale(const LocalTensor<float>& wf, const GlobalTensor<W>& w, const LocalTensor<float>& scratch,
                  int64_t col0, int64_t width, float offset, family::Elem round) {
  if (width == 0) return;
  LoadRowAsFloat(wf, w, col0, width, scratch);
  PipeBarrier<PIPE_V>();
  if (offset != 0.0f) Adds(wf, wf, offset, static_cast<uint32_t>(width));
  RoundToElem(wf, scratch, round, width);
}

// ---- scalar float arithmetic on the scalar unit, from the bits (no <cmath> on the device)
inline uint32_t FloatBits(float v) { return __builtin_bit_cast(uint32_t, v); }
inline float BitsFloat(uint32_t b) { return __builtin_bit_cast(float, b); }
inline bool IsNan(float v) { return v != v; }
inline bool IsFinite(float v) { return (FloatBits(v) & 0x7F800000U) != 0x7F800000U; }
inline bool IsInf(float v) { return (FloatBits(v) & 0x7FFFFFFFU) == 0x7F800000U; }
inline float Fabs(float v) { return BitsFloat(FloatBits(v) & 0x7FFFFFFFU); }
inline constexpr uint32_t kInfBits = 0x7F800000U;
// e with |v| = m * 2^e, m in [0.5, 1) (0 for 0): frexp's exponent, subnormals included.
inline int32_t ExponentOf(float v) {
  const uint32_t b = FloatBits(v) & 0x7FFFFFFFU;
  if (b == 0) return 0;
  const auto biased = static_cast<int32_t>(b >> 23);
  if (biased != 0) return biased - 126;
  int32_t top = 22;  // the highest set bit of a subnormal's mantissa: |v| = 2^top * 1.f * 2^-149
  while (((b >> top) & 1U) == 0) --top;
  return top - 148;
}
// 2^e exactly as float (ldexp(1.0f, e)): infinite above 127, subnormal below -126, 0 below -149.
inline float Pow2(int32_t e) {
  if (e > 127) return BitsFloat(kInfBits);
  if (e >= -126) return BitsFloat(static_cast<uint32_t>(e + 127) << 23);
  if (e >= -149) return BitsFloat(1U << (e + 149));
  return 0.0f;
}
// 2^-e for largest = m * 2^e, m in [0.5, 1): exact, and it brings largest below 1.
inline float ScaleFor(float largest) { return Pow2(-ExponentOf(largest)); }

// rstd[i] = scale[i] / sqrt(ss[i] / n + eps * scale[i]^2) for `count` statistics, where ss[i] is
// the sum of squares over n elements (of x for rms_norm, of x - mean for layer and group norm)
// scaled by scale[i]: 1, or the power of two that brought a sum that overflowed float back
// (ScaleFor). n = 0 gives 0 / n = 0. Consumes ss.
inline void ScaledRstd(const LocalTensor<float>& rstd, const LocalTensor<float>& ss, const LocalTensor<float>& scale,
                       int64_t n, float eps, int64_t count) {
  const auto c = static_cast<uint32_t>(count);
  PipeBarrier<PIPE_V>();
  Muls(rstd, ss, n == 0 ? 0.0f : 1.0f / static_cast<float>(n), c);
  PipeBarrier<PIPE_V>();
  Mul(ss, scale, scale, c);
  PipeBarrier<PIPE_V>();
  Muls(ss, ss, eps, c);
  PipeBarrier<PIPE_V>();
  Add(rstd, rstd, ss, c);
  PipeBarrier<PIPE_V>();
  Sqrt(rstd, rstd, c);
  PipeBarrier<PIPE_V>();
  Reciprocal(rstd, rstd, c);
  PipeBarrier<PIPE_V>();
  Mul(rstd, rstd, scale, c);
}

// Columns [first, first + count) of `cols` that part `part` of `parts` takes, in units of `unit`
// columns (512-byte pieces keep the parts on L2 lines): the split of a column reduction.
struct ColumnRange {
  int64_t first = 0;
  int64_t count = 0;
};
inline ColumnRange columns_of(int64_t cols, int64_t parts, int64_t part, int64_t unit) {
  const int64_t units = (cols + unit - 1) / unit;
  const int64_t q = units / parts;
  const int64_t extra = units % parts;
  const int64_t first = (part * q + Std::min(part, extra)) * unit;
  const int64_t end = Std::min(cols, first + (q + (part < extra ? 1 : 0)) * unit);
  return {Std::min(first, cols), Std::max<int64_t>(0, end - first)};
}

// The parameter-gradient reduction after SyncAll (rms_norm's dW, layer/group norm's dW and dB):
// each core takes its columns (columns_of) of the [parts x stride] float partials in a GM
// workspace and sums them in part order, `width` columns a step, into P. The same bits whatever
// order the blocks ran in. Compensated (f32 gradients): each partial is a (hi, lo) pair, the lo
// parts `lo_offset` floats after the hi parts, summed with TwoSum into a (hi, lo) pair that is
// added once at the end. The kernel resets its TPipe first: the reduction re-plans the UB
// (tiling.h's reduce_layout, which the plan sized `width` and `depth` from).
template <class P>
class ParamReduce {
 public:
  struct Partials {
    GlobalTensor<float> ws;     // the workspace
    int64_t first = 0;     // part 0's column 0
    int64_t parts = 1;     // summed in order 0, 1, ...
    int64_t stride = 0;    // floats from one part to the next
    int64_t lo_offset = -1;  // compensated: floats from a hi part to its lo part; -1: plain
  };

  ParamReduce(TPipe& pipe, bool compensated, int64_t width, int depth) : width_(width) {
    const ReduceLayout l = reduce_layout(elem_of<P>(), compensated);
    const TileShape s{1, width, 1, 1};
    const auto d = static_cast<uint8_t>(depth);
    pipe.InitBuffer(sumBuf_, static_cast<uint32_t>(item_bytes(l.acc, s)));
    pipe.InitBuffer(inPart_, d, static_cast<uint32_t>(item_bytes(l.in, s)));
    if (l.out.size != 0) pipe.InitBuffer(outP_, d, static_cast<uint32_t>(item_bytes(l.out, s)));
    if (compensated) {
      pipe.InitBuffer(loBuf_, static_cast<uint32_t>(item_bytes(l.lo, s)));
      pipe.InitBuffer(tmpBuf_, static_cast<uint32_t>(item_bytes(l.tmp, s)));
    }
  }

  // dst[c] for c in `mine`.
  void Run(const GlobalTensor<P>& dst, const Partials& in, ColumnRange mine) {
    const bool comp = in.lo_offset >= 0;
    const LocalTensor<float> sum = sumBuf_.Get<float>();
    const uint32_t pitch = static_cast<uint32_t>(row_pitch(width_, kRowAlign<float>));
    LocalTensor<float> lo, tmp[kSumTemps];
    if (comp) {
      lo = loBuf_.Get<float>();
      for (uint32_t i = 0; i < kSumTemps; ++i) tmp[i] = tmpBuf_.Get<float>()[i * pitch];
    }
    auto at = [&](int64_t k, int64_t c) { return static_cast<uint64_t>(in.first + k * in.stride + c); };
    for (int64_t c0 = mine.first; c0 < mine.first + mine.count; c0 += width_) {
      const int64_t width = Std::min(width_, mine.first + mine.count - c0);
      const auto n = static_cast<uint32_t>(width);
      PipeSync<HardEvent::V_MTE2>();     // the last step's sum was the vector unit's (Add, Cast)
      PipeSync<HardEvent::MTE3_MTE2>();  // or copied out
      CopyRowsIn(sum, in.ws[at(0, c0)], 1, width, width);
      if (comp) CopyRowsIn(lo, in.ws[at(0, c0) + static_cast<uint64_t>(in.lo_offset)], 1, width, width);
      PipeSync<HardEvent::MTE2_V>();  // part 0, the vector unit's to add to
      for (int64_t k = 1; k < in.parts; ++k) {
        LocalTensor<float> part = Fetch(in.ws[at(k, c0)], width);
        if (comp) {
          AddCompensated(sum, lo, part, tmp, n);
          inPart_.FreeTensor(part);
          part = Fetch(in.ws[at(k, c0) + static_cast<uint64_t>(in.lo_offset)], width);
          PipeBarrier<PIPE_V>();
          Add(lo, lo, part, n);
        } else {
          PipeBarrier<PIPE_V>();
          Add(sum, sum, part, n);
        }
        inPart_.FreeTensor(part);
      }
      PipeBarrier<PIPE_V>();
      if (comp) Add(sum, sum, lo, n);
      if constexpr (IsSameType<P, float>::value) {
        PipeSync<HardEvent::MTE2_MTE3>();  // one plain part: copied out unchanged
        PipeSync<HardEvent::V_MTE3>();
        CopyRowsOut(dst[static_cast<uint64_t>(c0)], sum, 1, width, width);
      } else {
        LocalTensor<P> out = outP_.template AllocTensor<P>();
        PipeBarrier<PIPE_V>();
        Cast(out, sum, RoundMode::CAST_RINT, n);
        outP_.EnQue(out);
        out = outP_.template DeQue<P>();
        CopyRowsOut(dst[static_cast<uint64_t>(c0)], out, 1, width, width);
        outP_.FreeTensor(out);
      }
    }
  }

 private:
  LocalTensor<float> Fetch(const GlobalTensor<float>& src, int64_t width) {
    LocalTensor<float> part = inPart_.template AllocTensor<float>();
    CopyRowsIn(part, src, 1, width, width);
    inPart_.EnQue(part);
    return inPart_.template DeQue<float>();
  }

  int64_t width_;
  TBuf<TPosition::VECCALC> sumBuf_, loBuf_, tmpBuf_;
  TQue<TPosition::VECIN, 2> inPart_;
  TQue<TPosition::VECOUT, 2> outP_;
};

// A kernel's entry (in Ascend C an extern "C" __global__ __aicore__ function of GM_ADDR
// arguments): the kernel type its class declares (Kernel::kType: KERNEL_TYPE_MIX_AIV_1_0 where it
// calls SyncAll) first, then the kernel object of the launch's parameters, Init with the GM
// arguments, Process.
template <class Kernel, class Params, class... Gm>
__global__ __aicore__ void KernelEntry(const Params& params, Gm... gm) {
  KERNEL_TASK_TYPE_DEFAULT(Kernel::kType);
  Kernel op(params);
  op.Init(gm...);
  op.Process();
}

// What a kernel over rows holds (the norm families' kernels, one base as Ascend C kernels share
// one): its launch's parameters, the tile shape its UB was planned at, its block and the rows the
// tiling gives that block, and its pipe.
template <class Params>
class RowKernel {
 protected:
  RowKernel(const Params& p, const Tiles& tiles)
      : p_(p), shape_(tiles.shape()), block_(GetBlockIdx()), range_(rows_of_block(tiles, block_)) {}

  Params p_;
  TileShape shape_;
  int64_t block_;
  RowRange range_;
  TPipe pipe_;
};

// A kernel's UB from its layout (tiling.h), as planned: InitUb(pipe, shape, depth, que, l.x, buf,
// l.y, ...) gives each queue `depth` buffers and each TBuf one, of its item's bytes at `shape`,
// and leaves out an absent item (size 0).
inline void InitUb(TPipe&, const TileShape&, int) {}
template <TPosition pos, class... Rest>
void InitUb(TPipe& pipe, const TileShape& shape, int depth, TBuf<pos>& buf, const UbItem& item, Rest&... rest);
template <TPosition pos, class... Rest>
void InitUb(TPipe& pipe, const TileShape& shape, int depth, TQue<pos, 2>& que, const UbItem& item, Rest&... rest) {
  if (item.size != 0) pipe.InitBuffer(que, static_cast<uint8_t>(depth), static_cast<uint32_t>(item_bytes(item, shape)));
  InitUb(pipe, shape, depth, rest...);
}
template <TPosition pos, class... Rest>
void InitUb(TPipe& pipe, const TileShape& shape, int depth, TBuf<pos>& buf, const UbItem& item, Rest&... rest) {
  if (item.size != 0) pipe.InitBuffer(buf, static_cast<uint32_t>(item_bytes(item, shape)));
  InitUb(pipe, shape, depth, rest...);
}

// Items 0..n-1, each a copy in and then a compute-and-copy-out. Double-buffered (depth 2), the
// copy in of item i + 1 is issued before item i's compute, so MTE2 overlaps that compute even
// when it stalls the scalar unit (a GetValue of a statistic); single-buffered, they alternate.
template <class In, class Body>
void Pipelined(int64_t n, int depth, In&& in, Body&& body) {
  for (int64_t i = 0; i < n; ++i) {
    if (depth < 2 || i == 0) in(i);
    if (depth >= 2 && i + 1 < n) in(i + 1);
    body(i);
  }
}

// A core's whole rows first .. first + count - 1 in tiles of per_tile rows (the last may have
// fewer): in(row0, rows) then body(row0, rows) for each tile, pipelined.
template <class In, class Body>
void RowTiles(int64_t first, int64_t count, int64_t per_tile, int depth, In&& in, Body&& body) {
  auto row0 = [&](int64_t t) { return first + t * per_tile; };
  auto rows = [&](int64_t t) { return Std::min(per_tile, count - t * per_tile); };
  Pipelined((count + per_tile - 1) / per_tile, depth, [&](int64_t t) { in(row0(t), rows(t)); },
            [&](int64_t t) { body(row0(t), rows(t)); });
}

// The walk of a kernel whose rows do not fit UB (TileMode::split_row): the core's rows are cut
// into BLOCK_SIZE_SUB chunks and walked twice. Pass 1 takes a group of rows at a time (as many as
// the statistics buffers hold), every chunk of every row of the group, so each row's statistic is
// complete at the group's end; pass 2 takes the chunks one by one and, in each, all the core's
// rows, so what belongs to a chunk (a weight slice, a dW partial) is loaded or kept once a core.
// The copies in of both passes are pipelined.
struct SplitRows {
  int64_t first = 0;  // the core's rows: first .. first + count - 1
  int64_t count = 0;
  int64_t group = 1;  // statistics rows held at once
  int64_t cols = 0;
  int64_t chunk = 0;  // BLOCK_SIZE_SUB
  int64_t chunks = 1;
  int depth = 1;

  int64_t groups() const { return (count + group - 1) / group; }
  int64_t start(int64_t c) const { return c * chunk; }
  int64_t width(int64_t c) const { return Std::min(chunk, cols - start(c)); }

  // For each group (its first row g0, gn rows): begin(g0, gn); then in(row, c) and body(r, c)
  // for every chunk c of every row g0 + r; then end(g0, gn).
  template <class Begin, class In, class Body, class End>
  void pass1(Begin&& begin, In&& in, Body&& body, End&& end) const {
    for (int64_t g0 = first; g0 < first + count; g0 += group) {
      const int64_t gn = Std::min(group, first + count - g0);
      begin(g0, gn);
      Pipelined(
          chunks * gn, depth, [&](int64_t i) { in(g0 + i % gn, i / gn); },
          [&](int64_t i) { body(i % gn, i / gn); });
      end(g0, gn);
    }
  }

  // For each chunk c: chunk_begin(c); for each row j of the core (j counts from 0), group_begin(
  // first + j, rows of the group) where a group starts, then in(first + j, c) and body(j, c);
  // chunk_end(c). A core without rows still begins and ends every chunk.
  template <class ChunkBegin, class GroupBegin, class In, class Body, class ChunkEnd>
  void pass2(ChunkBegin&& chunk_begin, GroupBegin&& group_begin, In&& in, Body&& body, ChunkEnd&& chunk_end) const {
    if (count == 0) {
      for (int64_t c = 0; c < chunks; ++c) {
        chunk_begin(c);
        chunk_end(c);
      }
      return;
    }
    Pipelined(
        chunks * count, depth, [&](int64_t i) { in(first + i % count, i / count); },
        [&](int64_t i) {
          const int64_t c = i / count;
          const int64_t j = i % count;
          if (j == 0) chunk_begin(c);
          if (j % group == 0) group_begin(first + j, Std::min(group, count - j));
          body(j, c);
          if (j == count - 1) chunk_end(c);
        });
  }
};

// ascend-c: end

// Host side of a launch: which instantiation of a kernel the problem's types select.
template <class T>
struct Tag {
  using type = T;
};

// Calls f(Tag<X>{}, Tag<W>{}) for an activation type x (f32, f16, bf16) and a weight type w
// that is x's or f32: one kernel instantiation per pair the ops accept.
template <class F>
void with_types(family::Elem x, family::Elem w, F&& f) {
  auto on_x = [&](auto xt) {
    if (w == family::Elem::f32) {
      f(xt, Tag<float>{});
    } else {
      f(xt, xt);
    }
  };
  switch (x) {
    case family::Elem::f32:
      return on_x(Tag<float>{});
    case family::Elem::f16:
      return on_x(Tag<half>{});
    case family::Elem::bf16:
      return on_x(Tag<bfloat16_t>{});
  }
}

// Runs kernel class Kernel<X, W> of the problem's types (with_types) on `blocks` blocks of the
// emulator: its entry with the launch's parameters and GM arguments.
template <template <class, class> class Kernel, class Params, class... Gm>
void launch(Emulator& emulator, const std::string& name, int64_t blocks, const std::vector<GmArg>& args,
            family::Elem x, family::Elem w, const Params& params, Gm... gm) {
  emulator.launch(name, blocks, args, [&] {
    with_types(x, w, [&](auto xt, auto wt) {
      KernelEntry<Kernel<typename decltype(xt)::type, typename decltype(wt)::type>>(params, gm...);
    });
  });
}

}  // namespace opreg::npu::kernel

namespace opreg::npu {
// A descriptor's pointer as a kernel's GM argument.
inline AscendC::GM_ADDR gm_addr(const void* p) { return static_cast<AscendC::GM_ADDR>(const_cast<void*>(p)); }
}  // namespace opreg::npu
