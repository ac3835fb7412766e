// rms_norm and fused_add_rms_norm forward and backward (src/backends/xpu/rms_norm/launch.cpp
// launches them; semantics: docs/ops.md, src/ops/reference). The fused op is the same kernels
// with `fused` set: the forward normalises s = round_x(x + residual) and stores s on the way, the
// backward adds ds_out to dx.
//
// Geometry, shared by the row kernels: a work-group of L work-items is split into L / team teams
// of `team` work-items (team a power of two); each team takes one row at a time, its work-items
// striding over the row's columns (neighbouring work-items read neighbouring elements), and the
// groups stride over the rows. team = L gives one row per group (long rows); a smaller team
// packs several short rows into one group.
//
// Rounding follows the cpu kernel (src/backends/cpu/rms_norm.cpp) point for point: products in
// f32, x * rstd rounded to x's format for llama and none, (offset + w) rounded to the weight's
// format for none, dweight's terms rounded once (x * rstd split so the product is exact).
//
// Tensors arrive as a base pointer plus a byte offset (as USM pointers do on Intel GPUs);
// element indices are ulong, as a tensor may hold more than 2^32 elements.

// Columns of dweight each work-item keeps in private memory in the fused backward (the host
// sets it per device and only picks the fused path when a row fits).
#ifndef OPREG_FUSED_COLUMNS
#define OPREG_FUSED_COLUMNS 16
#endif

// (offset + w) for column j as the casting mode sees it (1 without a weight: offset is 0 then).
inline float rms_scale(global const uchar* w, uint j, float offset, int casting, int has_weight, int wf) {
  if (!has_weight) return 1.0f;
  const float wv = load_elem(w, j, wf);
  if (casting == CAST_NONE && wf != FMT_F32) return round_to(add_odd(offset, wv), wf);
  return offset + wv;
}

// One term of dweight, dy * xhat, as hi + *lo: with xhat = x * rstd rounded to x's format
// (llama, none) or not (gemma). A sum of such terms can cancel by orders of magnitude (huge
// values of both signs), so the term is kept to twice f32's precision, as the reference's double
// keeps it: exactly where both factors are short (16-bit x rounded: at most 11 significant bits
// each); else the product's rounding error, and for gemma x * rstd's own, go into *lo.
// (rstd = hi + lo with 12 significant bits each makes x * hi and x * lo exact for a 16-bit x,
// and add_odd rounds their sum once.)
inline float rms_dw_term(float g, float xv, float r, float r_hi, float r_lo, int casting, int xf, float* lo) {
  if (xf != FMT_F32 && casting != CAST_GEMMA) {
    *lo = 0.0f;
    return g * round_to(add_odd(xv * r_hi, xv * r_lo), xf);
  }
  float xhat_error;
  const float xhat = two_product(xv, r, &xhat_error);  // rounded once: llama's and none's f32 xhat
  float product_error;
  const float term = two_product(g, xhat, &product_error);
  *lo = product_error + (casting == CAST_GEMMA ? g * xhat_error : 0.0f);
  return term;
}

// s = round_x(x + r): one rounding of the exact sum (add_odd keeps it for the 16-bit formats).
inline float residual_sum(float xv, float r, int xf) { return xf == FMT_F32 ? xv + r : round_to(add_odd(xv, r), xf); }

// With `fused`, x is the input, `res` the residual and `s` receives round_x(x + res), which is
// what is normalised (the first pass stores s, the second reads it back: the same work-item's
// elements).
inline void rms_fwd(global const uchar* x, global const uchar* res, global const uchar* w, global uchar* y,
                    global uchar* s, global float* rstd, ulong rows, uint h, uint team, float eps, float offset,
                    int casting, int has_weight, int fused, local float* scratch, int xf, int wf) {
  FOR_TEAM_ROWS(g, team, rows, h, row, valid, first, {
    float squares = 0.0f;
    int m = 0;
    for (uint k = 0; k < g.steps; ++k) {
      const uint j = g.t + k * team;
      if (valid && j < h) {
        float v = load_elem(x, first + j, xf);
        if (fused) {
          v = residual_sum(v, load_elem(res, first + j, xf), xf);
          store_elem(s, first + j, v, xf);
        }
        add_square(&squares, &m, v);
      }
    }
    const float total = team_square_sum(scratch, g.lid, g.t, team, squares, m, &m);
    const float r = scaled_rstd(total, m, h, eps);
    if (valid && g.t == 0) rstd[row] = r;
    for (uint k = 0; k < g.steps; ++k) {
      const uint j = g.t + k * team;
      if (valid && j < h) {
        const float xhat = load_elem(fused ? (global const uchar*)s : x, first + j, xf) * r;
        const float sc = rms_scale(w, j, offset, casting, has_weight, wf);
        store_elem(y, first + j, casting == CAST_GEMMA ? xhat * sc : round_to(xhat, xf) * sc, xf);
      }
    }
  })
}

