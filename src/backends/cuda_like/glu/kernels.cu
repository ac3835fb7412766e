// geglu (c = gelu_tanh(a) * b) and swiglu (c = silu(a) * b) on the GPU, forward and backward:
// streaming kernels, a grid-stride loop over 16-byte packs of every tensor (single elements when
// a tensor is not 16-byte aligned), the activation in f32 and each result rounded once on store,
// as the reference (src/ops/reference) rounds. Both activations go through the sigmoid with its
// complement taken from whichever side does not cancel, the way the cpu kernels do
// (src/backends/cpu/glu/kernels.inc): gelu_tanh(a) = a * sigmoid(2u), u = k (a + c a^3), so a
// large negative a keeps its relative accuracy where 1 + tanh(u) would cancel.
//   geglu  slope = s + 2 a s (1 - s) k (1 + 3 c a^2)
//   swiglu slope = s (1 + a (1 - s))
//   backward  da = dc * b * slope(a),  db = dc * act(a)   (da may be a, db may be b)
// kTorch (GluRounding::torch, 16-bit types only) adds Liger-Kernel's roundings to the dtype:
//   c = round(act(a)) * b;  geglu: da = round(dc * b) * slope(a), db = dc * round(act(a))
// and geglu's activation is then eager PyTorch's tanh expression (GeluEager), bit for bit.
// (Liger's swiglu backward keeps its products in f32: the same as without kTorch).
#include <type_traits>

#include "backends/cuda_like/elem.cuh"
#include "backends/cuda_like/glu/launch.h"

