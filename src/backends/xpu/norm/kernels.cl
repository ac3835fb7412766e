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

// ---- CPU-shaped kernels (OpenCL CPU devices): a work-item per set, eight elements a step, no
// barriers. The same two-pass statistics as norm_fwd: the mean from eight compensated lanes
// joined in order, then the squared deviations in eight plain f32 lanes; only when that sum
// overflows while every deviation is finite is it taken again scaled by 2^-m (m the largest
// deviation's exponent), as rms_norm's fwd.rows does.

// The set's parameters for elements j .. j + 7 of a layer_norm row (spread 1): `absent` when none.
OPREG_INLINE float8 norm_param8(global const uchar* p, uint c, uint count, int present, float absent, int pf) {
  return present ? load8(p, c, count, pf) : (float8)absent;
}

inline void norm_fwd_rows(global const uchar* x, global const uchar* w, global const uchar* b, global uchar* y,
                          global float* mean_out, global float* rstd_out, ulong sets, uint groups, uint channels,
                          uint spread, uint team, float eps, int has_weight, int has_bias, local float* scratch,
                          int xf, int pf) {
  const uint size = channels * spread;
  for (ulong set = get_global_id(0); set < sets; set += get_global_size(0)) {
    const ulong first = set * size;
    float8 sum = 0.0f;
    float8 comp = 0.0f;
    for (uint j = 0; j < size; j += 8) compensated_add8(&sum, &comp, load8(x, first + j, min(8u, size - j), xf));
    float lo;
    const float hi = join8(sum, comp, &lo);
    const float mean = size == 0 ? 0.0f : (hi + lo) / (float)size;
    float8 squares = 0.0f;
    float8 top = 0.0f;
    for (uint j = 0; j < size; j += 8) {
      const uint count = min(8u, size - j);
      const float8 d = select((float8)0.0f, load8(x, first + j, count, xf) - mean, lanes_below(count));
      squares += d * d;
      top = fmax(top, fabs(d));
    }
    float total = sum8(squares);
    const float largest = fmax8(top);
    int m = 0;
    if (isinf(total) && isfinite(largest)) {
      m = square_scale(largest);
      const float down = pow2(-m);
      squares = 0.0f;
      for (uint j = 0; j < size; j += 8) {
        const uint count = min(8u, size - j);
        const float8 d = select((float8)0.0f, (load8(x, first + j, count, xf) - mean) * down, lanes_below(count));
        squares += d * d;
      }
      total = sum8(squares);
    }
    const float variance = size == 0 ? 0.0f : total / (float)size;
    const float down = pow2(-m);
    const float r = down / sqrt(variance + eps * down * down);
    mean_out[set] = mean;
    rstd_out[set] = r;
    const uint pbase = (uint)(set % groups) * channels;
    if (spread == 1) {
      for (uint j = 0; j < size; j += 8) {
        const uint count = min(8u, size - j);
        const float8 xhat = (load8(x, first + j, count, xf) - mean) * r;
        const float8 wv = norm_param8(w, pbase + j, count, has_weight, 1.0f, pf);
        const float8 bv = norm_param8(b, pbase + j, count, has_bias, 0.0f, pf);
        store8(y, first + j, count, xhat * wv + bv, xf);
      }
    } else {
      for (uint c = 0; c < channels; ++c) {
        const float wv = norm_param_value(w, pbase + c, has_weight, 1.0f, pf);
        const float bv = norm_param_value(b, pbase + c, has_bias, 0.0f, pf);
        const ulong at = first + (ulong)c * spread;
        for (uint s = 0; s < spread; s += 8) {
          const uint count = min(8u, spread - s);
          const float8 xhat = (load8(x, at + s, count, xf) - mean) * r;
          store8(y, at + s, count, xhat * wv + bv, xf);
        }
      }
    }
  }
}

// norm_dw_term on eight lanes (the same bits lane by lane).
OPREG_INLINE float8 norm_dw_term8(float8 g, float8 xv, float mean, float r, float8* lo) {
  const float8 d = xv - mean;
  const float8 back = d - xv;
  const float8 d_error = (xv - (d - back)) + (-mean - back);
  float8 xhat_error;
  const float8 xhat = two_product8(d, (float8)r, &xhat_error);
  float8 term_error;
  const float8 term = two_product8(g, xhat, &term_error);
  const float8 xhat_lo = select(xhat_error, xhat_error + d_error * r, isfinite(d_error));
  *lo = term_error + g * xhat_lo;
  return term;
}