// dx for one element (dy may be dx: the element is read before it is written); with `fused`,
// plus the element of ds (fused_add_rms_norm's ds_out), before dx's one rounding.
inline float rms_dx(float g, float s, float xv, float r, float coeff, global const uchar* ds, ulong i, int fused,
                    int xf) {
  const float dx = r * (g * s - coeff * (xv * r));
  return fused ? dx + load_elem(ds, i, xf) : dx;
}

// dx for every row, and with has_dw each team's share of dweight as one slot of `partial`
// (team k of group g writes slot g * (L / team) + k): its columns' compensated sums kept in
// private memory, which needs ceil(h / team) <= OPREG_FUSED_COLUMNS. A slot is 2 h floats:
// the sums, then their compensations.
inline void rms_bwd(global const uchar* dy, global const uchar* ds, global const uchar* x, global const uchar* w,
                    global const float* rstd, global uchar* dx, global float* partial, ulong rows, uint h, uint team,
                    float offset, int casting, int has_weight, int has_dw, int fused, local float* scratch, int xf,
                    int wf) {
  float sum[OPREG_FUSED_COLUMNS];
  float comp[OPREG_FUSED_COLUMNS];
  for (int k = 0; k < OPREG_FUSED_COLUMNS; ++k) {
    sum[k] = 0.0f;
    comp[k] = 0.0f;
  }
  FOR_TEAM_ROWS(g, team, rows, h, row, valid, first, {
    // dx = r (dy w' - c xhat) with xhat = x r and c = sum(dy w' xhat) / h: the reference's
    // r dy w' - r^3 sum(dy w' x) / h x, written so that nothing overflows or underflows when x is
    // huge (r^3 would be 0 and the sum infinite in f32).
    const float r = valid ? rstd[row] : 0.0f;
    float dot = 0.0f;
    for (uint k = 0; k < g.steps; ++k) {
      const uint j = g.t + k * team;
      if (valid && j < h) {
        const float s = rms_scale(w, j, offset, casting, has_weight, wf);
        dot += load_elem(dy, first + j, xf) * s * (load_elem(x, first + j, xf) * r);
      }
    }
    dot = team_sum(scratch, g.lid, g.t, team, dot);
    const float coeff = h == 0 ? 0.0f : dot / (float)h;
    if (has_dw) {
      const float r_hi = as_float(as_uint(r) & 0xFFFFF000u);
      const float r_lo = r - r_hi;
      for (uint k = 0; k < OPREG_FUSED_COLUMNS && k < g.steps; ++k) {
        const uint j = g.t + k * team;
        if (valid && j < h) {
          const float g = load_elem(dy, first + j, xf);
          const float xv = load_elem(x, first + j, xf);
          const float s = rms_scale(w, j, offset, casting, has_weight, wf);
          float lo;
          const float hi = rms_dw_term(g, xv, r, r_hi, r_lo, casting, xf, &lo);
          add_term(&sum[k], &comp[k], hi, lo);
          store_elem(dx, first + j, rms_dx(g, s, xv, r, coeff, ds, first + j, fused, xf), xf);
        }
      }
    } else {
      for (uint k = 0; k < g.steps; ++k) {
        const uint j = g.t + k * team;
        if (valid && j < h) {
          const float g = load_elem(dy, first + j, xf);
          const float xv = load_elem(x, first + j, xf);
          const float s = rms_scale(w, j, offset, casting, has_weight, wf);
          store_elem(dx, first + j, rms_dx(g, s, xv, r, coeff, ds, first + j, fused, xf), xf);
        }
      }
    }
  })
  if (has_dw) {
    const ulong out = team_row(g, g.first) * 2 * h;
    for (uint k = 0; k < OPREG_FUSED_COLUMNS && k < g.steps; ++k) {
      const uint j = g.t + k * team;
      if (j < h) {
        partial[out + j] = sum[k];
        partial[out + h + j] = comp[k];
      }
    }
  }
}

