// rms_norm with the row in one block, or in a thread-block cluster (cuda.rms_norm.{fwd,bwd}.rows
// and .cluster: the same kernels, launched with a cluster dimension `csize` of 1 or more).
//
// A row is spread over `csize` blocks of `tpr` threads, each thread owning `NV` accesses of `VEC`
// elements (16 bytes when every row is 16-byte aligned, else single elements); short rows share a
// block (`slots` rows of tpr <= 32 threads, several rows per warp when tpr < 32). Every element
// of x (and dy) is read from memory once.
//
// The rows forward keeps the row in registers (x and, where they take few registers, the weights
// loaded together before the reduction) and runs a block per row group: nothing of a block's has
// to wait for another row, and the hardware overlaps many short blocks.
//
// The backward (and the cluster forward) runs a persistent grid: as many blocks as fit at once,
// each looping over rows, so a thread keeps the same columns for the whole launch and
// accumulates dW for them in registers (compensated f32 for f32 inputs), writing one partial row
// per block or cluster, which launch_dw_finish sums in a fixed order: no atomics, the same bits
// on every run. With STAGE, a thread copies its accesses of a row into shared memory (cp.async,
// its own slots, no barrier) `stages - 1` rows ahead of use and reads them from there before the
// row's reduction and again after it; without, it loads them into registers. A cluster adds its
// blocks' partial sums through distributed shared memory after one cluster barrier per row.
#include <algorithm>

#include "backends/cuda_like/rms_norm/device.cuh"

#if OPREG_GPU_CLUSTERS
#include <cooperative_groups.h>
#endif

