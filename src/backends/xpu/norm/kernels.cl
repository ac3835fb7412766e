// layer_norm and group_norm forward and backward (src/backends/xpu/norm/list.cpp launches them;
// semantics: docs/ops.md, src/ops/reference).
//
// Both ops are one normalisation over `sets` contiguous sets of channels x spread elements
// (src/ops/families.h's NormSets): a layer_norm row is a set of H channels of spread 1; a
// group_norm (n, g) is a set of C / G channels of spread S. Set k's element j has the parameter
// (k % groups) * channels + j / spread.
//
// Geometry: as rms_norm's, teams of `team` work-items (a power of two) take one set at a time,
// their work-items striding over the set's elements, the groups striding over the sets
// (formats.cl's Teams). Statistics are two-pass, never E[x^2] - mean^2: the mean from
// compensated sums, then the squared deviations from it, scaled by a power of two as rms_norm's
// squares are (formats.cl's add_square), so huge values neither overflow nor lose the variance.
//
// dweight and dbias: a column kernel (one work-item per parameter, groups striding over
// parameter tiles and chunks of the batch) writes per-chunk compensated partials, which
// partials_reduce sums in a fixed order: no atomics, the same bits every run.

// The parameter of element j of a set whose parameters start at `base`.
inline uint norm_param(uint base, uint j, uint spread) { return base + (spread == 1 ? j : j / spread); }

// A parameter (weight or bias) as a value: `absent` when the op has none.
inline float norm_param_value(global const uchar* p, uint c, int present, float absent, int pf) {
  return present ? load_elem(p, c, pf) : absent;
}

