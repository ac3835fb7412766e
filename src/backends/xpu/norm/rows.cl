// layer_norm and group_norm's CPU-shaped kernels (the `rows` variants, OpenCL CPU devices only;
// src/backends/xpu/norm/launch.cpp launches them). The runtime builds this file after
// norm/kernels.cl in the same program (src/backends/xpu/CMakeLists.txt), so that file's helpers
// (norm_param_value, the kernels' argument lists NORM_*_PARAMS) are in scope.

// ---- CPU-shaped kernels (OpenCL CPU devices): a work-item per set, eight elements a step, no
// barriers. The same two-pass statistics as norm_fwd: the mean from eight compensated lanes
// (fed by blocks, below) joined in order, then the squared deviations in eight plain f32 lanes;
// only when that sum
// overflows while every deviation is finite is it taken again scaled by 2^-m (m the largest
// deviation's exponent), as rms_norm's fwd.rows does.

// Sums over a set (the mean, c1 and c2) add NORM_BLOCK elements in eight plain f32 lanes and
// then that block's lanes into eight compensated ones (as the cpu kernel sums f32 chunks into
// double): a compensated add per step was most of the forward's first pass.
#define NORM_BLOCK 64u

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
    for (uint block = 0; block < size; block += NORM_BLOCK) {
      float8 part = 0.0f;
      const uint len = min(NORM_BLOCK, size - block);
      FOR_STEPS8(k, count, len, { part += load8(x, first + block + k, count, xf); })
      compensated_add8(&sum, &comp, part);
    }
    float lo;
    const float hi = join8(sum, comp, &lo);
    const float mean = size == 0 ? 0.0f : (hi + lo) / (float)size;
    float8 squares = 0.0f;
    float8 top = 0.0f;
    FOR_STEPS8(j, count, size, {
      const float8 d = select((float8)0.0f, load8(x, first + j, count, xf) - mean, lanes_below(count));
      squares += d * d;
      top = fmax(top, fabs(d));
    })
    float total = sum8(squares);
    const float largest = fmax8(top);
    int m = 0;
    if (isinf(total) && isfinite(largest)) {
      m = square_scale(largest);
      const float down = pow2(-m);
      squares = 0.0f;
      FOR_STEPS8(j, count, size, {
        const float8 d = select((float8)0.0f, (load8(x, first + j, count, xf) - mean) * down, lanes_below(count));
        squares += d * d;
      })
      total = sum8(squares);
    }
    const float r = scaled_rstd(total, m, size, eps);
    mean_out[set] = mean;
    rstd_out[set] = r;
    const uint pbase = (uint)(set % groups) * channels;
    if (spread == 1) {
      FOR_STEPS8(j, count, size, {
        const float8 xhat = (load8(x, first + j, count, xf) - mean) * r;
        const float8 wv = norm_param8(w, pbase + j, count, has_weight, 1.0f, pf);
        const float8 bv = norm_param8(b, pbase + j, count, has_bias, 0.0f, pf);
        store8(y, first + j, count, xhat * wv + bv, xf);
      })
    } else {
      for (uint c = 0; c < channels; ++c) {
        const float wv = norm_param_value(w, pbase + c, has_weight, 1.0f, pf);
        const float bv = norm_param_value(b, pbase + c, has_bias, 0.0f, pf);
        const ulong at = first + (ulong)c * spread;
        FOR_STEPS8(s, count, spread, {
          const float8 xhat = (load8(x, at + s, count, xf) - mean) * r;
          store8(y, at + s, count, xhat * wv + bv, xf);
        })
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

// A layer_norm row (spread 1): c1 and c2 from compensated lane sums (with a set of near-equal
// values rstd is large and dx is the small difference of g and c2 scaled by it, more than eight
// plain f32 lanes over a whole row keep), fed by blocks (NORM_BLOCK).
OPREG_INLINE float2 layer_coefficients(global const uchar* dy, global const uchar* x, global const uchar* w,
                                       ulong first, uint size, uint pbase, float mean, float r, int has_weight,
                                       int xf, int pf) {
  float8 s1 = 0.0f;
  float8 s1_comp = 0.0f;
  float8 s2 = 0.0f;
  float8 s2_comp = 0.0f;
  for (uint block = 0; block < size; block += NORM_BLOCK) {
    float8 b1 = 0.0f;
    float8 b2 = 0.0f;
    const uint len = min(NORM_BLOCK, size - block);
    FOR_STEPS8(k, count, len, {
      const uint j = block + k;
      const float8 gv = norm_param8(w, pbase + j, count, has_weight, 1.0f, pf) * load8(dy, first + j, count, xf);
      b1 += select((float8)0.0f, (load8(x, first + j, count, xf) - mean) * r * gv, lanes_below(count));
      b2 += gv;
    })
    compensated_add8(&s1, &s1_comp, b1);
    compensated_add8(&s2, &s2_comp, b2);
  }
  float lo1;
  float lo2;
  const float sum1 = join8(s1, s1_comp, &lo1);
  const float sum2 = join8(s2, s2_comp, &lo2);
  return size == 0 ? (float2)(0.0f, 0.0f) : (float2)((sum1 + lo1) / (float)size, (sum2 + lo2) / (float)size);
}

// dx of one layer_norm row (or a group_norm set of spread 1) from `first`, and each element's
// dweight and dbias terms into the slots (want_w, want_b): the path for sets that do not share
// their parameters or have no slots of their own (layer_block below takes the rest).
OPREG_INLINE void layer_row_dx(global const uchar* dy, global const uchar* x, global const uchar* w, global uchar* dx,
                               global float* sw, global float* sb, ulong first, uint size, uint params, uint pbase,
                               float mean, float r, float c1, float c2, int has_weight, int want_w, int want_b, int xf,
                               int pf) {
  global uchar* wb = (global uchar*)sw;
  global uchar* bb = (global uchar*)sb;
  FOR_STEPS8(j, count, size, {
    const float8 wv = norm_param8(w, pbase + j, count, has_weight, 1.0f, pf);
    const float8 g = load8(dy, first + j, count, xf);
    const float8 xv = load8(x, first + j, count, xf);
    store8(dx, first + j, count, (wv * g - ((xv - mean) * r * c1 + c2)) * r, xf);
    if (want_w) {
      float8 sum = load8(wb, pbase + j, count, FMT_F32);
      float8 comp = load8(wb, params + pbase + j, count, FMT_F32);
      float8 lo;
      const float8 hi = norm_dw_term8(g, xv, mean, r, &lo);
      add_term8(&sum, &comp, hi, lo);
      store8(wb, pbase + j, count, sum, FMT_F32);
      store8(wb, params + pbase + j, count, comp, FMT_F32);
    }
    if (want_b) {
      float8 sum = load8(bb, pbase + j, count, FMT_F32);
      float8 comp = load8(bb, params + pbase + j, count, FMT_F32);
      compensated_add8(&sum, &comp, g);
      store8(bb, pbase + j, count, sum, FMT_F32);
      store8(bb, params + pbase + j, count, comp, FMT_F32);
    }
  })
}

// v added to the pair (*s, *e) by Knuth's two-sum (branch-free: no magnitude test): *s + *e keeps
// the sum of everything added to about twice f32's precision. Once *s is not finite *e is
// meaningless (inf - inf): the caller drops it then (slot_fold8).
OPREG_INLINE void two_sum_add8(float8* s, float8* e, float8 v) {
  const float8 t = *s + v;
  const float8 back = t - *s;
  *e += (*s - (t - back)) + (v - back);
  *s = t;
}

// norm_dw_term8 without its tests for non-finite parts: where the term (the result) is finite, so
// is every part of *lo; where it is not, *lo may be NaN and is dropped where it is added
// (slot_fold8).
OPREG_INLINE float8 dw_term_pair8(float8 g, float8 xv, float mean, float r, float8* lo) {
  const float8 d = xv - mean;
  const float8 back = d - xv;
  const float8 d_error = (xv - (d - back)) + (-mean - back);
  const float8 xhat = d * r;
  const float8 xhat_lo = fma(d, (float8)r, -xhat) + d_error * r;
  const float8 term = g * xhat;
  *lo = fma(g, xhat, -term) + g * xhat_lo;
  return term;
}

// `n` (at most the launch's row_block) consecutive layer_norm rows from row `row`, sharing their
// parameters (one group), the slots this work-item's own; `coef` holds 2 row_block + 2 tile
// floats. First each row's c1 and c2 (into coef); then, `tile` columns at a time, the block's rows
// two at a time: their dx, and their dweight and dbias terms (dy (x - mean) rstd, dy).
// - 16-bit rows, the cpu backend's shape: plain f32 terms added into f32 block sums of the tile
//   (`acc`, in L1), which go into the tile's compensated slot entries once a block. A term kept to
//   twice f32's precision and a compensated slot add for every row were a third of the kernel's
//   time (bf16 4096x4096).
// - f32 rows: the pair's terms kept to twice f32's precision (dw_term_pair8, two-sum) and added to
//   the slot entries (in L1 for the tile). The cpu sums f32 rows' terms in double; f32 block sums
//   missed an f32 dweight's tolerance on huge values of both signs (`opreg run layer_norm.bwd
//   --values large`, 5x4099 seed 5: err 1.63; 64x4099 seed 12: err 68).
// A tile keeps the slot entries it updates (16 bytes a parameter: 64 KiB at hidden 4096) in L1,
// and a row's tile is contiguous: eight columns of every row of the block a step, with the sums in
// registers, was slower than whole rows (rows 2^k bytes apart share one L1 set).
OPREG_INLINE void layer_block(global const uchar* dy, global const uchar* x, global const uchar* w, global uchar* dx,
                              global float* sw, global float* sb, global float* coef, global const float* mean_in,
                              global const float* rstd_in, ulong row, uint n, uint size, uint params, uint tile,
                              int has_weight, int want_w, int want_b, int xf, int pf) {
  for (uint k = 0; k < n; ++k) {
    const ulong set = row + k;
    const float2 c = layer_coefficients(dy, x, w, set * size, size, 0, mean_in[set], rstd_in[set], has_weight, xf, pf);
    coef[2 * k] = c.x;
    coef[2 * k + 1] = c.y;
  }
  const bool exact = xf == FMT_F32;
  global uchar* acc_w = (global uchar*)(coef + 2 * n);
  global uchar* acc_b = (global uchar*)(coef + 2 * n + tile);
  for (uint t0 = 0; t0 < size; t0 += tile) {
    const uint len = min(tile, size - t0);
    if (!exact) {
      FOR_STEPS8(i, count, len, {
        store8(acc_w, i, count, (float8)0.0f, FMT_F32);
        store8(acc_b, i, count, (float8)0.0f, FMT_F32);
      })
    }
    for (uint k = 0; k < n; k += 2) {
      const bool two = k + 1 < n;
      const ulong fa = (row + k) * size + t0;
      const ulong fb = fa + size;
      const float ma = mean_in[row + k];
      const float ra = rstd_in[row + k];
      const float c1a = coef[2 * k];
      const float c2a = coef[2 * k + 1];
      const uint kb = two ? k + 1 : k;
      const float mb = mean_in[row + kb];
      const float rb = rstd_in[row + kb];
      const float c1b = coef[2 * kb];
      const float c2b = coef[2 * kb + 1];
      FOR_STEPS8(i, count, len, {
        const float8 wv = norm_param8(w, t0 + i, count, has_weight, 1.0f, pf);
        const float8 ga = load8(dy, fa + i, count, xf);
        const float8 xa = load8(x, fa + i, count, xf);
        store8(dx, fa + i, count, (wv * ga - ((xa - ma) * ra * c1a + c2a)) * ra, xf);
        float8 gb = 0.0f;
        float8 xb = 0.0f;
        if (two) {
          gb = load8(dy, fb + i, count, xf);
          xb = load8(x, fb + i, count, xf);
          store8(dx, fb + i, count, (wv * gb - ((xb - mb) * rb * c1b + c2b)) * rb, xf);
        }
        if (exact) {
          // f32: the pair's terms to twice f32's precision, into the slot entries (in L1).
          if (want_w) {
            float8 lo;
            float8 hi = dw_term_pair8(ga, xa, ma, ra, &lo);
            if (two) {
              float8 lo_b;
              two_sum_add8(&hi, &lo, dw_term_pair8(gb, xb, mb, rb, &lo_b));
              lo += lo_b;
            }
            slot_fold8(sw, params, t0 + i, count, hi, lo);
          }
          if (want_b) {
            float8 hi = ga;
            float8 lo = 0.0f;
            if (two) two_sum_add8(&hi, &lo, gb);
            slot_fold8(sb, params, t0 + i, count, hi, lo);
          }
        } else {
          float8 tw = ga * ((xa - ma) * ra);
          float8 tb = ga;
          if (two) {
            tw += gb * ((xb - mb) * rb);
            tb += gb;
          }
          if (want_w) store8(acc_w, i, count, load8(acc_w, i, count, FMT_F32) + tw, FMT_F32);
          if (want_b) store8(acc_b, i, count, load8(acc_b, i, count, FMT_F32) + tb, FMT_F32);
        }
      })
    }
    if (!exact) {
      FOR_STEPS8(i, count, len, {
        if (want_w) slot_fold8(sw, params, t0 + i, count, load8(acc_w, i, count, FMT_F32), (float8)0.0f);
        if (want_b) slot_fold8(sb, params, t0 + i, count, load8(acc_b, i, count, FMT_F32), (float8)0.0f);
      })
    }
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
  FOR_STEPS8(s, count, spread, {
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
  })
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
  FOR_STEPS8(s, count, spread, {
    const int8 valid = lanes_below(count);
    const float8 g = load8(dy, at + s, count, xf);
    const float8 xv = load8(x, at + s, count, xf);
    float8 lo;
    const float8 hi = select((float8)0.0f, norm_dw_term8(g, xv, mean, r, &lo), valid);
    add_term8(&hi8, &lo8, hi, select((float8)0.0f, lo, valid));
    s1 += select((float8)0.0f, (xv - mean) * r * (wv * g), valid);
    s2 += select((float8)0.0f, wv * g, valid);
  })
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
    FOR_STEPS8(s, count, spread, {
      const float8 gv = wv * load8(dy, at + s, count, xf);
      const float8 xhat = (load8(x, at + s, count, xf) - mean) * r;
      store8(dx, at + s, count, (gv - (xhat * c1 + c2)) * r, xf);
    })
  }
}

// The groups take contiguous blocks of sets. With dweight or dbias wanted, work-item 0 of a group
// walks its block and adds each set's terms into the group's slots of `pw` and `pb` (2 C floats
// each: sums, then compensations), which norm_dw_reduce sums over the groups in a fixed order
// (layer_norm rows `row_block` at a time, `tile` columns at a time, with the group's 2 (row_block
// + tile) floats of `coef`: layer_block); otherwise every work-item of the group takes sets of
// the block. dx as norm_bwd's; dy may be dx
// (each element is read before it is written, and a set's sums are complete before its dx).
inline void norm_bwd_rows(global const uchar* dy, global const uchar* x, global const uchar* w,
                          global const float* mean_in, global const float* rstd_in, global uchar* dx,
                          global float* pw, global float* pb, global float* coef, ulong sets, uint groups,
                          uint channels, uint spread, uint row_block, uint tile, int has_weight, int want_w,
                          int want_b, int xf, int pf) {
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
    if (spread == 1 && partials && groups == 1) {
      // Blocks of rows that share their parameters, the slots this work-item's own.
      const uint n = (uint)min((ulong)max(row_block, 1u), end - set);
      layer_block(dy, x, w, dx, sw, sb, coef + (ulong)get_group_id(0) * 2 * (row_block + tile), mean_in, rstd_in, set,
                  n, size, params, max(tile, 1u), has_weight, want_w, want_b, xf, pf);
      set += n - 1;
    } else if (spread == 1) {
      const ulong first = set * size;
      const float mean = mean_in[set];
      const float r = rstd_in[set];
      const float2 c = layer_coefficients(dy, x, w, first, size, pbase, mean, r, has_weight, xf, pf);
      layer_row_dx(dy, x, w, dx, sw, sb, first, size, params, pbase, mean, r, c.x, c.y, has_weight, want_w, want_b, xf,
                   pf);
    } else {
      group_bwd_set(dy, x, w, dx, sw, sb, set * size, channels, spread, params, pbase, mean_in[set], rstd_in[set],
                    has_weight, want_w, want_b, xf, pf);
    }
  }
}

// ---- Kernels: one per (x format, parameter format) pair, so every format branch above folds.

#define NORM_ROWS_KERNELS(name, xf, pf)                                                                      \
  kernel void norm_fwd_rows_##name(NORM_FWD_PARAMS) { norm_fwd_rows(NORM_FWD_ARGS, xf, pf); }                \
  kernel void norm_bwd_rows_##name(NORM_BWD_TENSORS, NORM_PARTIALS(coef), NORM_SETS_PARAMS, uint row_block,  \
                                   uint tile, int has_weight, int want_w, int want_b) {                      \
    norm_bwd_rows(NORM_BWD_TENSORS_AT, NORM_PARTIALS_AT(coef), NORM_SETS_ARGS, row_block, tile, has_weight,  \
                  want_w, want_b, xf, pf);                                                                   \
  }

FOR_EACH_FORMAT_PAIR(NORM_ROWS_KERNELS)