namespace opreg::cuda_like {
namespace {

using namespace dev;

// Which row of group g this thread works on, and which of its accesses fall inside the row.
struct RowWalk {
  std::int64_t rows;
  std::int64_t hidden;
  std::int64_t groups;  // row groups (slots rows each)
  std::int64_t first;   // this block's first group
  std::int64_t step;    // groups between two of this block's
  int slots;
  int slot;
  int lane;  // thread within its row's threads (0 writes the row's rstd)
  int col;   // this thread's first access within the row (clusters: past the lower ranks' slices)
  int tpr;
  int mine;  // accesses of this thread that fall inside a row
  OPREG_DEV RowWalk(std::int64_t rows_, std::int64_t hidden_, int tpr_, int slots_, int csize, int nvec, int nv)
      : rows(rows_),
        hidden(hidden_),
        groups((rows_ + slots_ - 1) / slots_),
        first(blockIdx.x / csize),
        step(gridDim.x / csize),
        slots(slots_),
        slot(static_cast<int>(threadIdx.x) / tpr_),
        lane(static_cast<int>(threadIdx.x) - slot * tpr_),
        col(static_cast<int>(blockIdx.x % csize) * tpr_ * nv + lane),
        tpr(tpr_),
        mine(accesses(col, tpr_, nvec, nv)) {}
  OPREG_DEV std::int64_t row(std::int64_t g) const { return g * slots + slot; }
  OPREG_DEV int count(std::int64_t g) const { return g < groups && row(g) < rows ? mine : 0; }
  template <int VEC>
  OPREG_DEV std::int64_t at(std::int64_t g) const {
    return row(g) * hidden + static_cast<std::int64_t>(col) * VEC;
  }
  template <int VEC>
  OPREG_DEV int column(int k) const {
    return (col + k * tpr) * VEC;
  }
};

// Shared-memory slots of the staged path: [stage][tensor][access][thread] 16-byte units, so a
// warp's accesses of one (stage, tensor, access) are 512 consecutive bytes.
template <int NB, int NV>
struct Stages {
  uint4* base;
  int threads;
  OPREG_DEV uint4* slot(int stage, int tensor, int k) const {
    return base + ((stage * NB + tensor) * NV + k) * threads + static_cast<int>(threadIdx.x);
  }
};

// Access k of tensor `tensor` of the current row: its slot of `stage` (STAGED), else its registers.
template <bool STAGED, int NB, int NV, class X, int VEC>
OPREG_DEV Pack<X, VEC> row_access(const Stages<NB, NV>& st, int stage, int tensor, const Pack<X, VEC> (&regs)[NV],
                                  int k) {
  if constexpr (STAGED) {
    return *reinterpret_cast<const Pack<X, VEC>*>(st.slot(stage, tensor, k));
  } else {
    return regs[k];
  }
}

// The row total of a per-block partial over a cluster: published in `slot` (two, alternating per
// row, so one cluster barrier per row suffices: a block can only overwrite a slot after every
// block passed the next row's barrier, i.e. finished reading it), read from every block in rank
// order, so every block gets the same bits. In f64: the blocks' totals as row_total gave them
// (scaled back past f32's range where a block's own share was out of it) add up for any finite
// input.
OPREG_DEV double cluster_total(double block_part, double* slot, int csize) {
#if OPREG_GPU_CLUSTERS && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) *slot = block_part;
  cluster.sync();
  double total = 0.0;
  for (int r = 0; r < csize; ++r) total += *cluster.map_shared_rank(slot, r);
  return total;
#else
  static_cast<void>(slot);
  static_cast<void>(csize);
  return block_part;
#endif
}

// No block of a cluster may leave while another can still read its shared memory.
OPREG_DEV void cluster_exit(int csize) {
#if OPREG_GPU_CLUSTERS && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
  if (csize > 1) cooperative_groups::this_cluster().sync();
#else
  static_cast<void>(csize);
#endif
}

// The scales (offset + w) of a thread's columns. Holding them in registers for the whole launch
// costs more registers than the kernels have (ptxas spills), so they come per row from L1
// (the weight is read, converted, offset and, for `none`, rounded again on every use), or, where
// `held` shared memory is given (the backward, whose per-element arithmetic is what limits it
// with 16-bit inputs), once per launch as f32 into thread-private slots: two 16-byte shared loads
// per access instead.
template <class W, int VEC, int NV>
struct Scales {
  static constexpr int kQuads = VEC / 4;  // float4 per access (the held form needs VEC % 4 == 0)
  const typename W::T* w;
  float4* held;  // [access][quad][thread] or nullptr
  int threads;
  float offset;
  OPREG_DEV float4* slot(int k, int q) const {
    return held + (k * kQuads + q) * threads + static_cast<int>(threadIdx.x);
  }
  OPREG_DEV Pack<W, VEC> raw(const RowWalk& walk, int k) const { return load_pack<W, VEC>(w + walk.column<VEC>(k)); }
  // The scales of an access from its weights as loaded (raw(); anything without a weight).
  template <Mode C>
  OPREG_DEV void from_raw(const Pack<W, VEC>& wv, float (&s)[VEC]) const {
    if (w == nullptr) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[e] = 1.0f;
      return;
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float v = offset + W::load(wv.v[e]);
      s[e] = C == Mode::none ? round_to<W>(v) : v;
    }
  }
  template <Mode C>
  OPREG_DEV void compute(const RowWalk& walk, int k, float (&s)[VEC]) const {
    if (w == nullptr) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[e] = 1.0f;
      return;
    }
    from_raw<C>(raw(walk, k), s);
  }
  template <Mode C>
  OPREG_DEV void hold(const RowWalk& walk) const {
    if constexpr (kQuads > 0) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < walk.mine) {
          float s[VEC];
          compute<C>(walk, k, s);
#pragma unroll
          for (int q = 0; q < kQuads; ++q)
            *slot(k, q) = make_float4(s[4 * q], s[4 * q + 1], s[4 * q + 2], s[4 * q + 3]);
        }
      }
    }
  }
  template <Mode C>
  OPREG_DEV void get(const RowWalk& walk, int k, float (&s)[VEC]) const {
    if constexpr (kQuads > 0) {
      if (held != nullptr) {
#pragma unroll
        for (int q = 0; q < kQuads; ++q) {
          const float4 v = *slot(k, q);
          s[4 * q] = v.x;
          s[4 * q + 1] = v.y;
          s[4 * q + 2] = v.z;
          s[4 * q + 3] = v.w;
        }
        return;
      }
    }
    compute<C>(walk, k, s);
  }
};

// Casting as a template inside the row: one uniform branch per row instead of a choice per element.
template <class F>
OPREG_DEV void by_casting(Mode c, F&& f) {
  switch (c) {
    case Mode::llama:
      f(std::integral_constant<Mode, Mode::llama>{});
      break;
    case Mode::gemma:
      f(std::integral_constant<Mode, Mode::gemma>{});
      break;
    case Mode::none:
      f(std::integral_constant<Mode, Mode::none>{});
      break;
  }
}