// dweight partials column by column, for rows too long for the fused path: work item i (of
// tiles * chunks) is column tile i % tiles (L columns, one per work-item) over row chunk
// i / tiles (rows_per_chunk rows), written to slot i / tiles of `partial` (as the fused path's
// slots); the groups stride over the items. No barriers, no local memory.
inline void rms_dw_columns(global const uchar* dy, global const uchar* x, global const float* rstd,
                           global float* partial, ulong rows, uint h, uint tiles, uint chunks, ulong rows_per_chunk,
                           int casting, int xf) {
  const ulong items = (ulong)tiles * chunks;
  for (ulong item = get_group_id(0); item < items; item += get_num_groups(0)) {
    const uint tile = (uint)(item % tiles);
    const ulong chunk = item / tiles;
    const uint j = tile * (uint)get_local_size(0) + (uint)get_local_id(0);
    if (j >= h) continue;
    const ulong begin = chunk * rows_per_chunk;
    const ulong end = min(rows, begin + rows_per_chunk);
    float sum = 0.0f;
    float comp = 0.0f;
    for (ulong row = begin; row < end; ++row) {
      const float r = rstd[row];
      const float r_hi = as_float(as_uint(r) & 0xFFFFF000u);
      const float r_lo = r - r_hi;
      const float g = load_elem(dy, row * h + j, xf);
      const float xv = load_elem(x, row * h + j, xf);
      float lo;
      const float hi = rms_dw_term(g, xv, r, r_hi, r_lo, casting, xf, &lo);
      add_term(&sum, &comp, hi, lo);
    }
    partial[chunk * 2 * h + j] = sum;
    partial[chunk * 2 * h + h + j] = comp;
  }
}

// ---- CPU-shaped forward (OpenCL CPU devices): one work-item per row, the work-items striding
// over the rows, the columns eight at a time (PoCL runs a work-item's loop as host code: vector
// instructions, no barriers). The sum of squares is eight plain f32 lane sums; only when it
// overflows while every value is finite (huge values) is it taken again scaled by 2^-m, m the
// largest value's exponent, and rstd = 2^-m / sqrt(sum / h + eps 2^-2m) as in rms_fwd. `team`
// and `scratch` are unused (the same arguments as rms_fwd's kernels).
OPREG_INLINE float8 rms_scale8(global const uchar* w, uint j, uint count, float offset, int casting, int has_weight,
                         int wf) {
  if (!has_weight) return 1.0f;
  const float8 wv = load8(w, j, count, wf);
  if (casting == CAST_NONE && wf != FMT_F32) return round8(add_odd8((float8)offset, wv), wf);
  return offset + wv;
}

