// What every cpu kernel shares, compiled once per instruction set (see elem.h): running items on
// the team, carving the call's scratch, row splits, checked chunk sums, parameter vectors in f32
// and the per-item partials of parameter gradients.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstring>

#include "backends/cpu/vec.h"

namespace opreg::cpu::OPREG_CPU_NS {

// f(item, slot) for every item in [0, items), on the call's team.
// Each item ends with a store fence, so that its streaming stores (elem.h) are visible before the
// pool reports the item done.
template <class F>
void for_items(const Exec& e, i64 items, const F& f) {
  if (items <= 0) return;
  e.run(
      e.team, items,
      [](void* job, i64 item, int slot) {
        (*static_cast<const F*>(job))(item, slot);
        stream_fence();
      },
      const_cast<F*>(&f));
}

// Outputs at least this large are written around the caches: they would not stay cached anyway,
// and a cached store first reads each line it writes.
constexpr i64 kStreamBytes = 4 << 20;

// The call's one scratch block, handed out in 64-byte aligned pieces: sizes are added up with
// a null base first (Carve{}), then the same takes run on the block.
class Carve {
 public:
  Carve() = default;
  explicit Carve(void* base) : base_(static_cast<char*>(base)) {}
  template <class T>
  T* take(i64 count) {
    T* p = base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + used_);
    used_ += (static_cast<std::size_t>(count) * sizeof(T) + 63) / 64 * 64;
    return p;
  }
  std::size_t bytes() const { return used_; }

 private:
  char* base_ = nullptr;
  std::size_t used_ = 0;
};

// Contiguous ranges of `count` (rows or sets) as items: at least `team` items when there are
// enough, each of about kItemWork elements, at most max_items. A function of the problem and the
// team only, so that which rows share an item (and a parameter-gradient partial) never depends on
// which thread ran it.
struct Split {
  i64 items = 0;
  i64 per_item = 1;
  i64 begin(i64 item) const { return item * per_item; }
  i64 end(i64 item, i64 count) const { return min_of(count, (item + 1) * per_item); }
};
inline Split split(i64 count, i64 work_each, int team, i64 max_items) {
  Split s;
  if (count <= 0) return s;
  i64 items = 1;
  if (team > 1) {
    const i64 by_work = (count * max_of<i64>(work_each, 1) + kItemWork - 1) / kItemWork;
    items = min_of(count, min_of(max_items, max_of<i64>(team, by_work)));
  }
  s.per_item = (count + items - 1) / items;
  s.items = (count + s.per_item - 1) / s.per_item;
  return s;
}

// ---- Sums over a chunk: kLanes f32 accumulators, and a double re-run of the chunk when the f32
// sum left the range where it is accurate (an overflow, e.g. squares of |x| ~ 1e20, or, with
// `tiny` > 0, a sum so small that its terms may have underflowed). The order is fixed by n alone.
// A term is a struct with `float operator()(i)`, `Lanes lanes(i)` (the terms i to i + kLanes - 1)
// and `double wide(i)`; its operands are readers (elem.h's In) or float pointers.
//
// The accumulators are one vector value (GCC's vector extension: two AVX2 registers, four SSE or
// NEON ones) and the terms are loaded as vectors: written as an array of kLanes floats indexed
// in an inner loop, GCC 12 vectorised the row loop across lanes instead, with a shuffle and a
// scalar add per term (8.7 instructions an element for layer_norm bwd's two sums). Lane l still
// adds terms l, l + kLanes, ..., and the tail and the pairwise fold are as before: the same bits.

OPREG_CPU_INLINE Lanes lanes_of(const float* p, i64 i) {
  Lanes v;
  for (int k = 0; k < Lanes::kRegs; ++k) std::memcpy(&v.r[k], p + i + k * kVec, sizeof(VecF));
  return v;
}
template <class X>
OPREG_CPU_INLINE Lanes lanes_of(const In<X>& r, i64 i) {
  if constexpr (kBuffered<X>) {
    return lanes_of(r.buf, i);
  } else {
    return load16<X>(r.p + i);
  }
}