template <class X, int VEC, int NV, Mode C, class Access, class ScaleAccess>
OPREG_DEV void fwd_row_out(typename X::T* y, int tpr, int count, float rstd, const Access& xk, const ScaleAccess& sk) {
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    if (k < count) {
      float s[VEC];
      sk(k, s, std::integral_constant<Mode, C>{});
      const Pack<X, VEC> xv = xk(k);
      Pack<X, VEC> out;
#pragma unroll
      for (int e = 0; e < VEC; ++e) out.v[e] = X::store(xhat_of<X>(X::load(xv.v[e]), rstd, C == Mode::gemma) * s[e]);
      store_pack<X, VEC>(y + k * tpr * VEC, out);
    }
  }
}

// CLUSTER: launched with a cluster dimension (csize > 1); the row kernels proper have no
// cluster code at all. STAGE: the 16-byte path stages rows in shared memory (else registers,
// as the scalar path always does). Without staging, the row's weights are loaded together with
// the row, before the reduction, where they take few registers (64 bytes a thread).
template <class X, class W, int VEC, int NV, bool CLUSTER, bool STAGE>
__global__ void __launch_bounds__(max_threads_fwd(NV, VEC))
    fwd_rows_kernel(RowNormFwd p, int tpr, int slots, int stages, int csize) {
  using XT = typename X::T;
  constexpr bool kStaged = STAGE && VEC * sizeof(XT) == 16;
  constexpr bool kEarlyW = !kStaged && NV * VEC * sizeof(typename W::T) <= 64;
  extern __shared__ uint4 staged[];
  __shared__ float red[kRedSlots];
  __shared__ float red2[kRedSlots];
  __shared__ double totals[2];
  const auto* __restrict__ x = static_cast<const XT*>(p.x);
  const RowWalk walk(p.rows, p.hidden, tpr, slots, CLUSTER ? csize : 1, static_cast<int>(p.hidden / VEC), NV);
  const Scales<W, VEC, NV> sc{static_cast<const typename W::T*>(p.weight), nullptr, static_cast<int>(blockDim.x),
                              static_cast<float>(p.offset)};
  const Stages<1, NV> st{staged, static_cast<int>(blockDim.x)};
  const auto fetch = [&](std::int64_t g, int stage) {
    if constexpr (kStaged) {
      const int count = walk.count(g);
      const XT* src = x + (count > 0 ? walk.at<VEC>(g) : 0);
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) copy16_async(st.slot(stage, 0, k), src + k * tpr * VEC);
      }
      async_commit();
    }
  };
  for (int s = 0; s + 1 < stages; ++s) fetch(walk.first + s * walk.step, s);
  int stage = 0;
  int parity = 0;
  for (std::int64_t g = walk.first; g < walk.groups; g += walk.step, parity ^= 1) {
    fetch(g + (stages - 1) * walk.step, (stage + stages - 1) % stages);
    async_wait(stages - 1);
    const int count = walk.count(g);
    const std::int64_t at = count > 0 ? walk.at<VEC>(g) : 0;
    Pack<X, VEC> regs[NV];
    Pack<W, VEC> wregs[NV];
    if constexpr (!kStaged) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) regs[k] = load_pack_once<X, VEC>(x + at + k * tpr * VEC);
      }
      if (p.residual != nullptr) {  // fused_add_rms_norm: s = X(x + residual), stored and normalised
        const auto* res = static_cast<const XT*>(p.residual) + at;
        XT* sum = static_cast<XT*>(p.s) + at;
#pragma unroll
        for (int k = 0; k < NV; ++k) {
          if (k < count) {
            const Pack<X, VEC> rv = load_pack_once<X, VEC>(res + k * tpr * VEC);
#pragma unroll
            for (int e = 0; e < VEC; ++e) regs[k].v[e] = X::store(X::load(regs[k].v[e]) + X::load(rv.v[e]));
            store_pack<X, VEC>(sum + k * tpr * VEC, regs[k]);
          }
        }
      }
      if constexpr (kEarlyW) {
        if (sc.w != nullptr) {
#pragma unroll
          for (int k = 0; k < NV; ++k) {
            if (k < count) wregs[k] = sc.raw(walk, k);
          }
        }
      }
    }
    // The row's accesses: the staged slots (read before and after the reduction), or registers.
    const auto xk = [&](int k) { return row_access<kStaged>(st, stage, 0, regs, k); };
    const auto squares = [&](float scale) {
      float ss = 0.0f;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) {
          const Pack<X, VEC> xv = opaque(xk(k));
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float f = X::load(xv.v[e]) * scale;
            ss += f * f;
          }
        }
      }
      return ss;
    };
    const RowTotal ss = row_total(squares, tpr, red, red2, parity, kTinySquares);
    float rstd;
    if constexpr (CLUSTER) {
      rstd = rstd_of(cluster_total(ss.value, &totals[parity], csize), p.hidden, p.eps);
    } else if (ss.scaled) {
      rstd = rstd_of(ss.value, p.hidden, p.eps);
    } else {
      const float mean = p.hidden > 0 ? static_cast<float>(ss.value) / static_cast<float>(p.hidden) : 0.0f;
      rstd = 1.0f / sqrtf(mean + static_cast<float>(p.eps));
    }
    XT* y = static_cast<XT*>(p.y) + at;
    const auto sk = [&](int k, float(&s)[VEC], auto c) {
      if constexpr (kEarlyW) {
        sc.template from_raw<decltype(c)::value>(wregs[k], s);
      } else {
        sc.template get<decltype(c)::value>(walk, k, s);
      }
    };
    by_casting(p.mode, [&](auto c) { fwd_row_out<X, VEC, NV, decltype(c)::value>(y, tpr, count, rstd, xk, sk); });
    if (walk.row(g) < p.rows && walk.col == 0) p.rstd[walk.row(g)] = rstd;
    stage = stage + 1 == stages ? 0 : stage + 1;
  }
  async_wait(0);
  if constexpr (CLUSTER) cluster_exit(csize);
}

