// rope on the GPU, forward and backward (sin negated): one pass over q and k together. A block
// takes a few (b, t) positions at a time; each lane reads the angles of its group of pairs once,
// into registers (16-byte vectors where the rows allow), and rotates that group in the heads of q
// and of k its slot takes there, a batch of heads loaded before any is stored (the heads of one
// position share the angles, and under HF's transposed layout they are one contiguous run).
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

// One head's group g at position (b, t): its input pointer and its output pointer.
template <class T>
struct HeadAt {
  const T* in;
  T* out;
};
template <class T>
OPREG_DEV HeadAt<T> head_at(const family::Rope& d, std::int64_t h, std::int64_t b, std::int64_t t) {
  const bool is_q = h < d.q.heads;
  const family::RopeSide& sd = is_q ? d.q : d.k;
  const std::int64_t hh = is_q ? h : h - d.q.heads;
  return {static_cast<const T*>(sd.in) + b * sd.in_stride[0] + hh * sd.in_stride[1] + t * sd.in_stride[2],
          static_cast<T*>(sd.out) + b * sd.out_stride[0] + hh * sd.out_stride[1] + t * sd.out_stride[2]};
}

template <class E, class W, int N, bool kInterleaved>
__global__ void __launch_bounds__(kRopeMaxThreads) rope_kernel(const family::Rope d, const RopeLaunch l) {
  using T = typename E::T;
  using TW = typename W::T;
  constexpr int kPairs = kInterleaved ? N / 2 : N;  // pairs in a group
  constexpr int kSides = kInterleaved ? 1 : 2;      // packs a group reads from a head
  const int lane = static_cast<int>(threadIdx.x) % l.lanes;
  const int slot = static_cast<int>(threadIdx.x) / l.lanes % l.slots;
  const int sub = static_cast<int>(threadIdx.x) / (l.lanes * l.slots);
  const std::int64_t half = d.dim / 2;
  const std::int64_t groups = (kInterleaved ? d.dim : half) / N;
  const std::int64_t positions = d.batch * d.seq;
  const std::int64_t heads = d.q.heads + d.k.heads;
  const float sign = d.backward ? -1.0f : 1.0f;
  // Where a group's packs start in a head: its first elements (and, half pairing, the same in the
  // second half).
  const std::int64_t second = kInterleaved ? 0 : half;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * l.per_block + sub; p < positions;
       p += static_cast<std::int64_t>(gridDim.x) * l.per_block) {
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
    for (std::int64_t g = lane; g < groups; g += l.lanes) {
      float c[kPairs];
      float s[kPairs];
      if (l.table16 && !outside) {
        const Pack<W, kPairs> cv = load_pack<W, kPairs>(cr + g * kPairs);
        const Pack<W, kPairs> sv = load_pack<W, kPairs>(sr + g * kPairs);
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
          c[k] = W::load(cv.v[k]);
          s[k] = sign * W::load(sv.v[k]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
          const std::int64_t entry = (g * kPairs + k) * d.table_step;
          c[k] = outside ? __int_as_float(0x7fc00000) : W::load(cr[entry]);
          s[k] = outside ? __int_as_float(0x7fc00000) : sign * W::load(sr[entry]);
        }
      }
      // kRopeBatch heads' packs loaded before any is stored: their memory is apart (an output
      // is its own input at most), so the loads need not wait for the stores.
      for (std::int64_t h0 = slot; h0 < heads; h0 += static_cast<std::int64_t>(l.slots) * kRopeBatch) {
        Pack<E, N> x[kRopeBatch][kSides];
        HeadAt<T> at[kRopeBatch];
#pragma unroll
        for (int j = 0; j < kRopeBatch; ++j) {
          const std::int64_t h = h0 + static_cast<std::int64_t>(j) * l.slots;
          if (h >= heads) break;
          at[j] = head_at<T>(d, h, b, t);
#pragma unroll
          for (int side = 0; side < kSides; ++side) x[j][side] = load_pack<E, N>(at[j].in + side * second + g * N);
        }
#pragma unroll
        for (int j = 0; j < kRopeBatch; ++j) {
          if (h0 + static_cast<std::int64_t>(j) * l.slots >= heads) break;
          Pack<E, N> o[kSides];
#pragma unroll
          for (int k = 0; k < kPairs; ++k) {
            // The pair's two elements: interleaved, 2k and 2k + 1 of the pack; half, element k of
            // the first and of the second half's pack.
            const int i1 = kInterleaved ? 2 * k : k;
            const int i2 = kInterleaved ? 2 * k + 1 : k;
            const float x1 = E::load(x[j][0].v[i1]);
            const float x2 = E::load(x[j][kSides - 1].v[i2]);
            o[0].v[i1] = E::store(diff_of_products(x1, c[k], x2, s[k]));
            o[kSides - 1].v[i2] = E::store(diff_of_products(x2, c[k], -x1, s[k]));
          }
#pragma unroll
          for (int side = 0; side < kSides; ++side) store_pack<E, N>(at[j].out + side * second + g * N, o[side]);
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
    const int threads = l.lanes * l.slots * l.per_block;
    if (l.width == kVec) {
      if (interleaved) {
        dev::rope_kernel<E, W, kVec, true><<<l.blocks, threads, 0, stream>>>(d, l);
      } else {
        dev::rope_kernel<E, W, kVec, false><<<l.blocks, threads, 0, stream>>>(d, l);
      }
    } else if (interleaved) {
      dev::rope_kernel<E, W, 2, true><<<l.blocks, threads, 0, stream>>>(d, l);
    } else {
      dev::rope_kernel<E, W, 1, false><<<l.blocks, threads, 0, stream>>>(d, l);
    }
    return gpuGetLastError();
  });
}

}  // namespace opreg::cuda_like