namespace opreg::cuda_like {
namespace dev {
namespace {

struct Sigmoid {
  float s;
  float one_minus;
};
OPREG_DEV Sigmoid sigmoid(float x) {
  const float e = expf(-x);
  const float s = 1.0f / (1.0f + e);
  return {s, x >= 0.0f ? e * s : 1.0f - s};
}

struct Gelu {
  static constexpr float kK = 0.7978845608028654f;  // sqrt(2 / pi)
  static constexpr float kC = 0.044715f;
  static OPREG_DEV float value(float a) { return a * sigmoid(2.0f * kK * (a + kC * a * a * a)).s; }
  // a^2 is capped in the polynomial only: where it would overflow s (1 - s) is 0 and 0 * inf
  // would make a NaN the reference does not have (an infinite a still gives inf * 0 = NaN).
  static OPREG_DEV void both(float a, float& value, float& slope) {
    const Sigmoid sg = sigmoid(2.0f * kK * (a + kC * a * a * a));
    const float a2 = a * a > 1e30f ? 1e30f : a * a;
    value = a * sg.s;
    slope = sg.s + 2.0f * a * sg.s * sg.one_minus * kK * (1.0f + 3.0f * kC * a2);
  }
};

// gelu_tanh in the torch rounding mode: PyTorch's eager CUDA kernel's own expression and order
// of operations (0.5 a (1 + tanhf(u)), f32), so that round(act(a)) is eager's bits and a swapped
// model reproduces HF's bf16 numbers. The sigmoid form above differs from eager by an f32 ulp now
// and then, which the rounding to bf16 turns into a bf16 ulp; Liger-Kernel's geglu test compares
// the gradients of an MLP with unscaled randn weights at 1e-2 and fails on those. As in eager, a
// large negative a loses relative accuracy to the cancellation in 1 + tanh(u); a^2 is capped in
// the slope as in Gelu (eager's slope is NaN past |a| = 2^64, the reference's 1).
struct GeluEager {
  static OPREG_DEV float value(float a) {
    const float u = Gelu::kK * (a + Gelu::kC * (a * a * a));
    return 0.5f * a * (1.0f + tanhf(u));
  }
  static OPREG_DEV void both(float a, float& value, float& slope) {
    const float a2 = a * a;
    const float t = tanhf(Gelu::kK * (a + Gelu::kC * (a2 * a)));
    const float half_a = 0.5f * a;
    const float one_plus_t = 1.0f + t;
    const float u_slope = Gelu::kK * (1.0f + 3.0f * Gelu::kC * (a2 > 1e30f ? 1e30f : a2));
    value = half_a * one_plus_t;
    slope = 0.5f * one_plus_t + half_a * (1.0f - t * t) * u_slope;
  }
};

// The activation a kernel evaluates: eager's gelu expression in the torch mode (GeluEager).
template <class Act, bool kTorch>
using ActIn = std::conditional_t<kTorch && std::is_same_v<Act, Gelu>, GeluEager, Act>;

struct Silu {
  static OPREG_DEV float value(float a) { return a * sigmoid(a).s; }
  static OPREG_DEV void both(float a, float& value, float& slope) {
    const Sigmoid sg = sigmoid(a);
    value = a * sg.s;
    slope = sg.s * (1.0f + a * sg.one_minus);
  }
};

// Packs [0, n / N) by the grid, then the n % N last elements one each by the first threads.
template <int N, class Body, class Tail>
OPREG_DEV void grid_stride(std::int64_t n, Body&& body, Tail&& tail) {
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t packs = n / N;
  for (std::int64_t i = first; i < packs; i += stride) body(i * N);
  if (first < n - packs * N) tail(packs * N + first);
}

// c = act(a) * b in f32 (kTorch: act(a) rounded to E first).
template <class E, class Act, bool kTorch>
OPREG_DEV float glu_out(float a, float b) {
  if constexpr (kTorch) {
    return round_to<E>(ActIn<Act, kTorch>::value(a)) * b;
  } else {
    return Act::value(a) * b;
  }
}

// c does not overlap a or b (the op's check): a and b are read once through the read-only path.
template <class E, class Act, bool kTorch, int N>
__global__ void __launch_bounds__(kGluThreads) glu_fwd_kernel(const typename E::T* a, const typename E::T* b,
                                                              typename E::T* c, std::int64_t n) {
  grid_stride<N>(
      n,
      [&](std::int64_t at) {
        const Pack<E, N> av = load_pack_once<E, N>(a + at);
        const Pack<E, N> bv = load_pack_once<E, N>(b + at);
        Pack<E, N> cv;
#pragma unroll
        for (int e = 0; e < N; ++e) cv.v[e] = E::store(glu_out<E, Act, kTorch>(E::load(av.v[e]), E::load(bv.v[e])));
        store_pack<E, N>(c + at, cv);
      },
      [&](std::int64_t at) { c[at] = E::store(glu_out<E, Act, kTorch>(E::load(a[at]), E::load(b[at]))); });
}

// da may be a and db may be b: each element is read before it is written, by the same thread.
template <class E, class Act, bool kTorch, int N>
__global__ void __launch_bounds__(kGluThreads) glu_bwd_kernel(const typename E::T* dc, const typename E::T* a,
                                                              const typename E::T* b, typename E::T* da,
                                                              typename E::T* db, std::int64_t n) {
  auto one = [](float g, float x, float y, float& dx, float& dy) {
    float value = 0.0f;
    float slope = 0.0f;
    ActIn<Act, kTorch>::both(x, value, slope);
    if constexpr (kTorch && std::is_same_v<Act, Gelu>) {
      dx = round_to<E>(g * y) * slope;
      dy = g * round_to<E>(value);
    } else {
      dx = g * y * slope;
      dy = g * value;
    }
  };
  grid_stride<N>(
      n,
      [&](std::int64_t at) {
        const Pack<E, N> gv = load_pack_once<E, N>(dc + at);
        const Pack<E, N> av = load_pack<E, N>(a + at);
        const Pack<E, N> bv = load_pack<E, N>(b + at);
        Pack<E, N> dav;
        Pack<E, N> dbv;
#pragma unroll
        for (int e = 0; e < N; ++e) {
          float dx = 0.0f;
          float dy = 0.0f;
          one(E::load(gv.v[e]), E::load(av.v[e]), E::load(bv.v[e]), dx, dy);
          dav.v[e] = E::store(dx);
          dbv.v[e] = E::store(dy);
        }
        store_pack<E, N>(da + at, dav);
        store_pack<E, N>(db + at, dbv);
      },
      [&](std::int64_t at) {
        float dx = 0.0f;
        float dy = 0.0f;
        one(E::load(dc[at]), E::load(a[at]), E::load(b[at]), dx, dy);
        da[at] = E::store(dx);
        db[at] = E::store(dy);
      });
}

template <class F>
gpuError_t with_elem(family::Elem t, F&& f) {
  switch (t) {
    case family::Elem::f32:
      return f(F32{});
    case family::Elem::f16:
      return f(F16{});
    case family::Elem::bf16:
      return f(BF16{});
  }
  return gpuErrorInvalidValue;
}

template <class F>
gpuError_t with_act(GluAct act, F&& f) {
  return act == GluAct::gelu_tanh ? f(Gelu{}) : f(Silu{});
}

// f(std::bool_constant<torch>) for the descriptor's rounding; f32 descriptors say once, and f32
// has no torch instantiation.
template <class E, class F>
gpuError_t with_rounding(family::GluRounding r, F&& f) {
  if constexpr (!std::is_same_v<E, F32>) {
    if (r == family::GluRounding::torch) return f(std::true_type{});
  }
  return f(std::false_type{});
}

}  // namespace

// A glu kernel's launch, either direction, with its template arguments for this call: the
// descriptor's element type, the gate, the rounding and the accesses a thread (16 bytes where the
// launch says vec16, else one element).
template <class Desc>
gpuError_t launch_glu(const Desc& d, GluAct act, const GluLaunch& l, gpuStream_t stream) {
  if (d.n == 0) return gpuSuccess;
  return with_elem(d.type, [&](auto e) {
    using E = decltype(e);
    using T = typename E::T;
    return with_act(act, [&](auto a) {
      using A = decltype(a);
      return with_rounding<E>(d.rounding, [&](auto torch) {
        constexpr bool kTorch = decltype(torch)::value;
        constexpr int kVec = static_cast<int>(16 / sizeof(T));
        const auto launch = [&](auto vec) {
          constexpr int kV = decltype(vec)::value;
          if constexpr (std::is_same_v<Desc, family::GluFwd>) {
            glu_fwd_kernel<E, A, kTorch, kV><<<l.blocks, kGluThreads, 0, stream>>>(
                static_cast<const T*>(d.a), static_cast<const T*>(d.b), static_cast<T*>(d.c), d.n);
          } else {
            glu_bwd_kernel<E, A, kTorch, kV><<<l.blocks, kGluThreads, 0, stream>>>(
                static_cast<const T*>(d.dc), static_cast<const T*>(d.a), static_cast<const T*>(d.b),
                static_cast<T*>(d.da), static_cast<T*>(d.db), d.n);
          }
        };
        if (l.vec16) {
          launch(std::integral_constant<int, kVec>{});
        } else {
          launch(std::integral_constant<int, 1>{});
        }
        return gpuGetLastError();
      });
    });
  });
}

}  // namespace dev

gpuError_t launch_glu_fwd(const family::GluFwd& d, GluAct act, const GluLaunch& l, gpuStream_t stream) {
  return dev::launch_glu(d, act, l, stream);
}
gpuError_t launch_glu_bwd(const family::GluBwd& d, GluAct act, const GluLaunch& l, gpuStream_t stream) {
  return dev::launch_glu(d, act, l, stream);
}

}  // namespace opreg::cuda_like