// Each work-item's (a, b) pair summed over its team by a tree in local memory, the same order
// every time; `scratch` has two floats per work-item. Every work-item of the group must call it.
inline float2 team_sum2(local float* scratch, uint lid, uint t, uint team, float a, float b) {
  local float* as = scratch;
  local float* bs = scratch + get_local_size(0);
  as[lid] = a;
  bs[lid] = b;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = team >> 1; s > 0; s >>= 1) {
    if (t < s) {
      as[lid] += as[lid + s];
      bs[lid] += bs[lid + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float2 total = (float2)(as[lid - t], bs[lid - t]);
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}

inline void norm_fwd(global const uchar* x, global const uchar* w, global const uchar* b, global uchar* y,
                     global float* mean_out, global float* rstd_out, ulong sets, uint groups, uint channels,
                     uint spread, uint team, float eps, int has_weight, int has_bias, local float* scratch, int xf,
                     int pf) {
  const uint size = channels * spread;
  const Teams g = teams_of(team, size);
  const uint t = g.t;
  for (ulong base = g.first; base < sets; base += g.stride) {
    const ulong set = team_row(g, base);
    const bool valid = set < sets;
    const ulong first = set * size;
    // The mean: a compensated sum per work-item, joined by the tree.
    float sum = 0.0f;
    float comp = 0.0f;
    for (uint k = 0; k < g.steps; ++k) {
      const uint j = t + k * team;
      if (valid && j < size) compensated_add(&sum, &comp, load_elem(x, first + j, xf));
    }
    const float total = team_sum(scratch, g.lid, t, team, sum + comp);
    const float mean = size == 0 ? 0.0f : total / (float)size;
    // The variance: squared deviations, scaled (sum * 2^2m), as rms_norm's rstd.
    float squares = 0.0f;
    int m = 0;
    for (uint k = 0; k < g.steps; ++k) {
      const uint j = t + k * team;
      if (valid && j < size) add_square(&squares, &m, load_elem(x, first + j, xf) - mean);
    }
    const float deviation = team_square_sum(scratch, g.lid, t, team, squares, m, &m);
    const float variance = size == 0 ? 0.0f : deviation / (float)size;
    const float down = pow2(-m);
    const float r = down / sqrt(variance + eps * down * down);
    if (valid && t == 0) {
      mean_out[set] = mean;
      rstd_out[set] = r;
    }
    const uint pbase = (uint)(set % groups) * channels;
    for (uint k = 0; k < g.steps; ++k) {
      const uint j = t + k * team;
      if (valid && j < size) {
        const uint c = norm_param(pbase, j, spread);
        const float xhat = (load_elem(x, first + j, xf) - mean) * r;
        const float wv = norm_param_value(w, c, has_weight, 1.0f, pf);
        const float bv = norm_param_value(b, c, has_bias, 0.0f, pf);
        store_elem(y, first + j, xhat * wv + bv, xf);
      }
    }
  }
}

// dx = (g - (xhat c1 + c2)) rstd with g = w dy, c1 = mean(xhat g), c2 = mean(g) over the set.
// dx may be dy: each element is read before it is written, and the set's sums are complete
// before any of its dx is.
inline void norm_bwd(global const uchar* dy, global const uchar* x, global const uchar* w,
                     global const float* mean_in, global const float* rstd_in, global uchar* dx, ulong sets,
                     uint groups, uint channels, uint spread, uint team, int has_weight, local float* scratch, int xf,
                     int pf) {
  const uint size = channels * spread;
  const Teams g = teams_of(team, size);
  const uint t = g.t;
  for (ulong base = g.first; base < sets; base += g.stride) {
    const ulong set = team_row(g, base);
    const bool valid = set < sets;
    const ulong first = set * size;
    const float mean = valid ? mean_in[set] : 0.0f;
    const float r = valid ? rstd_in[set] : 0.0f;
    const uint pbase = valid ? (uint)(set % groups) * channels : 0;
    float s1 = 0.0f;
    float s2 = 0.0f;
    for (uint k = 0; k < g.steps; ++k) {
      const uint j = t + k * team;
      if (valid && j < size) {
        const float wv = norm_param_value(w, norm_param(pbase, j, spread), has_weight, 1.0f, pf);
        const float gv = wv * load_elem(dy, first + j, xf);
        s1 += (load_elem(x, first + j, xf) - mean) * r * gv;
        s2 += gv;
      }
    }
    const float2 sums = team_sum2(scratch, g.lid, t, team, s1, s2);
    const float c1 = size == 0 ? 0.0f : sums.x / (float)size;
    const float c2 = size == 0 ? 0.0f : sums.y / (float)size;
    for (uint k = 0; k < g.steps; ++k) {
      const uint j = t + k * team;
      if (valid && j < size) {
        const float wv = norm_param_value(w, norm_param(pbase, j, spread), has_weight, 1.0f, pf);
        const float gv = wv * load_elem(dy, first + j, xf);
        const float xhat = (load_elem(x, first + j, xf) - mean) * r;
        store_elem(dx, first + j, (gv - (xhat * c1 + c2)) * r, xf);
      }
    }
  }
}

// One dweight term dy * xhat, xhat = (x - mean) rstd, as hi + *lo to twice f32's precision (the
// difference's rounding error by two-sum, the products' by Dekker's product): a column's terms
// can cancel by orders of magnitude (huge values of both signs), as the reference's double sum
// would show.
inline float norm_dw_term(float g, float xv, float mean, float r, float* lo) {
  const float d = xv - mean;
  const float back = d - xv;
  const float d_error = (xv - (d - back)) + (-mean - back);
  float xhat_error;
  const float xhat = two_product(d, r, &xhat_error);
  float term_error;
  const float term = two_product(g, xhat, &term_error);
  const float xhat_lo = isfinite(d_error) ? xhat_error + d_error * r : xhat_error;
  *lo = term_error + g * xhat_lo;
  return term;
}

// dweight and dbias partials: the batch is `n` items of C = groups * channels parameters, each
// parameter c a run of `spread` elements of every item (item i's element c * spread + s), whose
// statistics are set i * groups + c / channels. Work unit u (of tiles * chunks) is parameter tile
// u % tiles (L parameters, one per work-item) over items chunk u / tiles (per_chunk items),
// written to slot u / tiles of `pw` (dweight) and `pb` (dbias), each slot C sums and then C
// compensations. No barriers, no local memory.
inline void norm_dw_columns(global const uchar* dy, global const uchar* x, global const float* mean_in,
                            global const float* rstd_in, global float* pw, global float* pb, ulong n, uint groups,
                            uint channels, uint spread, uint tiles, uint chunks, ulong per_chunk, int want_w,
                            int want_b, int xf) {
  const uint params = groups * channels;
  const ulong row = (ulong)params * spread;
  const ulong units = (ulong)tiles * chunks;
  for (ulong u = get_group_id(0); u < units; u += get_num_groups(0)) {
    const uint c = (uint)(u % tiles) * (uint)get_local_size(0) + (uint)get_local_id(0);
    const ulong chunk = u / tiles;
    if (c >= params) continue;
    const ulong begin = chunk * per_chunk;
    const ulong end = min(n, begin + per_chunk);
    float w_sum = 0.0f;
    float w_comp = 0.0f;
    float b_sum = 0.0f;
    float b_comp = 0.0f;
    for (ulong i = begin; i < end; ++i) {
      const ulong set = i * groups + c / channels;
      const float mean = mean_in[set];
      const float r = rstd_in[set];
      const ulong at = i * row + (ulong)c * spread;
      for (uint s = 0; s < spread; ++s) {
        const float g = load_elem(dy, at + s, xf);
        if (want_w) {
          float lo;
          const float hi = norm_dw_term(g, load_elem(x, at + s, xf), mean, r, &lo);
          add_term(&w_sum, &w_comp, hi, lo);
        }
        if (want_b) compensated_add(&b_sum, &b_comp, g);
      }
    }
    const ulong slot = chunk * 2 * params;
    if (want_w) {
      pw[slot + c] = w_sum;
      pw[slot + params + c] = w_comp;
    }
    if (want_b) {
      pb[slot + c] = b_sum;
      pb[slot + params + c] = b_comp;
    }
  }
}

// ---- Kernels: one per (x format, parameter format) pair, so every format branch above folds.

#define NORM_SET_KERNELS(name, xf, pf)                                                                       \
  kernel void norm_fwd_##name(global const uchar* x, ulong x_off, global const uchar* w, ulong w_off,        \
                              global const uchar* b, ulong b_off, global uchar* y, ulong y_off,              \
                              global uchar* mean, ulong mean_off, global uchar* rstd, ulong rstd_off,        \
                              ulong sets, uint groups, uint channels, uint spread, uint team, float eps,     \
                              int has_weight, int has_bias, local float* scratch) {                          \
    norm_fwd(x + x_off, w + w_off, b + b_off, y + y_off, (global float*)(mean + mean_off),                   \
             (global float*)(rstd + rstd_off), sets, groups, channels, spread, team, eps, has_weight, has_bias, \
             scratch, xf, pf);                                                                               \
  }                                                                                                          \
  kernel void norm_bwd_##name(global const uchar* dy, ulong dy_off, global const uchar* x, ulong x_off,      \
                              global const uchar* w, ulong w_off, global const uchar* mean, ulong mean_off,  \
                              global const uchar* rstd, ulong rstd_off, global uchar* dx, ulong dx_off,      \
                              ulong sets, uint groups, uint channels, uint spread, uint team, int has_weight, \
                              local float* scratch) {                                                        \
    norm_bwd(dy + dy_off, x + x_off, w + w_off, (global const float*)(mean + mean_off),                      \
             (global const float*)(rstd + rstd_off), dx + dx_off, sets, groups, channels, spread, team,      \
             has_weight, scratch, xf, pf);                                                                   \
  }

