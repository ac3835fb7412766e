// Device building blocks of the rms_norm kernels (element types and packs: elem.cuh): the casting
// modes' arithmetic, the row reductions, compensated sums, and the host helpers every launcher
// shares (occupancy cache, type dispatch).
//
// Rounding follows the reference (src/ops/reference) in *where* values are rounded; the
// arithmetic in between is f32:
//   forward   y = X(xhat * s),  xhat = X(x * rstd) (llama, none) or x * rstd (gemma)
//   backward  dx = X(rstd * dy * s - rstd^3 * sum(dy * s * x) / H * x),  dW += dy * xhat
// with s = offset + w (llama, gemma), W(offset + w) (none), 1 without a weight.
#pragma once

#include <cstdint>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "backends/cuda_like/elem.cuh"
#include "backends/cuda_like/gpu_vendor.h"
#include "backends/cuda_like/rms_norm/launch.h"

namespace opreg::cuda_like {
namespace dev {

constexpr int kWarp = OPREG_GPU_WARP;
static_assert(kWarp == kWarpSize, "the host plans and the kernels must agree on the warp size");
constexpr int kMaxThreads = 1024;
// Shared-memory slots of a row reduction: one per warp, double-buffered (see row_sum).
constexpr int kRedSlots = 2 * kMaxThreads / kWarp;

// The scales (offset + w) of N columns as the casting mode defines them; 1 without a weight.
template <class W, int N>
OPREG_DEV void load_scale(const typename W::T* w, std::int64_t col, float offset, bool round_w, float (&s)[N]) {
  if (w == nullptr) {
#pragma unroll
    for (int e = 0; e < N; ++e) s[e] = 1.0f;
    return;
  }
  const Pack<W, N> wv = load_pack<W, N>(w + col);
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const float v = offset + W::load(wv.v[e]);
    s[e] = round_w ? round_to<W>(v) : v;
  }
}

// xhat as the casting mode sees it: rounded to x's dtype (llama, none) or not (gemma).
template <class X>
OPREG_DEV float xhat_of(float x, float rstd, bool gemma) {
  const float v = x * rstd;
  return gemma ? v : round_to<X>(v);
}

// The backward's arithmetic on one access: dot += sum(dy * s * x), dy and x multiplied by `scale`
// (row_total's second pass; 1 on the first); and dx = X(rstd * dy * s - coeff * x) with dW +=
// dy * xhat (when `dw`).
template <class X, int VEC>
OPREG_DEV float dot_pack(float dot, float scale, const Pack<X, VEC>& dy, const float (&s)[VEC], const Pack<X, VEC>& x) {
#pragma unroll
  for (int e = 0; e < VEC; ++e) dot += (X::load(dy.v[e]) * scale) * s[e] * (X::load(x.v[e]) * scale);
  return dot;
}

// 1 / sqrt(mean square + eps) from a row's f64 sum of squares, rounded once to f32.
OPREG_DEV float rstd_of(double squares, std::int64_t hidden, double eps) {
  const double mean = hidden > 0 ? squares / static_cast<double>(hidden) : 0.0;
  return static_cast<float>(1.0 / sqrt(mean + eps));
}

// The backward's rstd^3 * dot / hidden (inv_h = 1 / hidden), in f64: rstd^3 alone leaves f32's
// normal range for rows of magnitude 2^42 and up (and dot may be past FLT_MAX), where the product
// is an ordinary f32. Four f64 multiplies a row.
OPREG_DEV float coeff_of(float rstd, double dot, double inv_h) {
  const double r = rstd;
  return static_cast<float>(r * r * r * dot * inv_h);
}

template <class X, int VEC, bool GEMMA, class Sum>
OPREG_DEV Pack<X, VEC> dx_pack(const Pack<X, VEC>& dy, const float (&s)[VEC], const Pack<X, VEC>& x, float rstd,
                               float coeff, bool dw, Sum (&acc)[VEC], const Pack<X, VEC>* ds = nullptr) {
  Pack<X, VEC> out;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const float xf = X::load(x.v[e]);
    const float dyf = X::load(dy.v[e]);
    // fused_add_rms_norm: the gradient into the new residual joins dx before it is rounded.
    const float extra = ds != nullptr ? X::load(ds->v[e]) : 0.0f;
    out.v[e] = X::store(rstd * dyf * s[e] - coeff * xf + extra);
    if (dw) acc[e].add_product(dyf, xhat_of<X>(xf, rstd, GEMMA));
  }
  return out;
}