// dx (and dW) for one row, given its accesses xk(k), dyk(k).
template <class X, class W, int VEC, int NV, Mode C, class XAccess, class DyAccess>
OPREG_DEV void bwd_row_out(const Scales<W, VEC, NV>& sc, typename X::T* dx, const RowWalk& walk, int count, float rstd,
                           float coeff, bool want_dw, const XAccess& xk, const DyAccess& dyk,
                           DwSum<X> (&acc)[NV][VEC], const typename X::T* ds) {
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    if (k < count) {
      float s[VEC];
      sc.template get<C>(walk, k, s);
      if (ds != nullptr) {  // fused_add_rms_norm's ds_out, at the row's offset
        const Pack<X, VEC> dsv = load_pack<X, VEC>(ds + k * walk.tpr * VEC);
        store_pack<X, VEC>(dx + k * walk.tpr * VEC,
                           dx_pack<X, VEC, C == Mode::gemma>(dyk(k), s, xk(k), rstd, coeff, want_dw, acc[k], &dsv));
      } else {
        store_pack<X, VEC>(dx + k * walk.tpr * VEC,
                           dx_pack<X, VEC, C == Mode::gemma>(dyk(k), s, xk(k), rstd, coeff, want_dw, acc[k]));
      }
    }
  }
}

template <class X, class W, int VEC, int NV, Mode C, class XAccess, class DyAccess>
OPREG_DEV float bwd_row_dot(float scale, const Scales<W, VEC, NV>& sc, const RowWalk& walk, int count,
                            const XAccess& xk, const DyAccess& dyk) {
  float dot = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    if (k < count) {
      float s[VEC];
      sc.template get<C>(walk, k, s);
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[e] = opaque(s[e]);
      dot = dot_pack<X, VEC>(dot, scale, opaque(dyk(k)), s, opaque(xk(k)));
    }
  }
  return dot;
}