NORM_SET_KERNELS(f32_f32, FMT_F32, FMT_F32)
NORM_SET_KERNELS(f16_f16, FMT_F16, FMT_F16)
NORM_SET_KERNELS(f16_f32, FMT_F16, FMT_F32)
NORM_SET_KERNELS(bf16_bf16, FMT_BF16, FMT_BF16)
NORM_SET_KERNELS(bf16_f32, FMT_BF16, FMT_F32)

#define NORM_DW_COLUMNS_KERNEL(name, xf)                                                                     \
  kernel void norm_dw_columns_##name(global const uchar* dy, ulong dy_off, global const uchar* x,            \
                                     ulong x_off, global const uchar* mean, ulong mean_off,                  \
                                     global const uchar* rstd, ulong rstd_off, global uchar* pw, ulong pw_off, \
                                     global uchar* pb, ulong pb_off, ulong n, uint groups, uint channels,    \
                                     uint spread, uint tiles, uint chunks, ulong per_chunk, int want_w,      \
                                     int want_b) {                                                           \
    norm_dw_columns(dy + dy_off, x + x_off, (global const float*)(mean + mean_off),                          \
                    (global const float*)(rstd + rstd_off), (global float*)(pw + pw_off),                    \
                    (global float*)(pb + pb_off), n, groups, channels, spread, tiles, chunks, per_chunk,     \
                    want_w, want_b, xf);                                                                     \
  }

NORM_DW_COLUMNS_KERNEL(f32, FMT_F32)
NORM_DW_COLUMNS_KERNEL(f16, FMT_F16)
NORM_DW_COLUMNS_KERNEL(bf16, FMT_BF16)

#define NORM_DW_REDUCE_KERNEL(name, pf)                                                                      \
  kernel void norm_dw_reduce_##name(global const uchar* partial, ulong partial_off, global uchar* dw,        \
                                    ulong dw_off, uint slots, uint h, uint cols, local float* scratch) {     \
    partials_reduce((global const float*)(partial + partial_off), dw + dw_off, slots, h, cols, scratch, pf);  \
  }

NORM_DW_REDUCE_KERNEL(f32, FMT_F32)
NORM_DW_REDUCE_KERNEL(f16, FMT_F16)
NORM_DW_REDUCE_KERNEL(bf16, FMT_BF16)