// Readers computed from readers, as f32 values: a[i] * b[i] and a[i] - m (lanes_of of each
// computes kLanes of them in registers).
template <class A, class B>
struct Mul {
  A a;
  B b;
  OPREG_CPU_INLINE float operator[](i64 i) const { return a[i] * b[i]; }
};
template <class A, class B>
Mul(A, B) -> Mul<A, B>;
template <class A>
struct Less {
  A a;
  float m;
  OPREG_CPU_INLINE float operator[](i64 i) const { return a[i] - m; }
};
template <class A>
Less(A, float) -> Less<A>;
// (a[i] - m) * s.
template <class A>
struct Affine {
  A a;
  float m;
  float s;
  OPREG_CPU_INLINE float operator[](i64 i) const { return (a[i] - m) * s; }
};
template <class A>
Affine(A, float, float) -> Affine<A>;
template <class A>
OPREG_CPU_INLINE Lanes lanes_of(const Affine<A>& r, i64 i) {
  return (lanes_of(r.a, i) - r.m) * r.s;
}
template <class A, class B>
OPREG_CPU_INLINE Lanes lanes_of(const Mul<A, B>& r, i64 i) {
  return lanes_of(r.a, i) * lanes_of(r.b, i);
}
template <class A>
OPREG_CPU_INLINE Lanes lanes_of(const Less<A>& r, i64 i) {
  return lanes_of(r.a, i) - r.m;
}

// The fold of the lanes: l += l + half, halving.
OPREG_CPU_INLINE float fold(Lanes acc) {
  for (int half = kLanes / 2; half > 0; half /= 2) {
    for (int l = 0; l < half; ++l) acc.add(l, acc.get(l + half));
  }
  return acc.get(0);
}

template <class Term>
OPREG_CPU_INLINE float lane_sum(i64 n, const Term& term) {
  Lanes acc{};
  i64 i = 0;
  for (; i + kLanes <= n; i += kLanes) acc += term.lanes(i);
  for (; i < n; ++i) acc.add(0, term(i));
  return fold(acc);
}

template <class Term>
OPREG_CPU_INLINE double wide_sum(i64 n, const Term& term) {
  double wide = 0.0;
  for (i64 i = 0; i < n; ++i) wide += term.wide(i);
  return wide;
}

template <class Term>
OPREG_CPU_INLINE double checked_sum(i64 n, const Term& term, float tiny = 0.0f) {
  const float s = lane_sum(n, term);
  const float a = std::fabs(s);
  if (a <= FLT_MAX && a >= tiny) return s;
  return wide_sum(n, term);
}

// Two sums in one pass (each checked as checked_sum does).
template <class T1, class T2>
OPREG_CPU_INLINE void checked_sum2(i64 n, const T1& t1, const T2& t2, double& s1, double& s2) {
  Lanes a1{};
  Lanes a2{};
  i64 i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    a1 += t1.lanes(i);
    a2 += t2.lanes(i);
  }
  for (; i < n; ++i) {
    a1.add(0, t1(i));
    a2.add(0, t2(i));
  }
  const float f1 = fold(a1);
  const float f2 = fold(a2);
  s1 += std::fabs(f1) <= FLT_MAX ? static_cast<double>(f1) : wide_sum(n, t1);
  s2 += std::fabs(f2) <= FLT_MAX ? static_cast<double>(f2) : wide_sum(n, t2);
}

// Smallest f32 sum of squares trusted without the double re-run.
constexpr float kTinySquares = 0x1.0p-100f;

template <class R>
struct Squares {
  R v;
  OPREG_CPU_INLINE float operator()(i64 i) const {
    const float x = v[i];
    return x * x;
  }
  OPREG_CPU_INLINE Lanes lanes(i64 i) const {
    const Lanes x = lanes_of(v, i);
    return x * x;
  }
  double wide(i64 i) const {
    const double x = v[i];
    return x * x;
  }
};
template <class R>
Squares(R) -> Squares<R>;
template <class A, class B>
struct Dot {
  A a;
  B b;
  OPREG_CPU_INLINE float operator()(i64 i) const { return a[i] * b[i]; }
  OPREG_CPU_INLINE Lanes lanes(i64 i) const { return lanes_of(a, i) * lanes_of(b, i); }
  double wide(i64 i) const { return static_cast<double>(a[i]) * b[i]; }
};
template <class A, class B>
Dot(A, B) -> Dot<A, B>;
template <class R>
struct Sum {
  R v;
  OPREG_CPU_INLINE float operator()(i64 i) const { return v[i]; }
  OPREG_CPU_INLINE Lanes lanes(i64 i) const { return lanes_of(v, i); }
  double wide(i64 i) const { return v[i]; }
};
template <class R>
Sum(R) -> Sum<R>;