// A compensated slot entry (sums at [c], compensations at [params + c]) plus a (hi, lo) term.
OPREG_INLINE void slot_add(global float* slot, uint params, uint c, float hi, float lo) {
  float sum = slot[c];
  float comp = slot[params + c];
  add_term(&sum, &comp, hi, lo);
  slot[c] = sum;
  slot[params + c] = comp;
}

// Eight slot entries from c on (count of them) plus eight (hi, lo) terms.
OPREG_INLINE void slot_add8(global float* slot, uint params, uint c, uint count, float8 hi, float8 lo) {
  global uchar* bytes = (global uchar*)slot;
  float8 sum = load8(bytes, c, count, FMT_F32);
  float8 comp = load8(bytes, params + c, count, FMT_F32);
  add_term8(&sum, &comp, hi, lo);
  store8(bytes, c, count, sum, FMT_F32);
  store8(bytes, params + c, count, comp, FMT_F32);
}

// A layer_norm row (spread 1): c1 and c2 from compensated lane sums (with a set of near-equal
// values rstd is large and dx is the small difference of g and c2 scaled by it, more than eight
// plain f32 lanes keep), then dx and each element's dweight and dbias terms into the slots.
OPREG_INLINE void layer_bwd_row(global const uchar* dy, global const uchar* x, global const uchar* w, global uchar* dx,
                          global float* sw, global float* sb, ulong first, uint size, uint params, uint pbase,
                          float mean, float r, int has_weight, int want_w, int want_b, int xf, int pf) {
  float8 s1 = 0.0f;
  float8 s1_comp = 0.0f;
  float8 s2 = 0.0f;
  float8 s2_comp = 0.0f;
  for (uint j = 0; j < size; j += 8) {
    const uint count = min(8u, size - j);
    const float8 gv = norm_param8(w, pbase + j, count, has_weight, 1.0f, pf) * load8(dy, first + j, count, xf);
    compensated_add8(&s1, &s1_comp,
                     select((float8)0.0f, (load8(x, first + j, count, xf) - mean) * r * gv, lanes_below(count)));
    compensated_add8(&s2, &s2_comp, gv);
  }
  float lo1;
  float lo2;
  const float sum1 = join8(s1, s1_comp, &lo1);
  const float sum2 = join8(s2, s2_comp, &lo2);
  const float c1 = size == 0 ? 0.0f : (sum1 + lo1) / (float)size;
  const float c2 = size == 0 ? 0.0f : (sum2 + lo2) / (float)size;
  for (uint j = 0; j < size; j += 8) {
    const uint count = min(8u, size - j);
    const float8 g = load8(dy, first + j, count, xf);
    const float8 xv = load8(x, first + j, count, xf);
    const float8 gv = norm_param8(w, pbase + j, count, has_weight, 1.0f, pf) * g;
    const float8 xhat = (xv - mean) * r;
    store8(dx, first + j, count, (gv - (xhat * c1 + c2)) * r, xf);
    if (want_w) {
      float8 lo;
      const float8 hi = norm_dw_term8(g, xv, mean, r, &lo);
      slot_add8(sw, params, pbase + j, count, hi, lo);
    }
    if (want_b) slot_add8(sb, params, pbase + j, count, g, (float8)0.0f);
  }
}