// Shared memory: the held scales (if `hold`), the stages (x and dy), then (slots > 1) `hidden`
// floats where the slots' dW partials are added in slot order. Partial rows: one per block, or
// per cluster.
template <class X, class W, int VEC, int NV, bool CLUSTER, bool STAGE>
__global__ void __launch_bounds__(max_threads_bwd(NV, VEC))
    bwd_rows_kernel(RowNormBwd p, int tpr, int slots, int stages, int csize, int hold, void* partial_out) {
  using XT = typename X::T;
  constexpr bool kStaged = STAGE && VEC * sizeof(XT) == 16;
  extern __shared__ uint4 staged_all[];
  __shared__ float red[kRedSlots];
  __shared__ float red2[kRedSlots];
  __shared__ double totals[2];
  const auto* __restrict__ x = static_cast<const XT*>(p.x);
  const auto* dy = static_cast<const XT*>(p.dy);  // may be dx: no __restrict__
  const RowWalk walk(p.rows, p.hidden, tpr, slots, CLUSTER ? csize : 1, static_cast<int>(p.hidden / VEC), NV);
  const int threads = static_cast<int>(blockDim.x);
  const bool held = kStaged && hold != 0;
  uint4* staged = staged_all + (held ? NV * (VEC / 4) * threads : 0);
  const Scales<W, VEC, NV> sc{static_cast<const typename W::T*>(p.weight),
                              held ? reinterpret_cast<float4*>(staged_all) : nullptr, threads, static_cast<float>(p.offset)};
  if (held) by_casting(p.mode, [&](auto c) { sc.template hold<decltype(c)::value>(walk); });
  const Stages<2, NV> st{staged, threads};
  auto* partial = static_cast<DwPartial<X>*>(partial_out);
  const bool want_dw = partial != nullptr;
  const double inv_h = p.hidden > 0 ? 1.0 / static_cast<double>(p.hidden) : 0.0;
  const auto fetch = [&](std::int64_t g, int stage) {
    if constexpr (kStaged) {
      const int count = walk.count(g);
      const std::int64_t at = count > 0 ? walk.at<VEC>(g) : 0;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) {
          copy16_async(st.slot(stage, 0, k), x + at + k * tpr * VEC);
          copy16_async(st.slot(stage, 1, k), dy + at + k * tpr * VEC);
        }
      }
      async_commit();
    }
  };
  DwSum<X> acc[NV][VEC];
  for (int s = 0; s + 1 < stages; ++s) fetch(walk.first + s * walk.step, s);
  int stage = 0;
  int parity = 0;
  for (std::int64_t g = walk.first; g < walk.groups; g += walk.step, parity ^= 1) {
    fetch(g + (stages - 1) * walk.step, (stage + stages - 1) % stages);
    const int count = walk.count(g);
    const float rstd = walk.row(g) < p.rows ? p.rstd[walk.row(g)] : 0.0f;
    async_wait(stages - 1);
    const std::int64_t at = count > 0 ? walk.at<VEC>(g) : 0;
    Pack<X, VEC> xregs[NV];
    Pack<X, VEC> dyregs[NV];
    if constexpr (!kStaged) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < count) {
          xregs[k] = load_pack<X, VEC>(x + at + k * tpr * VEC);
          dyregs[k] = load_pack<X, VEC>(dy + at + k * tpr * VEC);
        }
      }
    }
    const auto xk = [&](int k) { return row_access<kStaged>(st, stage, 0, xregs, k); };
    const auto dyk = [&](int k) { return row_access<kStaged>(st, stage, 1, dyregs, k); };
    const auto terms = [&](float scale) {
      return p.mode == Mode::none ? bwd_row_dot<X, W, VEC, NV, Mode::none>(scale, sc, walk, count, xk, dyk)
                                  : bwd_row_dot<X, W, VEC, NV, Mode::llama>(scale, sc, walk, count, xk, dyk);
    };
    double dot = row_total(terms, tpr, red, red2, parity, 0.0f).value;
    if constexpr (CLUSTER) dot = cluster_total(dot, &totals[parity], csize);
    const float coeff = coeff_of(rstd, dot, inv_h);
    XT* dx = static_cast<XT*>(p.dx) + at;
    const XT* ds = p.ds_out != nullptr ? static_cast<const XT*>(p.ds_out) + at : nullptr;
    by_casting(p.mode, [&](auto c) {
      bwd_row_out<X, W, VEC, NV, decltype(c)::value>(sc, dx, walk, count, rstd, coeff, want_dw, xk, dyk, acc, ds);
    });
    stage = stage + 1 == stages ? 0 : stage + 1;
  }
  async_wait(0);
  if (want_dw) {
    let_next_kernel_launch();
    DwPartial<X>* out = partial + walk.first * p.hidden;
    if (slots == 1) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        if (k < walk.mine) store_partials<X, VEC>(out + walk.column<VEC>(k), acc[k]);
      }
    } else {
      auto* combine = reinterpret_cast<DwPartial<X>*>(staged + (kStaged ? stages * 2 * NV * threads : 0));
      combine_slots<VEC, NV>(walk, p.hidden, combine, out, [&](int k, int e) { return acc[k][e].value(); });
    }
  }
  if constexpr (CLUSTER) cluster_exit(csize);
}

