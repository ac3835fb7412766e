// rope on the GPU, forward and backward (sin negated): one pass over q and k together. A thread
// takes one group of pairs of one head at one (b, t) position, its packs and its angles: 30-32
// registers in the common instantiations, so a multiprocessor holds all 2048 threads and the
// loads of that many groups are in flight (f32's half pairs 40, a 16-bit q with an f32 table 44:
// 1536 and 1280 threads). The groups of a head and the heads of a position are neighbouring threads, so the
// angles they share come from cache (and under HF's transposed layout a position's heads are one
// contiguous run); a thread finds its group with divisions by multiply and shift. Groups are
// 16-byte accesses where every head starts on 16 bytes, else single elements (single pairs,
// interleaved); each output x1 c - x2 s to about an ulp, rounded once on store, as the reference
// rounds (rotate1). A thread reads a group in full before it writes it, so an output may be its
// input (in place).
#include "backends/cuda_like/elem.cuh"
#include "backends/cuda_like/rope/plan.h"

namespace opreg::cuda_like {
namespace dev {
namespace {

// a * b - c * d within about an ulp of the exact value, also where the two products nearly
// cancel (x1 cos - x2 sin for large x does): Kahan's algorithm with fused multiply-adds. Where
// c * d is infinite its error term is NaN and the plain difference is the answer.
OPREG_DEV float diff_of_products(float a, float b, float c, float d) {
  const float w = __fmul_rn(c, d);
  const float e = fmaf(-c, d, w);
  const float f = fmaf(a, b, -w);
  return e == e ? f + e : f;
}

// x1 * c - x2 * s rounded once to f32. Where x and the table are 16-bit types both products are
// exact in f32 (at most 11 + 11 significant bits), so one fused multiply-add is exact up to its
// rounding; else diff_of_products.
template <bool kExactProducts>
OPREG_DEV float rotate1(float x1, float c, float x2, float s) {
  if constexpr (kExactProducts) {
    return fmaf(x1, c, -(x2 * s));
  } else {
    return diff_of_products(x1, c, x2, s);
  }
}

// store_pack, evict-first (CUDA's streaming store) for 16-byte packs of f32: measured on an H200
// at 4 x 4096 x (32 + 8) x 128 in HF's layout, f32 166.8 against 177.9 us with plain stores,
// where bf16 loses (88.3 against 87.1).
template <class E, int N>
OPREG_DEV void store_group(typename E::T* p, const Pack<E, N>& in) {
#if !defined(OPREG_USE_HIP)
  if constexpr (std::is_same_v<E, F32> && (N * sizeof(float)) % 16 == 0) {
#pragma unroll
    for (int i = 0; i < static_cast<int>(N * sizeof(float) / 16); ++i) {
      __stcs(reinterpret_cast<float4*>(p) + i, reinterpret_cast<const float4*>(in.v)[i]);
    }
    return;
  }
#endif
  store_pack<E, N>(p, in);
}

// n / f.d for n < 2^31: a multiply-high, an add and a shift (FastDiv, plan.h).
OPREG_DEV std::uint32_t divide(std::uint32_t n, const FastDiv& f) { return (__umulhi(n, f.mul) + n) >> f.shift; }

template <class E, class W, int N, bool kInterleaved>
__global__ void __launch_bounds__(kRopeThreads) rope_kernel(const family::Rope d, const RopeGrid w) {
  using T = typename E::T;
  using TW = typename W::T;
  constexpr int kPairs = kInterleaved ? N / 2 : N;  // pairs in a group
  constexpr int kSides = kInterleaved ? 1 : 2;      // packs a group reads from a head
  constexpr bool kExact = sizeof(T) == 2 && sizeof(TW) == 2;
  // Where a group's packs start in a head: its first elements (and, half pairing, the same in the
  // second half).
  const std::int64_t second = kInterleaved ? 0 : d.dim / 2;
  const float sign = d.backward ? -1.0f : 1.0f;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < w.items;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    // Item i: group g of head h (q's heads, then k's) at position p = (b, t); the groups of a head
    // and the heads of a position are neighbours, so a warp's accesses are runs of whole heads.
    std::int64_t b;
    std::int64_t t;
    std::int64_t h;
    std::int64_t g;
    if (w.narrow) {
      const auto n = static_cast<std::uint32_t>(i);
      const std::uint32_t p = divide(n, w.per_position);
      const std::uint32_t r = n - p * w.per_position.d;
      const std::uint32_t hh = divide(r, w.groups);
      const std::uint32_t bb = divide(p, w.seq);
      h = hh;
      g = r - hh * w.groups.d;
      b = bb;
      t = p - bb * w.seq.d;
    } else {
      const std::int64_t groups = (kInterleaved ? d.dim : d.dim / 2) / N;
      const std::int64_t per_position = (d.q.heads + d.k.heads) * groups;
      const std::int64_t p = i / per_position;
      const std::int64_t r = i - p * per_position;
      h = r / groups;
      g = r - h * groups;
      b = p / d.seq;
      t = p - b * d.seq;
    }
    std::int64_t cos_at = b * d.cos_stride[0] + t * d.cos_stride[1];
    std::int64_t sin_at = b * d.sin_stride[0] + t * d.sin_stride[1];
    bool outside = false;
    if (d.positions != nullptr) {
      const std::int64_t row = d.positions[b * d.pos_stride[0] + t * d.pos_stride[1]];
      outside = row < 0 || row >= d.table_rows;  // never read: the position's outputs are NaN
      cos_at = outside ? 0 : row * d.cos_stride[1];
      sin_at = outside ? 0 : row * d.sin_stride[1];
    }
    const std::int64_t entry0 = g * kPairs * d.table_step;
    const TW* cr = static_cast<const TW*>(d.cos) + cos_at + entry0;
    const TW* sr = static_cast<const TW*>(d.sin) + sin_at + entry0;
    // The head's input and output: q's fields or k's. Chosen field by field (16-bit types) or as
    // a reference to the side (f32), which indexes the parameters by a register: measured on an
    // H200 at 4 x 4096 x (32 + 8) x 128 in HF's layout, 86.5 against 95.1 us in bf16 (32
    // registers against 38, all threads resident), and 189 against 177 us in f32.
    const bool is_q = h < d.q.heads;
    const std::int64_t hh = is_q ? h : h - d.q.heads;
    const T* in;
    T* out;
    if constexpr (sizeof(T) == 2) {
      const auto pick = [is_q](auto a, auto b) { return is_q ? a : b; };
      in = static_cast<const T*>(pick(d.q.in, d.k.in)) + b * pick(d.q.in_stride[0], d.k.in_stride[0]) +
           hh * pick(d.q.in_stride[1], d.k.in_stride[1]) + t * pick(d.q.in_stride[2], d.k.in_stride[2]);
      out = static_cast<T*>(pick(d.q.out, d.k.out)) + b * pick(d.q.out_stride[0], d.k.out_stride[0]) +
            hh * pick(d.q.out_stride[1], d.k.out_stride[1]) + t * pick(d.q.out_stride[2], d.k.out_stride[2]);
    } else {
      const family::RopeSide& sd = is_q ? d.q : d.k;
      in = static_cast<const T*>(sd.in) + b * sd.in_stride[0] + hh * sd.in_stride[1] + t * sd.in_stride[2];
      out = static_cast<T*>(sd.out) + b * sd.out_stride[0] + hh * sd.out_stride[1] + t * sd.out_stride[2];
    }
    in += g * N;
    out += g * N;
    Pack<E, N> x[kSides];
#pragma unroll
    for (int side = 0; side < kSides; ++side) x[side] = load_pack<E, N>(in + side * second);
    // Rotates the group in its registers, angle(k, c, s) giving pair k's cos and (signed) sin,
    // and stores it.
    const auto rotate = [&](auto&& angle) {
#pragma unroll
      for (int k = 0; k < kPairs; ++k) {
        // The pair's two elements: interleaved, 2k and 2k + 1 of the pack; half, element k of
        // the first and of the second half's pack.
        const int i1 = kInterleaved ? 2 * k : k;
        const int i2 = kInterleaved ? 2 * k + 1 : k;
        float c;
        float sn;
        angle(k, c, sn);
        const float x1 = E::load(x[0].v[i1]);
        const float x2 = E::load(x[kSides - 1].v[i2]);
        x[0].v[i1] = E::store(rotate1<kExact>(x1, c, x2, sn));
        x[kSides - 1].v[i2] = E::store(rotate1<kExact>(x2, c, -x1, sn));
      }
#pragma unroll
      for (int side = 0; side < kSides; ++side) store_group<E, N>(out + side * second, x[side]);
    };
    // The group's angles (the heads of a position read the same ones: they come from cache).
    if (w.table16 && !outside) {
      const Pack<W, kPairs> cv = load_pack<W, kPairs>(cr);
      const Pack<W, kPairs> sv = load_pack<W, kPairs>(sr);
      rotate([&](int k, float& c, float& sn) {
        c = W::load(cv.v[k]);
        sn = sign * W::load(sv.v[k]);
      });
    } else {
      rotate([&](int k, float& c, float& sn) {
        c = outside ? __int_as_float(0x7fc00000) : W::load(cr[k * d.table_step]);
        sn = outside ? __int_as_float(0x7fc00000) : sign * W::load(sr[k * d.table_step]);
      });
    }
  }
}

// f(E{}, W{}) for the (q, table) dtype pair: the table is q's dtype or f32.
template <class F>
gpuError_t with_pair(family::Elem x, family::Elem w, F&& f) {
  const bool f32_table = w == family::Elem::f32;
  switch (x) {
    case family::Elem::f32:
      return f(F32{}, F32{});
    case family::Elem::f16:
      return f32_table ? f(F16{}, F32{}) : f(F16{}, F16{});
    case family::Elem::bf16:
      return f32_table ? f(BF16{}, F32{}) : f(BF16{}, BF16{});
  }
  return gpuErrorInvalidValue;
}

}  // namespace
}  // namespace dev

gpuError_t launch_rope(const family::Rope& d, const RopeLaunch& l, gpuStream_t stream) {
  if (l.grid.items == 0) return gpuSuccess;
  const bool interleaved = d.pairing == family::Pairing::interleaved;
  return dev::with_pair(d.type, d.table_type, [&](auto e, auto w) -> gpuError_t {
    using E = decltype(e);
    using W = decltype(w);
    constexpr int kVec = 16 / sizeof(typename E::T);
    const auto kernel = l.width == kVec ? (interleaved ? dev::rope_kernel<E, W, kVec, true>
                                                       : dev::rope_kernel<E, W, kVec, false>)
                                        : (interleaved ? dev::rope_kernel<E, W, 2, true>
                                                       : dev::rope_kernel<E, W, 1, false>);
    kernel<<<l.blocks, kRopeThreads, 0, stream>>>(d, l.grid);
    return gpuGetLastError();
  });
}

}  // namespace opreg::cuda_like