// ---- Instantiation: f.template operator()<X, W>() for the (x, weight) dtype pair, and
// f.template operator()<M>() for the rounding mode.
template <class F>
void with_pair(Elem x, Elem w, const char* op, const F& f) {
  if (x == Elem::f32 && w == Elem::f32) return f.template operator()<F32, F32>();
  if (x == Elem::f16 && w == Elem::f16) return f.template operator()<F16, F16>();
  if (x == Elem::f16 && w == Elem::f32) return f.template operator()<F16, F32>();
  if (x == Elem::bf16 && w == Elem::bf16) return f.template operator()<BF16, BF16>();
  if (x == Elem::bf16 && w == Elem::f32) return f.template operator()<BF16, F32>();
  no_kernel(op, x, w);  // the op's check refuses every other pair
}
template <class F>
void with_type(Elem x, const char* op, const F& f) {
  if (x == Elem::f32) return f.template operator()<F32>();
  if (x == Elem::f16) return f.template operator()<F16>();
  if (x == Elem::bf16) return f.template operator()<BF16>();
  no_kernel(op, x, x);
}
template <class F>
void with_mode(Mode m, const F& f) {
  if (m == Mode::gemma) return f.template operator()<Mode::gemma>();
  if (m == Mode::none) return f.template operator()<Mode::none>();
  return f.template operator()<Mode::llama>();
}

// ---- Parameters as f32: n values of W (or `absent` where there is no tensor).
template <class W>
void params_f32(const void* p, i64 n, float absent, float* __restrict out) {
  if (p == nullptr) {
    for (i64 i = 0; i < n; ++i) out[i] = absent;
    return;
  }
  const auto* w = static_cast<const typename W::T*>(p);
  for (i64 i = 0; i < n; ++i) out[i] = W::load(w[i]);
}

// ---- Parameter gradients of row kernels (rms_norm's dweight, layer_norm's dweight and dbias):
// `count` arrays of `width` columns. For 16-bit activations each item sums its rows into the
// running thread's f32 block, which is folded into the item's f64 total every kRowBlock rows (an
// f32 chain of 4096 rows would miss an f32 dweight's tolerance; 32 do not). f32 activations add
// their terms to the f64 total directly, as exact double products: their tolerance is 2^13 times
// tighter, and columns whose rows cancel (terms of 1e18 summing to 1e15) need every bit. The
// totals are then added in item order, in double, and rounded once: the same bits for a given
// team, whoever ran which item.
struct GradPartials {
  i64 width = 0;  // columns of one array, padded to 16 floats
  int count = 0;  // arrays (dweight, dbias)
  float* blocks = nullptr;   // per slot: count * width floats
  double* totals = nullptr;  // per item: count * width doubles

  static i64 padded(i64 columns) { return (columns + 15) / 16 * 16; }
  void plan(Carve& c, i64 columns, int arrays, int team, i64 items, bool wide) {
    width = padded(columns);
    count = arrays;
    blocks = c.take<float>(wide ? 0 : width * count * team);
    totals = c.take<double>(width * count * max_of<i64>(items, 1));
  }
  float* block(int slot) const { return blocks + width * count * slot; }
  double* total(i64 item) const { return totals + width * count * item; }

  // Rows [begin, end) of `item`: row(r, acc) adds row r's terms to acc (array a at a * width),
  // a float block, or with kWide the item's double total.
  template <bool kWide, class RowFn>
  OPREG_CPU_INLINE void rows(i64 item, int slot, i64 begin, i64 end, const RowFn& row) const {
    double* __restrict t = total(item);
    const i64 n = width * count;
    if constexpr (kWide) {
      for (i64 i = 0; i < n; ++i) t[i] = 0.0;
      for (i64 r = begin; r < end; ++r) row(r, t);
    } else {
      float* __restrict b = block(slot);
      for (i64 first = begin; first < end || first == begin; first += kRowBlock) {
        for (i64 i = 0; i < n; ++i) b[i] = 0.0f;
        const i64 last = min_of(end, first + kRowBlock);
        for (i64 r = first; r < last; ++r) row(r, b);
        if (first == begin) {
          for (i64 i = 0; i < n; ++i) t[i] = b[i];
        } else {
          for (i64 i = 0; i < n; ++i) t[i] += b[i];
        }
        if (last >= end) break;
      }
    }
  }

  // Columns [c0, c1) of array a (at most kChunk): the items' totals added in item order, in
  // double, rounded once to W.
  template <class W>
  OPREG_CPU_INLINE void reduce(int a, i64 items, i64 c0, i64 c1, void* out) const {
    double acc[kChunk];
    const i64 n = c1 - c0;
    for (i64 j = 0; j < n; ++j) acc[j] = 0.0;
    for (i64 it = 0; it < items; ++it) {
      const double* __restrict t = total(it) + width * a + c0;
      for (i64 j = 0; j < n; ++j) acc[j] += t[j];
    }
    auto* o = static_cast<typename W::T*>(out) + c0;
    for (i64 j = 0; j < n; ++j) o[j] = W::store(double_to<W>(acc[j]));
  }
};

}  // namespace opreg::cpu::OPREG_CPU_NS