inline void rms_fwd_rows(global const uchar* x, global const uchar* res, global const uchar* w, global uchar* y,
                         global uchar* s, global float* rstd, ulong rows, uint h, uint team, float eps, float offset,
                         int casting, int has_weight, int fused, local float* scratch, int xf, int wf) {
  global const uchar* normed = fused ? (global const uchar*)s : x;
  for (ulong row = get_global_id(0); row < rows; row += get_global_size(0)) {
    const ulong first = row * h;
    float8 squares = 0.0f;
    float8 top = 0.0f;
    FOR_STEPS8(j, count, h, {
      float8 v = load8(x, first + j, count, xf);
      if (fused) {
        const float8 r = load8(res, first + j, count, xf);
        // Both are 16-bit values: their f32 sum rounded to 16 bits is their correctly rounded sum
        // (f32's 24 bits are at least 2p + 2 for a 16-bit format's p: Figueroa, "When is double
        // rounding innocuous?", 1995), so add_odd is not needed here.
        v = xf == FMT_F32 ? v + r : round8(v + r, xf);
        store8(s, first + j, count, v, xf);
      }
      squares += v * v;
      top = fmax(top, fabs(v));
    })
    float total = sum8(squares);
    int m = 0;
    const float largest = fmax(fmax(fmax(top.s0, top.s1), fmax(top.s2, top.s3)),
                               fmax(fmax(top.s4, top.s5), fmax(top.s6, top.s7)));
    if (isinf(total) && isfinite(largest)) {
      m = square_scale(largest);
      const float down = pow2(-m);
      squares = 0.0f;
      for (uint j = 0; j < h; j += 8) {
        const float8 v = load8(normed, first + j, min(8u, h - j), xf) * down;
        squares += v * v;
      }
      total = sum8(squares);
    }
    const float r = scaled_rstd(total, m, h, eps);
    rstd[row] = r;
    FOR_STEPS8(j, count, h, {
      const float8 xhat = load8(normed, first + j, count, xf) * r;
      const float8 sc = rms_scale8(w, j, count, offset, casting, has_weight, wf);
      store8(y, first + j, count, casting == CAST_GEMMA ? xhat * sc : round8(xhat, xf) * sc, xf);
    })
  }
}

// ---- CPU-shaped backward: the groups take contiguous blocks of rows. With dweight, work-item 0
// of a group walks its block two rows at a time (rms_rows_dx) and adds each row's dweight terms (compensated, to twice
// f32's precision as rms_bwd's) into the group's slot of `partial` (2 h floats: sums, then
// compensations), which rms_norm_dw_reduce then sums over the slots in a fixed order: as many
// slots as groups, the same bits every run. Without dweight every work-item of the group takes
// rows of the block. Columns eight at a time; dy may be dx (each element is read first).
// 16-bit x with llama or none casting, the cpu backend's shape: a term dy * round_x(x rstd) is a
// product of two 16-bit values, exact in f32; the terms go into the group's f32 block sums (h
// floats after all the slots), row by row in plain f32, and the block sums into the slot
// (compensated) once every RMS_ROW_BLOCK rows. A compensated slot update for every row was why
// bf16 took longer than f32 (4096x1024: 4.22 against 3.10 ms).
#define RMS_ROW_BLOCK 16u
OPREG_INLINE float8 rms_dw_term8(float8 g, float8 xv, float r, int casting, int xf, float8* lo) {
  if (xf != FMT_F32 && casting != CAST_GEMMA) {
    *lo = 0.0f;
    return g * round8(mul_odd8(xv, (float8)r), xf);
  }
  float8 xhat_error;
  const float8 xhat = two_product8(xv, (float8)r, &xhat_error);
  float8 product_error;
  const float8 term = two_product8(g, xhat, &product_error);
  *lo = product_error + (casting == CAST_GEMMA ? g * xhat_error : (float8)0.0f);
  return term;
}

// A row's c = sum(dy w' xhat) / h (eight plain f32 lanes, as before).
OPREG_INLINE float rms_coefficient(global const uchar* dy, global const uchar* x, global const uchar* w, ulong first,
                                   uint h, float r, float offset, int casting, int has_weight, int xf, int wf) {
  float8 dot8 = 0.0f;
  FOR_STEPS8(j, count, h, {
    const float8 s = rms_scale8(w, j, count, offset, casting, has_weight, wf);
    dot8 += load8(dy, first + j, count, xf) * s * (load8(x, first + j, count, xf) * r);
  })
  return h == 0 ? 0.0f : sum8(dot8) / (float)h;
}