// One group_norm channel's run of `spread` elements: dweight's term sum(dy (x - mean)) rstd as
// *w_hi + *w_lo and dbias's sum(dy) as *b_hi + *b_lo, each to about twice f32's precision, and the
// channel's shares of c1 and c2 (sum(xhat w dy), sum(w dy)). The channel's parameter is one
// value, so the sums come from per-run sums of dy and dy x (compensated; dy x exact for 16-bit
// formats, Dekker's error term for f32) as rstd (S_xy - mean S_y): a handful of operations per
// element instead of norm_dw_term's. Where that is not finite (infinities, NaN, or a huge run
// whose S_xy overflows) or the parameter is not, the run is taken again element by element with
// norm_dw_term's terms, whose non-finite results are the reference's.
OPREG_INLINE void group_channel(global const uchar* dy, global const uchar* x, ulong at, uint spread, float mean, float r,
                          float wv, float* w_hi, float* w_lo, float* b_hi, float* b_lo, float* share1,
                          float* share2, int xf) {
  float8 p = 0.0f;
  float8 p_comp = 0.0f;
  float8 b = 0.0f;
  float8 b_comp = 0.0f;
  for (uint s = 0; s < spread; s += 8) {
    const uint count = min(8u, spread - s);
    const float8 g = load8(dy, at + s, count, xf);
    const float8 xv = load8(x, at + s, count, xf);
    compensated_add8(&b, &b_comp, g);
    if (xf == FMT_F32) {
      float8 e;
      const float8 q = two_product8(g, xv, &e);
      add_term8(&p, &p_comp, q, e);
    } else {
      compensated_add8(&p, &p_comp, g * xv);
    }
  }
  float sy_lo;
  float sxy_lo;
  const float sy = join8(b, b_comp, &sy_lo);
  const float sxy = join8(p, p_comp, &sxy_lo);
  *b_hi = sy;
  *b_lo = sy_lo;
  // d = S_xy - mean S_y as a (hi, lo) pair, then times rstd.
  float m_err;
  const float m = two_product(mean, sy, &m_err);
  float d = 0.0f;
  float d_lo = 0.0f;
  compensated_add(&d, &d_lo, sxy);
  compensated_add(&d, &d_lo, -m);
  d_lo += sxy_lo - (m_err + mean * sy_lo);
  float t_err;
  *w_hi = two_product(d, r, &t_err);
  *w_lo = t_err + d_lo * r;
  if (isfinite(*w_hi) && isfinite(*w_lo) && isfinite(wv)) {
    *share1 = wv * (*w_hi + *w_lo);
    *share2 = wv * (sy + sy_lo);
    return;
  }
  float8 hi8 = 0.0f;
  float8 lo8 = 0.0f;
  float8 s1 = 0.0f;
  float8 s2 = 0.0f;
  for (uint s = 0; s < spread; s += 8) {
    const uint count = min(8u, spread - s);
    const int8 valid = lanes_below(count);
    const float8 g = load8(dy, at + s, count, xf);
    const float8 xv = load8(x, at + s, count, xf);
    float8 lo;
    const float8 hi = select((float8)0.0f, norm_dw_term8(g, xv, mean, r, &lo), valid);
    add_term8(&hi8, &lo8, hi, select((float8)0.0f, lo, valid));
    s1 += select((float8)0.0f, (xv - mean) * r * (wv * g), valid);
    s2 += select((float8)0.0f, wv * g, valid);
  }
  *w_hi = join8(hi8, lo8, w_lo);
  *share1 = sum8(s1);
  *share2 = sum8(s2);
}

// A group_norm set: per channel its sums (group_channel), then dx channel by channel.
OPREG_INLINE void group_bwd_set(global const uchar* dy, global const uchar* x, global const uchar* w, global uchar* dx,
                          global float* sw, global float* sb, ulong first, uint channels, uint spread, uint params,
                          uint pbase, float mean, float r, int has_weight, int want_w, int want_b, int xf, int pf) {
  float s1 = 0.0f;
  float s1_comp = 0.0f;
  float s2 = 0.0f;
  float s2_comp = 0.0f;
  for (uint c = 0; c < channels; ++c) {
    const float wv = norm_param_value(w, pbase + c, has_weight, 1.0f, pf);
    float w_hi, w_lo, b_hi, b_lo, share1, share2;
    group_channel(dy, x, first + (ulong)c * spread, spread, mean, r, wv, &w_hi, &w_lo, &b_hi, &b_lo, &share1,
                  &share2, xf);
    compensated_add(&s1, &s1_comp, share1);
    compensated_add(&s2, &s2_comp, share2);
    if (want_w) slot_add(sw, params, pbase + c, w_hi, w_lo);
    if (want_b) slot_add(sb, params, pbase + c, b_hi, b_lo);
  }
  const uint size = channels * spread;
  const float c1 = size == 0 ? 0.0f : (s1 + s1_comp) / (float)size;
  const float c2 = size == 0 ? 0.0f : (s2 + s2_comp) / (float)size;
  for (uint c = 0; c < channels; ++c) {
    const float wv = norm_param_value(w, pbase + c, has_weight, 1.0f, pf);
    const ulong at = first + (ulong)c * spread;
    for (uint s = 0; s < spread; s += 8) {
      const uint count = min(8u, spread - s);
      const float8 gv = wv * load8(dy, at + s, count, xf);
      const float8 xhat = (load8(x, at + s, count, xf) - mean) * r;
      store8(dx, at + s, count, (gv - (xhat * c1 + c2)) * r, xf);
    }
  }
}