// ---- Launchers: the instantiations are (x, weight) dtypes x {16-byte, scalar} x NV.

// The direction's rows kernel (only the one named is instantiated).
template <bool BWD, class X, class W, int VEC, int NV, bool CLUSTER, bool STAGE>
constexpr auto rows_kernel = fwd_rows_kernel<X, W, VEC, NV, CLUSTER, STAGE>;
template <class X, class W, int VEC, int NV, bool CLUSTER, bool STAGE>
constexpr auto rows_kernel<true, X, W, VEC, NV, CLUSTER, STAGE> = bwd_rows_kernel<X, W, VEC, NV, CLUSTER, STAGE>;

// Calls f(kernel) with the instantiation for the direction (BWD), dtypes and launch shape: the
// cluster launches' (fixed accesses per thread), the scalar path's, or one of the 16-byte path's.
template <bool BWD, class F>
gpuError_t with_kernel(Elem xt, Elem wt, const RowShape& s, F&& f) {
  return with_types(xt, wt, [&]<class X, class W, int kVec>() -> gpuError_t {
    const auto pick = [&]<int VEC, int NV, bool CLUSTER, bool STAGE>() -> gpuError_t {
      return f(rows_kernel<BWD, X, W, VEC, NV, CLUSTER, STAGE>);
    };
    const auto staged_or_not = [&]<int NV>() -> gpuError_t {
      return s.stages > 0 ? pick.template operator()<kVec, NV, false, true>()
                          : pick.template operator()<kVec, NV, false, false>();
    };
    if (s.cluster > 1) return pick.template operator() < kVec, BWD ? kClusterBwdNv : kClusterFwdNv, true, true > ();
    if (s.vec == 1) return pick.template operator()<1, 8, false, false>();
    if constexpr (BWD) {
      return with_nv<1, 2, 4>(s.nv, staged_or_not);
    } else {
      return with_nv<2, 4, 8>(s.nv, staged_or_not);
    }
  });
}

// Whether a launch holds the backward's scales in shared memory (the staged 16-byte path only).
bool holds_scales(const RowShape& s) { return s.vec > 1 && s.stages > 0 && s.hold; }
// Stages as the kernels take them: at least 1 (the register paths ignore it).
int kernel_stages(const RowShape& s) { return s.vec == 1 || s.stages < 1 ? 1 : s.stages; }

// Shared memory of a row kernel's block: its stages (16-byte path), and backward with several
// rows a block, the slots' dW sums.
std::size_t rows_smem(bool backward, const RowShape& s, std::int64_t hidden, Elem x_type) {
  const int threads = s.tpr * s.slots;
  std::size_t bytes = s.vec == 1 ? 0 : static_cast<std::size_t>(s.stages) * stage_bytes(backward, s.nv, threads);
  if (backward && holds_scales(s)) bytes += held_scale_bytes(s.nv, s.vec, threads);
  if (backward && s.slots > 1) bytes += static_cast<std::size_t>(hidden) * partial_bytes(x_type);
  return bytes;
}

#if OPREG_GPU_CLUSTERS
gpuLaunchConfig_t cluster_config(const RowShape& s, int grid, int threads, std::size_t smem, gpuStream_t stream,
                                 gpuLaunchAttribute& attr) {
  attr = gpuLaunchAttribute{};
  attr.id = gpuLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(s.cluster);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  gpuLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  return config;
}
#endif