// dx of `n` consecutive rows from `first` (n = 1 or 2, a constant at each call; component k of
// `r` and `coeff` is row k's), and with has_dw their dweight terms into `block` (the f32 block
// sums; 16-bit x, llama or none) or else into `slot`, row by row: a pair adds the same terms in
// the same order as two single rows, but reads and writes each entry once, not twice.
OPREG_INLINE void rms_rows_dx(global const uchar* dy, global const uchar* ds, global const uchar* x,
                              global const uchar* w, global uchar* dx, global uchar* slot, global uchar* block,
                              ulong first, uint h,
                              float2 r, float2 coeff, uint n, float offset, int casting, int has_weight, int has_dw,
                              int fused, int xf, int wf) {
  FOR_STEPS8(j, count, h, {
    const float8 s = rms_scale8(w, j, count, offset, casting, has_weight, wf);
    const float8 ga = load8(dy, first + j, count, xf);
    const float8 xa = load8(x, first + j, count, xf);
    float8 gb = 0.0f;
    float8 xb = 0.0f;
    if (n == 2) {
      gb = load8(dy, first + h + j, count, xf);
      xb = load8(x, first + h + j, count, xf);
    }
    if (block != 0) {
      // 16-bit x (block is set only with has_dw): the exact terms into the block sums, one row
      // after the other.
      float8 lo;
      float8 a = load8(block, j, count, FMT_F32) + rms_dw_term8(ga, xa, r.x, casting, xf, &lo);
      if (n == 2) a += rms_dw_term8(gb, xb, r.y, casting, xf, &lo);
      store8(block, j, count, a, FMT_F32);
    } else if (has_dw) {
      float8 sum = load8(slot, j, count, FMT_F32);
      float8 comp = load8(slot, h + j, count, FMT_F32);
      float8 lo;
      float8 hi = rms_dw_term8(ga, xa, r.x, casting, xf, &lo);
      add_term8(&sum, &comp, hi, lo);
      if (n == 2) {
        hi = rms_dw_term8(gb, xb, r.y, casting, xf, &lo);
        add_term8(&sum, &comp, hi, lo);
      }
      store8(slot, j, count, sum, FMT_F32);
      store8(slot, h + j, count, comp, FMT_F32);
    }
    float8 d = r.x * (ga * s - coeff.x * (xa * r.x));
    if (fused) d += load8(ds, first + j, count, xf);
    store8(dx, first + j, count, d, xf);
    if (n == 2) {
      d = r.y * (gb * s - coeff.y * (xb * r.y));
      if (fused) d += load8(ds, first + h + j, count, xf);
      store8(dx, first + h + j, count, d, xf);
    }
  })
}

inline void rms_bwd_rows(global const uchar* dy, global const uchar* ds, global const uchar* x, global const uchar* w,
                         global const float* rstd, global uchar* dx, global float* partial, ulong rows, uint h,
                         uint team, float offset, int casting, int has_weight, int has_dw, int fused,
                         local float* scratch, int xf, int wf) {
  const ulong per = (rows + get_num_groups(0) - 1) / get_num_groups(0);
  const ulong begin = min(rows, (ulong)get_group_id(0) * per);
  const ulong end = min(rows, begin + per);
  const uint lid = get_local_id(0);
  global float* slot = partial + (ulong)get_group_id(0) * 2 * h;
  // The block sums (16-bit x, llama or none): h floats a group, after every group's slot.
  const bool blocked = has_dw && xf != FMT_F32 && casting != CAST_GEMMA;
  global float* block = blocked ? partial + (ulong)get_num_groups(0) * 2 * h + (ulong)get_group_id(0) * h : 0;
  if (has_dw) {
    if (lid != 0) return;
    for (uint j = 0; j < 2 * h; ++j) slot[j] = 0.0f;
    if (blocked) {
      for (uint j = 0; j < h; ++j) block[j] = 0.0f;
    }
  }
  const ulong step = has_dw ? 1 : get_local_size(0);
  for (ulong row = begin + (has_dw ? 0 : lid); row < end; row += step) {
    // Two rows at a time where one work-item walks the block (the slot is its own).
    const uint n = has_dw && row + 1 < end ? 2 : 1;
    const ulong first = row * h;
    const float2 r = (float2)(rstd[row], rstd[row + n - 1]);
    const float ca = rms_coefficient(dy, x, w, first, h, r.x, offset, casting, has_weight, xf, wf);
    if (n == 2) {
      const float cb = rms_coefficient(dy, x, w, first + h, h, r.y, offset, casting, has_weight, xf, wf);
      rms_rows_dx(dy, ds, x, w, dx, (global uchar*)slot, (global uchar*)block, first, h, r, (float2)(ca, cb), 2,
                  offset, casting, has_weight, has_dw, fused, xf, wf);
      ++row;
    } else {
      rms_rows_dx(dy, ds, x, w, dx, (global uchar*)slot, (global uchar*)block, first, h, r, (float2)(ca, ca), 1,
                  offset, casting, has_weight, has_dw, fused, xf, wf);
    }
    // Every RMS_ROW_BLOCK rows of the group's (pairs keep the count even) and after its last:
    // the block sums into the slot, and the block cleared where rows follow.
    if (blocked && ((row + 1 - begin) % RMS_ROW_BLOCK == 0 || row + 1 == end)) {
      const bool more = row + 1 != end;
      FOR_STEPS8(j, count, h, {
        slot_fold8(slot, h, j, count, load8((global uchar*)block, j, count, FMT_F32), (float8)0.0f);
        if (more) store8((global uchar*)block, j, count, (float8)0.0f, FMT_F32);
      })
    }
  }
}