// Sum over groups of `width` consecutive lanes (a power of two up to the warp).
template <class T>
OPREG_DEV T warp_sum(T v, int width) {
  for (int o = width / 2; o > 0; o /= 2) v += gpu_shfl_xor(v, o);
  return v;
}

// The sum of v over the `tpr` threads of each row of the block (threads [k*tpr, (k+1)*tpr)),
// returned to all of them, in a fixed order (deterministic). Blocks whose rows span several
// warps go through `red` (kRedSlots); it is double-buffered by `parity`, which the caller flips
// on every call, so one barrier per call suffices: a warp can only overwrite a buffer after
// every warp passed the next call's barrier, i.e. finished reading it.
template <class T>
OPREG_DEV T row_sum(T v, int tpr, T* red, int parity) {
  if (tpr <= kWarp) return warp_sum(v, tpr);
  v = warp_sum(v, kWarp);
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int per_row = tpr / kWarp;
  T* buf = red + parity * (kMaxThreads / kWarp);
  if (threadIdx.x % kWarp == 0) buf[warp] = v;
  __syncthreads();
  const int first = warp / per_row * per_row;
  T total = 0;
  for (int i = 0; i < per_row; ++i) total += buf[first + i];
  return total;
}

// ---- Row sums that hold for any finite input. The f32 sum of a row's squares overflows where
// x reaches 2^64 / sqrt(hidden) (5120 squares of 2^60: 2^132), and underflows to 0 where every
// |x| is under 2^-75, losing the row's scale; a dot of dy and x near 2^64 each overflows too.
// So a row is summed in f32 (each thread's terms, then across the row, exactly as before), and
// where the total is not a finite number of at least `tiny` (kTinySquares for squares, 0 for a
// dot), summed again with every factor scaled by 2^-88 (overflow) or 2^88 (underflow), which
// brings any finite row into range (squares of at most 2^80, 2^40 columns of them), and the
// total scaled back in f64. The second pass is the same f32 code with one more multiply, so the
// kernels keep their registers; the first costs a compare and a vote (row_sum_checked): the
// second pass's reduction synchronises the whole warp or block, so every thread of it must take
// it.
constexpr float kTinySquares = 0x1.0p-100f;
OPREG_DEV bool out_of_f32(float total, float tiny) {
  const float a = fabsf(total);
  return !(a <= 3.40282347e38f && a >= tiny);
}

// row_sum in f32, and in `again` whether a second pass is needed by any row it would
// synchronise with (the warp's rows when tpr <= kWarp, else the block's): exactly, from the row
// totals, in a warp; in a block, from a flag per warp share that the row_sum barrier ORs (no
// second barrier, no look at other rows' shares), conservatively: a share past 2^121 (or not a
// number) may take its row past FLT_MAX (at most 32 shares a row), and a share under `tiny` may
// leave it under tiny (squares are never negative). A row that needs no scaling gets the same
// bits from the second pass.
OPREG_DEV float row_sum_checked(float v, int tpr, float* red, int parity, float tiny, bool& again) {
  if (tpr <= kWarp) {
    const float total = warp_sum(v, tpr);
    again = gpu_any(out_of_f32(total, tiny));
    return total;
  }
  v = warp_sum(v, kWarp);
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int per_row = tpr / kWarp;
  float* buf = red + parity * (kMaxThreads / kWarp);
  const bool leader = threadIdx.x % kWarp == 0;
  const float a = fabsf(v);
  if (leader) buf[warp] = v;
  again = __syncthreads_or(leader && !(a <= 0x1.0p121f && a >= tiny)) != 0;
  const int first = warp / per_row * per_row;
  float total = 0.0f;
  for (int i = 0; i < per_row; ++i) total += buf[first + i];
  return total;
}