// Grid: as many blocks (or clusters) as are resident at once, no more than there are row groups.
template <class Kernel>
gpuError_t plan_rows(Kernel kernel, std::int64_t rows, const RowShape& s, const GpuInfo& g, std::size_t smem,
                     Launch& l) {
  l.threads = s.tpr * s.slots;
  l.smem = smem;
  l.call = "cudaFuncSetAttribute";
  if (gpuError_t err = allow_smem(kernel, g.device, smem); err != gpuSuccess) return err;
  const std::int64_t groups = (rows + s.slots - 1) / s.slots;
  std::int64_t resident = 0;
  if (s.cluster > 1) {
#if OPREG_GPU_CLUSTERS
    gpuLaunchAttribute attr;
    const gpuLaunchConfig_t config = cluster_config(s, s.cluster * g.sm_count, l.threads, smem, nullptr, attr);
    int clusters = 0;
    l.call = "cudaOccupancyMaxActiveClusters";
    if (gpuError_t err = gpuOccupancyMaxActiveClusters(&clusters, kernel, &config); err != gpuSuccess) return err;
    resident = clusters > 0 ? clusters : 1;
#else
    return gpuErrorNotSupported;
#endif
  } else {
    int per_sm = 0;
    l.call = "cudaOccupancyMaxActiveBlocksPerMultiprocessor";
    if (gpuError_t err = occupancy(kernel, g.device, l.threads, smem, per_sm); err != gpuSuccess) return err;
    if (s.per_sm > 0 && s.per_sm < per_sm) per_sm = s.per_sm;
    // per_sm < 0: one group a block (not persistent), for comparison in the benchmark's sweep.
    resident = s.per_sm < 0 ? groups : static_cast<std::int64_t>(per_sm) * g.sm_count;
  }
  // (A grid past 2^30 blocks loops instead.)
  const std::int64_t units = std::max<std::int64_t>(1, std::min({groups, resident, std::int64_t{1} << 30}));
  l.grid = static_cast<int>(units * s.cluster);
  l.partials = units;
  return gpuSuccess;
}

template <class Kernel, class... Args>
gpuError_t launch_rows(Kernel kernel, const RowShape& s, const Launch& l, gpuStream_t stream, Args... args) {
  if (s.cluster > 1) {
#if OPREG_GPU_CLUSTERS
    gpuLaunchAttribute attr;
    const gpuLaunchConfig_t config = cluster_config(s, l.grid, l.threads, l.smem, stream, attr);
    return gpuLaunchKernelEx(&config, kernel, args...);
#else
    return gpuErrorNotSupported;
#endif
  }
  kernel<<<l.grid, l.threads, l.smem, stream>>>(args...);
  return gpuGetLastError();
}

}  // namespace

gpuError_t plan_fwd_rows(const RowNormFwd& p, const RowShape& s, const GpuInfo& g, Launch& l) {
  l.kernel = s.cluster > 1 ? "rms_norm_fwd_rows (cluster)" : "rms_norm_fwd_rows";
  return with_kernel<false>(
      p.x_type, p.w_type, s, [&](auto kernel) { return plan_rows(kernel, p.rows, s, g, rows_smem(false, s, p.hidden, p.x_type), l); });
}

gpuError_t launch_fwd_rows(const RowNormFwd& p, const RowShape& s, const Launch& l, gpuStream_t stream) {
  return with_kernel<false>(p.x_type, p.w_type, s, [&](auto kernel) {
    return launch_rows(kernel, s, l, stream, p, s.tpr, s.slots, kernel_stages(s), s.cluster);
  });
}

gpuError_t plan_bwd_rows(const RowNormBwd& p, const RowShape& s, const GpuInfo& g, Launch& l) {
  l.kernel = s.cluster > 1 ? "rms_norm_bwd_rows (cluster)" : "rms_norm_bwd_rows";
  return with_kernel<true>(p.x_type, p.w_type, s, [&](auto kernel) -> gpuError_t {
    if (gpuError_t err = plan_rows(kernel, p.rows, s, g, rows_smem(true, s, p.hidden, p.x_type), l); err != gpuSuccess) {
      return err;
    }
    if (p.dweight == nullptr) l.partials = 0;
    l.workspace = static_cast<std::size_t>(l.partials) * static_cast<std::size_t>(p.hidden) * partial_bytes(p.x_type);
    return gpuSuccess;
  });
}

gpuError_t launch_bwd_rows(const RowNormBwd& p, const RowShape& s, const Launch& l, void* partial,
                           gpuStream_t stream) {
  return with_kernel<true>(p.x_type, p.w_type, s, [&](auto kernel) {
    return launch_rows(kernel, s, l, stream, p, s.tpr, s.slots, kernel_stages(s), s.cluster, holds_scales(s) ? 1 : 0,
                       p.dweight != nullptr ? partial : nullptr);
  });
}

bool cluster_kernels_built() { return OPREG_GPU_CLUSTERS != 0; }

}  // namespace opreg::cuda_like