// The groups take contiguous blocks of sets. With dweight or dbias wanted, work-item 0 of a group
// walks its block and adds each set's terms into the group's slots of `pw` and `pb` (2 C floats
// each: sums, then compensations), which norm_dw_reduce sums over the groups in a fixed order;
// otherwise every work-item of the group takes sets of the block. dx as norm_bwd's; dy may be dx
// (each element is read before it is written, and a set's sums are complete before its dx).
inline void norm_bwd_rows(global const uchar* dy, global const uchar* x, global const uchar* w,
                          global const float* mean_in, global const float* rstd_in, global uchar* dx,
                          global float* pw, global float* pb, ulong sets, uint groups, uint channels, uint spread,
                          int has_weight, int want_w, int want_b, int xf, int pf) {
  const uint size = channels * spread;
  const uint params = groups * channels;
  const ulong per = (sets + get_num_groups(0) - 1) / get_num_groups(0);
  const ulong begin = min(sets, (ulong)get_group_id(0) * per);
  const ulong end = min(sets, begin + per);
  const bool partials = want_w || want_b;
  global float* sw = pw + (ulong)get_group_id(0) * 2 * params;
  global float* sb = pb + (ulong)get_group_id(0) * 2 * params;
  if (partials) {
    if (get_local_id(0) != 0) return;
    for (uint c = 0; c < 2 * params; ++c) {
      if (want_w) sw[c] = 0.0f;
      if (want_b) sb[c] = 0.0f;
    }
  }
  const ulong step = partials ? 1 : get_local_size(0);
  for (ulong set = begin + (partials ? 0 : get_local_id(0)); set < end; set += step) {
    const uint pbase = (uint)(set % groups) * channels;
    if (spread == 1) {
      layer_bwd_row(dy, x, w, dx, sw, sb, set * size, size, params, pbase, mean_in[set], rstd_in[set], has_weight,
                    want_w, want_b, xf, pf);
    } else {
      group_bwd_set(dy, x, w, dx, sw, sb, set * size, channels, spread, params, pbase, mean_in[set], rstd_in[set],
                    has_weight, want_w, want_b, xf, pf);
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

#define NORM_ROWS_KERNELS(name, xf, pf)                                                                      \
  kernel void norm_fwd_rows_##name(global const uchar* x, ulong x_off, global const uchar* w, ulong w_off,   \
                                   global const uchar* b, ulong b_off, global uchar* y, ulong y_off,         \
                                   global uchar* mean, ulong mean_off, global uchar* rstd, ulong rstd_off,   \
                                   ulong sets, uint groups, uint channels, uint spread, uint team, float eps, \
                                   int has_weight, int has_bias, local float* scratch) {                     \
    norm_fwd_rows(x + x_off, w + w_off, b + b_off, y + y_off, (global float*)(mean + mean_off),              \
                  (global float*)(rstd + rstd_off), sets, groups, channels, spread, team, eps, has_weight,   \
                  has_bias, scratch, xf, pf);                                                                \
  }                                                                                                          \
  kernel void norm_bwd_rows_##name(global const uchar* dy, ulong dy_off, global const uchar* x, ulong x_off, \
                                   global const uchar* w, ulong w_off, global const uchar* mean,             \
                                   ulong mean_off, global const uchar* rstd, ulong rstd_off, global uchar* dx, \
                                   ulong dx_off, global uchar* pw, ulong pw_off, global uchar* pb,           \
                                   ulong pb_off, ulong sets, uint groups, uint channels, uint spread,        \
                                   int has_weight, int want_w, int want_b) {                                 \
    norm_bwd_rows(dy + dy_off, x + x_off, w + w_off, (global const float*)(mean + mean_off),                 \
                  (global const float*)(rstd + rstd_off), dx + dx_off, (global float*)(pw + pw_off),         \
                  (global float*)(pb + pb_off), sets, groups, channels, spread, has_weight, want_w, want_b,  \
                  xf, pf);                                                                                   \
  }

#define NORM_ALL_KERNELS(name, xf, pf) NORM_SET_KERNELS(name, xf, pf) NORM_ROWS_KERNELS(name, xf, pf)

NORM_ALL_KERNELS(f32_f32, FMT_F32, FMT_F32)
NORM_ALL_KERNELS(f16_f16, FMT_F16, FMT_F16)
NORM_ALL_KERNELS(f16_f32, FMT_F16, FMT_F32)
NORM_ALL_KERNELS(bf16_bf16, FMT_BF16, FMT_BF16)
NORM_ALL_KERNELS(bf16_f32, FMT_BF16, FMT_F32)

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