// v, as a value the compiler cannot prove equal to v. row_total's two passes read the same
// accesses; without this the compiler keeps the first pass's f32 conversions (or weights) live
// across the reduction for the second, where the packed 16-bit registers are live anyway: more
// registers on every row for a pass that almost never runs. A terms() function passes what it
// reads through opaque(). (HIP: as is; the registers are tuning, not results.)
template <class T>
OPREG_DEV T opaque(T v) {
#if !defined(OPREG_USE_HIP)
  if constexpr (sizeof(T) % 4 == 0) {
    auto* w = reinterpret_cast<unsigned*>(&v);
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(T) / 4); ++i) asm volatile("" : "+r"(w[i]));
  } else if constexpr (sizeof(T) == 2) {
    asm volatile("" : "+h"(*reinterpret_cast<unsigned short*>(&v)));
  }
#endif
  return v;
}

// A row's sum of terms(scale) (a thread's terms, each factor multiplied by scale, added in f32),
// checked as above. `red` and `red2` are row_sum buffers (kRedSlots floats) for the two passes:
// the second pass's writes must not meet the first's reads of another warp.
struct RowTotal {
  double value;
  bool scaled;  // the second pass gave it
};
template <class Terms>
OPREG_DEV RowTotal row_total(const Terms& terms, int tpr, float* red, float* red2, int parity, float tiny) {
  bool again = false;
  const float f = row_sum_checked(terms(1.0f), tpr, red, parity, tiny, again);
  if (!again) return {f, false};
  const bool out = out_of_f32(f, tiny);
  const bool down = !(fabsf(f) < tiny);  // overflow, or not a number
  const float scale = !out ? 1.0f : down ? 0x1.0p-88f : 0x1.0p88f;
  const float g = row_sum(terms(scale), tpr, red2, parity);
  if (!out) return {g, false};
  return {static_cast<double>(g) * (down ? 0x1.0p176 : 0x1.0p-176), true};
}

// A column's dW over the rows one thread sees: the sum of dy * xhat. For f32 inputs the sum must
// stay accurate to f32 rounding of the exact sum: a plain f32 running sum over a few hundred rows
// drifts by ~1e-5 of its magnitude, past the f32 tolerance, and where the terms cancel (dy and x
// near 2^60, 37 rows summing to 2^-12 of a term) even one rounding of each product is 10x past
// it. So each product's rounding error is recovered exactly with an fma and carried in Kahan's
// compensation together with the additions' errors: the sum is as good as one in twice the
// precision. For 16-bit inputs the output's own rounding dwarfs all that, and the second
// register per column would cost occupancy: a plain sum.
struct PlainSum {
  float sum = 0.0f;
  OPREG_DEV void add_product(float a, float b) { sum += a * b; }
  OPREG_DEV float value() const { return sum; }
};
struct Kahan {
  float sum = 0.0f;
  float comp = 0.0f;  // what sum holds beyond the exact total
  OPREG_DEV void add_product(float a, float b) {
    const float p = __fmul_rn(a, b);  // never contracted into the next addition
    const float e = fmaf(a, b, -p);   // a * b == p + e exactly
    const float y = p - comp;
    const float t = sum + y;
    comp = ((t - sum) - y) - e;
    sum = t;
  }
  OPREG_DEV double value() const { return static_cast<double>(sum) - static_cast<double>(comp); }
};

template <class X>
using DwSum = std::conditional_t<std::is_same_v<X, F32>, Kahan, PlainSum>;