// ---- Kernels: one per (x format, weight format) pair, so every format branch above folds.

#define RMS_FWD_PARAMS                                                                                       \
  global const uchar *x, ulong x_off, global const uchar *res, ulong res_off, global const uchar *w,          \
      ulong w_off, global uchar *y, ulong y_off, global uchar *s, ulong s_off, global uchar *rstd,            \
      ulong rstd_off, ulong rows, uint h, uint team, float eps, float offset, int casting, int has_weight,     \
      int fused, local float *scratch
#define RMS_FWD_ARGS                                                                                         \
  x + x_off, res + res_off, w + w_off, y + y_off, s + s_off, (global float*)(rstd + rstd_off), rows, h, team, \
      eps, offset, casting, has_weight, fused, scratch

#define RMS_BWD_PARAMS                                                                                       \
  global const uchar *dy, ulong dy_off, global const uchar *ds, ulong ds_off, global const uchar *x,          \
      ulong x_off, global const uchar *w, ulong w_off, global const uchar *rstd, ulong rstd_off,              \
      global uchar *dx, ulong dx_off, global uchar *partial, ulong partial_off, ulong rows, uint h, uint team, \
      float offset, int casting, int has_weight, int has_dw, int fused, local float *scratch
#define RMS_BWD_ARGS                                                                                          \
  dy + dy_off, ds + ds_off, x + x_off, w + w_off, (global const float*)(rstd + rstd_off), dx + dx_off,      \
      (global float*)(partial + partial_off), rows, h, team, offset, casting, has_weight, has_dw, fused,      \
      scratch

#define RMS_ROW_KERNELS(name, xf, wf)                                                                     \
  kernel void rms_norm_fwd_##name(RMS_FWD_PARAMS) { rms_fwd(RMS_FWD_ARGS, xf, wf); }                    \
  kernel void rms_norm_bwd_##name(RMS_BWD_PARAMS) { rms_bwd(RMS_BWD_ARGS, xf, wf); }               \
  kernel void rms_norm_fwd_rows_##name(RMS_FWD_PARAMS) { rms_fwd_rows(RMS_FWD_ARGS, xf, wf); }           \
  kernel void rms_norm_bwd_rows_##name(RMS_BWD_PARAMS) { rms_bwd_rows(RMS_BWD_ARGS, xf, wf); }

FOR_EACH_FORMAT_PAIR(RMS_ROW_KERNELS)

#define RMS_DW_COLUMNS_KERNEL(name, xf)                                                                       \
  kernel void rms_norm_dw_columns_##name(global const uchar* dy, ulong dy_off, global const uchar* x,         \
                                         ulong x_off, global const uchar* rstd, ulong rstd_off,              \
                                         global uchar* partial, ulong partial_off, ulong rows, uint h,       \
                                         uint tiles, uint chunks, ulong rows_per_chunk, int casting) {       \
    rms_dw_columns(dy + dy_off, x + x_off, (global const float*)(rstd + rstd_off),                           \
                   (global float*)(partial + partial_off), rows, h, tiles, chunks, rows_per_chunk, casting,   \
                   xf);                                                                                      \
  }

FOR_EACH_FORMAT(RMS_DW_COLUMNS_KERNEL)

DW_REDUCE_KERNELS(rms_norm)
