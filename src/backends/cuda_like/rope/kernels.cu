// rope on the GPU, forward and backward (sin negated): one pass over q and k together. A block
// takes a (b, t) position at a time; each lane reads the angles of its group of pairs once, into
// registers, and rotates that group in every head of q and of k there (the heads of one position
// share the angles, and under HF's transposed layout they are one contiguous run of memory).
// Groups are 16-byte accesses where every head starts on 16 bytes, else single elements (single
// pairs, interleaved); in f32, each output a difference of two products to about an ulp
// (diff_of_products), rounded once on store, as the reference rounds. A lane
// reads a group in full before it writes it, so an output may be its input (in place).
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

template <class E, class W, int N, bool kInterleaved>
__global__ void __launch_bounds__(kRopeMaxThreads) rope_kernel(const family::Rope d, int lanes, int slots) {
  using T = typename E::T;
  using TW = typename W::T;
  constexpr int kPairs = kInterleaved ? N / 2 : N;  // pairs in a group
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  const int slot = static_cast<int>(threadIdx.x) / lanes;
  const std::int64_t half = d.dim / 2;
  const std::int64_t groups = (kInterleaved ? d.dim : half) / N;
  const std::int64_t positions = d.batch * d.seq;
  const std::int64_t heads = d.q.heads + d.k.heads;
  const float sign = d.backward ? -1.0f : 1.0f;
  for (std::int64_t p = blockIdx.x; p < positions; p += gridDim.x) {
    const std::int64_t b = p / d.seq;
    const std::int64_t t = p - b * d.seq;
    std::int64_t cos_at = b * d.cos_stride[0] + t * d.cos_stride[1];
    std::int64_t sin_at = b * d.sin_stride[0] + t * d.sin_stride[1];
    bool outside = false;
    if (d.positions != nullptr) {
      const std::int64_t row = d.positions[b * d.pos_stride[0] + t * d.pos_stride[1]];
      outside = row < 0 || row >= d.table_rows;  // never read: the position's outputs are NaN
      cos_at = outside ? 0 : row * d.cos_stride[1];
      sin_at = outside ? 0 : row * d.sin_stride[1];
    }
    const TW* cr = static_cast<const TW*>(d.cos) + cos_at;
    const TW* sr = static_cast<const TW*>(d.sin) + sin_at;
    for (std::int64_t g = lane; g < groups; g += lanes) {
      float c[kPairs];
      float s[kPairs];
#pragma unroll
      for (int k = 0; k < kPairs; ++k) {
        const std::int64_t entry = (g * kPairs + k) * d.table_step;
        c[k] = outside ? __int_as_float(0x7fc00000) : W::load(cr[entry]);
        s[k] = outside ? __int_as_float(0x7fc00000) : sign * W::load(sr[entry]);
      }
      for (std::int64_t h = slot; h < heads; h += slots) {
        const bool is_q = h < d.q.heads;
        const family::RopeSide& sd = is_q ? d.q : d.k;
        const std::int64_t hh = is_q ? h : h - d.q.heads;
        const T* in = static_cast<const T*>(sd.in) + b * sd.in_stride[0] + hh * sd.in_stride[1] + t * sd.in_stride[2];
        T* out = static_cast<T*>(sd.out) + b * sd.out_stride[0] + hh * sd.out_stride[1] + t * sd.out_stride[2];
        if constexpr (kInterleaved) {
          const Pack<E, N> x = load_pack<E, N>(in + g * N);
          Pack<E, N> o;
#pragma unroll
          for (int k = 0; k < kPairs; ++k) {
            const float x1 = E::load(x.v[2 * k]);
            const float x2 = E::load(x.v[2 * k + 1]);
            o.v[2 * k] = E::store(diff_of_products(x1, c[k], x2, s[k]));
            o.v[2 * k + 1] = E::store(diff_of_products(x2, c[k], -x1, s[k]));
          }
          store_pack<E, N>(out + g * N, o);
        } else {
          const Pack<E, N> a = load_pack<E, N>(in + g * N);
          const Pack<E, N> z = load_pack<E, N>(in + half + g * N);
          Pack<E, N> oa;
          Pack<E, N> oz;
#pragma unroll
          for (int k = 0; k < N; ++k) {
            const float x1 = E::load(a.v[k]);
            const float x2 = E::load(z.v[k]);
            oa.v[k] = E::store(diff_of_products(x1, c[k], x2, s[k]));
            oz.v[k] = E::store(diff_of_products(x2, c[k], -x1, s[k]));
          }
          store_pack<E, N>(out + g * N, oa);
          store_pack<E, N>(out + half + g * N, oz);
        }
      }
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
  if (d.batch * d.seq == 0 || d.q.heads + d.k.heads == 0) return gpuSuccess;
  const bool interleaved = d.pairing == family::Pairing::interleaved;
  return dev::with_pair(d.type, d.table_type, [&](auto e, auto w) {
    using E = decltype(e);
    using W = decltype(w);
    constexpr int kVec = 16 / sizeof(typename E::T);
    const int threads = l.lanes * l.slots;
    if (l.width == kVec) {
      if (interleaved) {
        dev::rope_kernel<E, W, kVec, true><<<l.blocks, threads, 0, stream>>>(d, l.lanes, l.slots);
      } else {
        dev::rope_kernel<E, W, kVec, false><<<l.blocks, threads, 0, stream>>>(d, l.lanes, l.slots);
      }
    } else if (interleaved) {
      dev::rope_kernel<E, W, 2, true><<<l.blocks, threads, 0, stream>>>(d, l.lanes, l.slots);
    } else {
      dev::rope_kernel<E, W, 1, false><<<l.blocks, threads, 0, stream>>>(d, l.lanes, l.slots);
    }
    return gpuGetLastError();
  });
}

}  // namespace opreg::cuda_like