// A dW partial as written to memory (launch.h's partial_bytes): what DwSum<X>::value() gives.
template <class X>
using DwPartial = std::conditional_t<std::is_same_v<X, F32>, double, float>;

// An access's VEC partials to `out` (16-byte stores where they fill them).
template <class X, int VEC>
OPREG_DEV void store_partials(DwPartial<X>* out, const DwSum<X> (&acc)[VEC]) {
  if constexpr (std::is_same_v<DwPartial<X>, float>) {
    Pack<F32, VEC> pv;
#pragma unroll
    for (int e = 0; e < VEC; ++e) pv.v[e] = acc[e].value();
    store_pack<F32, VEC>(out, pv);
  } else if constexpr (VEC % 2 == 0) {
#pragma unroll
    for (int e = 0; e < VEC; e += 2) reinterpret_cast<double2*>(out)[e / 2] = make_double2(acc[e].value(), acc[e + 1].value());
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) out[e] = acc[e].value();
  }
}

// A block's partial row where several rows share the block (walk.slots > 1: their columns
// coincide): each slot's value(k, e) of column walk.column<VEC>(k) + e added in slot order in
// `combine` (`hidden` entries of shared memory), then the row written to `out`. Walk: a row walk
// (the rows kernels' RowWalk, layer_norm's LnWalk).
template <int VEC, int NV, class Walk, class T, class Value>
OPREG_DEV void combine_slots(const Walk& walk, std::int64_t hidden, T* combine, T* out, const Value& value) {
  for (int s = 0; s < walk.slots; ++s) {
    if (walk.slot == s) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < walk.mine) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const int c = walk.template column<VEC>(k) + e;
            combine[c] = (s == 0 ? T(0) : combine[c]) + value(k, e);
          }
        }
      }
    }
    __syncthreads();
  }
  for (int c = static_cast<int>(threadIdx.x); c < hidden; c += static_cast<int>(blockDim.x)) out[c] = combine[c];
}

// ---- Asynchronous 16-byte copies into shared memory (cp.async, sm_80 and later), the staging
// of the row kernels: a thread copies its own accesses of a row a few rows ahead into its own
// slots, and waits for its own copies only (no barrier). Where cp.async is missing (HIP, older
// targets) the same calls copy synchronously, so the layout and the results are the same.
#if !defined(OPREG_USE_HIP) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
#define OPREG_GPU_CP_ASYNC 1
#else
#define OPREG_GPU_CP_ASYNC 0
#endif

// Programmatic dependent launch (sm_90, CUDA): the dW finisher is launched while the backward
// kernel drains and waits here for it to complete (and its writes to be visible); the backward
// kernel lets it launch once its blocks are past their row loop.
OPREG_DEV void wait_for_previous_kernel() {
#if !defined(OPREG_USE_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
OPREG_DEV void let_next_kernel_launch() {
#if !defined(OPREG_USE_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

OPREG_DEV void copy16_async(void* smem, const void* gmem) {
#if OPREG_GPU_CP_ASYNC
  // .cg: through L2 only, so the streamed rows leave L1 to the weight.
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(smem))),
      "l"(gmem)
      : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
#endif
}
OPREG_DEV void async_commit() {
#if OPREG_GPU_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most `pending` (0..3) of this thread's latest commit groups are in flight.
OPREG_DEV void async_wait(int pending) {
#if OPREG_GPU_CP_ASYNC
  switch (pending) {
    case 0:
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
      break;
    case 1:
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
      break;
    case 2:
      asm volatile("cp.async.wait_group 2;\n" ::: "memory");
      break;
    default:
      asm volatile("cp.async.wait_group 3;\n" ::: "memory");
      break;
  }
#else
  static_cast<void>(pending);
#endif
}

// The accesses k < count(...) of a thread whose first access is `lane`, `tpr` apart, that fall
// inside a row of `nvec` accesses (at most nv).
OPREG_DEV int accesses(int lane, int tpr, int nvec, int nv) {
  if (lane >= nvec) return 0;
  const int n = (nvec - lane + tpr - 1) / tpr;
  return n < nv ? n : nv;
}

}  // namespace dev

// ---- Host helpers shared by the launchers.

// Blocks of `kernel` that fit on one multiprocessor at this block size and shared memory, cached
// per (kernel, device, block, smem): the runtime's occupancy query reads the kernel's attributes.
template <class Kernel>
gpuError_t occupancy(Kernel kernel, int device, int threads, std::size_t smem, int& blocks) {
  struct Key {
    const void* kernel;
    int device;
    int threads;
    std::size_t smem;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    std::size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.kernel) ^ (static_cast<std::size_t>(k.device) << 48) ^
             (static_cast<std::size_t>(k.threads) << 32) ^ k.smem;
    }
  };
  static std::mutex mutex;
  static std::unordered_map<Key, int, Hash> cache;
  const Key key{reinterpret_cast<const void*>(kernel), device, threads, smem};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) {
      blocks = it->second;
      return gpuSuccess;
    }
  }
  const gpuError_t err = gpuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem);
  if (err != gpuSuccess) return err;
  if (blocks < 1) blocks = 1;
  std::lock_guard<std::mutex> lock(mutex);
  cache.emplace(key, blocks);
  return gpuSuccess;
}

// Lets `kernel` take `bytes` of dynamic shared memory on `device` (the current one), once per
// kernel, device and size. Past 48 KiB a block needs the opt-in, and that limit counts the static
// shared memory too (the kernels' reduction buffers, under 1 KiB). The opt-in is a function
// attribute of each device's context: one made on cuda:1 does not let the kernel launch on cuda:0.
template <class Kernel>
gpuError_t allow_smem(Kernel kernel, int device, std::size_t bytes) {
  if (bytes + 1024u <= 48u * 1024u) return gpuSuccess;
  struct Key {
    const void* kernel;
    int device;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    std::size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.kernel) ^ (static_cast<std::size_t>(k.device) << 48);
    }
  };
  static std::mutex mutex;
  static std::unordered_map<Key, std::size_t, Hash> allowed;
  std::lock_guard<std::mutex> lock(mutex);
  std::size_t& have = allowed[Key{reinterpret_cast<const void*>(kernel), device}];
  if (have >= bytes) return gpuSuccess;
  const gpuError_t err =
      gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel), gpuFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(bytes));
  if (err == gpuSuccess) have = bytes;
  return err;
}

// Calls f.template operator()<X, W, kVec>() with the element types of (x, weight) and kVec, the
// elements of x in a 16-byte access.
template <class F>
gpuError_t with_types(Elem xt, Elem wt, F&& f) {
  using namespace dev;
  const auto call = [&]<class X, class W>() { return f.template operator()<X, W, 16 / sizeof(typename X::T)>(); };
  switch (xt) {
    case Elem::f32:
      return call.template operator()<F32, F32>();
    case Elem::f16:
      return wt == Elem::f32 ? call.template operator()<F16, F32>() : call.template operator()<F16, F16>();
    case Elem::bf16:
      return wt == Elem::f32 ? call.template operator()<BF16, F32>() : call.template operator()<BF16, BF16>();
  }
  return gpuSuccess;
}

// Calls pick.template operator()<NV>() for the NV among NVs that equals `nv` (the 16-byte accesses
// per thread a plan chose): only those instantiations exist. Any other nv is a shape no plan
// makes: gpuErrorInvalidValue.
template <int... NVs, class Pick>
gpuError_t with_nv(int nv, Pick&& pick) {
  gpuError_t err = gpuErrorInvalidValue;
  static_cast<void>(((nv == NVs && ((err = pick.template operator()<NVs>()), true)) || ...));
  return err;
}

}  // namespace opreg::cuda_like
