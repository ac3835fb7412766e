// layer_norm and group_norm forward and backward (src/backends/xpu/norm/launch.cpp launches them;
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

// ---- A range of a set: elements begin + t, begin + t + team, ... below `end` of the set whose
// elements start at `first`, `steps` of them for every work-item of the team (a trip count the
// group shares; the element is tested inside). The set kernels take a whole set (0, size), the
// split kernels a part of one.

// The range's sum: a compensated sum per work-item, joined by the team's tree.
OPREG_INLINE float range_total(global const uchar* x, ulong first, uint begin, uint end, uint t, uint team, uint steps,
                               uint lid, local float* scratch, int xf) {
  float sum = 0.0f;
  float comp = 0.0f;
  for (uint k = 0; k < steps; ++k) {
    const uint j = begin + t + k * team;
    if (j < end) compensated_add(&sum, &comp, load_elem(x, first + j, xf));
  }
  return team_sum(scratch, lid, t, team, sum + comp);
}

// The range's squared deviations from `mean`, scaled: the result times 2^(2 *m_out).
OPREG_INLINE float range_squares(global const uchar* x, ulong first, uint begin, uint end, float mean, uint t,
                                 uint team, uint steps, uint lid, local float* scratch, int* m_out, int xf) {
  float squares = 0.0f;
  int m = 0;
  for (uint k = 0; k < steps; ++k) {
    const uint j = begin + t + k * team;
    if (j < end) add_square(&squares, &m, load_elem(x, first + j, xf) - mean);
  }
  return team_square_sum(scratch, lid, t, team, squares, m, m_out);
}

// y = ((x - mean) rstd) w + b over the range.
OPREG_INLINE void range_y(global const uchar* x, global const uchar* w, global const uchar* b, global uchar* y,
                          ulong first, uint begin, uint end, uint pbase, uint spread, float mean, float r, uint t,
                          uint team, uint steps, int has_weight, int has_bias, int xf, int pf) {
  for (uint k = 0; k < steps; ++k) {
    const uint j = begin + t + k * team;
    if (j < end) {
      const uint c = norm_param(pbase, j, spread);
      const float xhat = (load_elem(x, first + j, xf) - mean) * r;
      const float wv = norm_param_value(w, c, has_weight, 1.0f, pf);
      const float bv = norm_param_value(b, c, has_bias, 0.0f, pf);
      store_elem(y, first + j, xhat * wv + bv, xf);
    }
  }
}

// The range's sum(xhat g) and sum(g), g = w dy, joined by the team's tree.
OPREG_INLINE float2 range_bwd_sums(global const uchar* dy, global const uchar* x, global const uchar* w, ulong first,
                                   uint begin, uint end, uint pbase, uint spread, float mean, float r, uint t,
                                   uint team, uint steps, uint lid, local float* scratch, int has_weight, int xf,
                                   int pf) {
  float s1 = 0.0f;
  float s2 = 0.0f;
  for (uint k = 0; k < steps; ++k) {
    const uint j = begin + t + k * team;
    if (j < end) {
      const float wv = norm_param_value(w, norm_param(pbase, j, spread), has_weight, 1.0f, pf);
      const float gv = wv * load_elem(dy, first + j, xf);
      s1 += (load_elem(x, first + j, xf) - mean) * r * gv;
      s2 += gv;
    }
  }
  return team_sum2(scratch, lid, t, team, s1, s2);
}

// dx = (g - (xhat c1 + c2)) rstd over the range (each element read before it is written).
OPREG_INLINE void range_dx(global const uchar* dy, global const uchar* x, global const uchar* w, global uchar* dx,
                           ulong first, uint begin, uint end, uint pbase, uint spread, float mean, float r, float c1,
                           float c2, uint t, uint team, uint steps, int has_weight, int xf, int pf) {
  for (uint k = 0; k < steps; ++k) {
    const uint j = begin + t + k * team;
    if (j < end) {
      const float wv = norm_param_value(w, norm_param(pbase, j, spread), has_weight, 1.0f, pf);
      const float gv = wv * load_elem(dy, first + j, xf);
      const float xhat = (load_elem(x, first + j, xf) - mean) * r;
      store_elem(dx, first + j, (gv - (xhat * c1 + c2)) * r, xf);
    }
  }
}

inline void norm_fwd(global const uchar* x, global const uchar* w, global const uchar* b, global uchar* y,
                     global float* mean_out, global float* rstd_out, ulong sets, uint groups, uint channels,
                     uint spread, uint team, float eps, int has_weight, int has_bias, local float* scratch, int xf,
                     int pf) {
  const uint size = channels * spread;
  FOR_TEAM_ROWS(g, team, sets, size, set, valid, first, {
    const uint end = valid ? size : 0;
    const float total = range_total(x, first, 0, end, g.t, team, g.steps, g.lid, scratch, xf);
    const float mean = size == 0 ? 0.0f : total / (float)size;
    int m;
    const float deviation = range_squares(x, first, 0, end, mean, g.t, team, g.steps, g.lid, scratch, &m, xf);
    const float r = scaled_rstd(deviation, m, size, eps);
    if (valid && g.t == 0) {
      mean_out[set] = mean;
      rstd_out[set] = r;
    }
    range_y(x, w, b, y, first, 0, end, (uint)(set % groups) * channels, spread, mean, r, g.t, team, g.steps,
            has_weight, has_bias, xf, pf);
  })
}

// dx = (g - (xhat c1 + c2)) rstd with g = w dy, c1 = mean(xhat g), c2 = mean(g) over the set.
// dx may be dy: each element is read before it is written, and the set's sums are complete
// before any of its dx is.
inline void norm_bwd(global const uchar* dy, global const uchar* x, global const uchar* w,
                     global const float* mean_in, global const float* rstd_in, global uchar* dx, ulong sets,
                     uint groups, uint channels, uint spread, uint team, int has_weight, local float* scratch, int xf,
                     int pf) {
  const uint size = channels * spread;
  FOR_TEAM_ROWS(g, team, sets, size, set, valid, first, {
    const uint end = valid ? size : 0;
    const float mean = valid ? mean_in[set] : 0.0f;
    const float r = valid ? rstd_in[set] : 0.0f;
    const uint pbase = valid ? (uint)(set % groups) * channels : 0;
    const float2 sums =
        range_bwd_sums(dy, x, w, first, 0, end, pbase, spread, mean, r, g.t, team, g.steps, g.lid, scratch, has_weight,
                       xf, pf);
    const float c1 = size == 0 ? 0.0f : sums.x / (float)size;
    const float c2 = size == 0 ? 0.0f : sums.y / (float)size;
    range_dx(dy, x, w, dx, first, 0, end, pbase, spread, mean, r, c1, c2, g.t, team, g.steps, has_weight, xf, pf);
  })
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

// A parameter's dweight and dbias sums over its elements, each compensated: norm_dw_term's terms
// and dy's.
typedef struct {
  float w_sum;
  float w_comp;
  float b_sum;
  float b_comp;
} ParamSums;

inline ParamSums no_param_sums(void) {
  ParamSums p;
  p.w_sum = 0.0f;
  p.w_comp = 0.0f;
  p.b_sum = 0.0f;
  p.b_comp = 0.0f;
  return p;
}

// Adds element i (dy's value g; x is read only for dweight) of a set with statistics mean and r.
OPREG_INLINE void param_sums_add(ParamSums* p, float g, global const uchar* x, ulong i, float mean, float r,
                                 int want_w, int want_b, int xf) {
  if (want_w) {
    float lo;
    const float hi = norm_dw_term(g, load_elem(x, i, xf), mean, r, &lo);
    add_term(&p->w_sum, &p->w_comp, hi, lo);
  }
  if (want_b) compensated_add(&p->b_sum, &p->b_comp, g);
}

// Parameter c's sums into slots `sw` (dweight) and `sb` (dbias): sums at [c], compensations at
// [params + c].
OPREG_INLINE void param_sums_store(ParamSums p, global float* sw, global float* sb, ulong c, uint params, int want_w,
                                   int want_b) {
  if (want_w) {
    sw[c] = p.w_sum;
    sw[params + c] = p.w_comp;
  }
  if (want_b) {
    sb[c] = p.b_sum;
    sb[params + c] = p.b_comp;
  }
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
    ParamSums sums = no_param_sums();
    for (ulong i = begin; i < end; ++i) {
      const ulong set = i * groups + c / channels;
      const float mean = mean_in[set];
      const float r = rstd_in[set];
      const ulong at = i * row + (ulong)c * spread;
      for (uint s = 0; s < spread; ++s) {
        param_sums_add(&sums, load_elem(dy, at + s, xf), x, at + s, mean, r, want_w, want_b, xf);
      }
    }
    const ulong slot = chunk * 2 * params;
    param_sums_store(sums, pw + slot, pb + slot, c, params, want_w, want_b);
  }
}

// ---- Split layout (few large sets): each set is cut into `parts` parts of `span` elements (the
// last may be shorter), unit u = set * parts + part, a whole work-group per unit, the groups
// striding over the units. One kernel, launched three times in queue order with `phase` 0, 1, 2:
//   fwd 0: each part's sum and its squared deviations from its own mean (two-pass within the
//          part, scaled as range_squares is) into `stats`, 3 floats a unit (sum, squares, m);
//       1: a work-item per set merges its parts in part order: the mean from the compensated sum
//          of the parts' sums, M2 by Chan's combination M2 = sum M2_p + sum n_p (mean_p - mean)^2
//          on scaled squares (never E[x^2] - mean^2), then mean and rstd are written;
//       2: y per part.
//   bwd 0: each part's sum(xhat g) and sum(g) into `stats` (2 floats a unit) and, with dweight or
//          dbias wanted, the part's per-channel terms into slot (set / groups) * parts + part of
//          `pw` and `pb` (zeroed by the host; partials_reduce sums the slots in slot order);
//       1: a work-item per set adds its parts' sums in part order into c1 and c2, stored after
//          the units' sums (stats[2 units + 2 set]);
//       2: dx per part (dx may be dy: phase 0 has read dy before).
// No atomics anywhere: every merge runs in a fixed order, so results are the same on every run.

// The first element of part `part` (size for the parts past the set's end).
inline uint part_begin(uint part, uint span, uint size) { return (uint)min((ulong)size, (ulong)part * span); }

// Unit u's set, its part's elements [begin, end) of the set, and the set's first element.
typedef struct {
  ulong set;
  uint part;
  uint begin;
  uint end;
  ulong first;
} SplitUnit;

inline SplitUnit split_unit(ulong u, uint parts, uint span, uint size) {
  SplitUnit unit;
  unit.set = u / parts;
  unit.part = (uint)(u % parts);
  unit.begin = part_begin(unit.part, span, size);
  unit.end = part_begin(unit.part + 1, span, size);
  unit.first = unit.set * size;
  return unit;
}

// Phase 1's walk: `body` for each `set` of this work-item's (a work-item per set), with trip
// counts the whole launch shares and the set tested inside, as part_param_grads' are. `body` may
// hold commas.
#define FOR_SPLIT_SETS(set, sets, ...)                                                      \
  const ulong set##_turns = ((sets) + get_global_size(0) - 1) / get_global_size(0);         \
  for (ulong set##_turn = 0; set##_turn < set##_turns; ++set##_turn) {                      \
    const ulong set = get_global_id(0) + set##_turn * get_global_size(0);                   \
    if (set >= (sets)) continue;                                                            \
    __VA_ARGS__                                                                             \
  }

// (*sum, *m) += (other, other_m), scaled sums of squares (the value is sum * 2^2m), joined as
// team_square_sum joins two work-items' pairs.
inline void join_squares(float* sum, int* m, float other, int other_m) {
  const int top = max(*m, other_m);
  const float da = pow2(*m - top);
  const float db = pow2(other_m - top);
  *sum = *sum * da * da + other * db * db;
  *m = top;
}

// A compensated (sum, comp) pair per work-item of the group joined by a tree in local memory in
// a fixed order, as partials_reduce joins its lanes; the total lands in work-item 0's pair.
// Every work-item must call it; `scratch` has two floats per work-item.
OPREG_INLINE void group_pair_join(local float* scratch, uint lid, uint team, float* sum, float* comp) {
  local float* sums = scratch;
  local float* comps = scratch + team;
  sums[lid] = *sum;
  comps[lid] = *comp;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = team >> 1; s > 0; s >>= 1) {
    if (lid < s) {
      float a = sums[lid];
      float c = comps[lid] + comps[lid + s];
      compensated_add(&a, &c, sums[lid + s]);
      sums[lid] = a;
      comps[lid] = c;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  *sum = sums[0];
  *comp = comps[0];
  barrier(CLK_LOCAL_MEM_FENCE);
}

// A part's dweight terms (norm_dw_term's, as the column kernel's) and dbias terms (dy) per channel,
// compensated, into its slots `sw` and `sb` (sums at [c], compensations at [params + c]). A channel
// cut by a part boundary has a share in each part's slot. Runs of at least a group's worth of
// elements are summed by the whole group, neighbouring work-items reading neighbouring elements;
// shorter runs (layer_norm's single elements) by one work-item each.
OPREG_INLINE void part_param_grads(global const uchar* dy, global const uchar* x, global float* sw, global float* sb,
                                   ulong first, uint begin, uint end, uint pbase, uint params, uint spread, float mean,
                                   float r, uint lid, uint team, local float* scratch, int want_w, int want_b,
                                   int xf) {
  if (begin >= end) return;
  const uint lo = begin / spread;
  const uint hi = (end - 1) / spread;
  if (spread >= team) {
    for (uint c = lo; c <= hi; ++c) {
      const uint from = max(begin, c * spread);
      const uint to = min(end, (c + 1) * spread);
      const uint steps = (to - from + team - 1) / team;
      ParamSums sums = no_param_sums();
      for (uint k = 0; k < steps; ++k) {
        const uint j = from + lid + k * team;
        if (j < to) param_sums_add(&sums, load_elem(dy, first + j, xf), x, first + j, mean, r, want_w, want_b, xf);
      }
      if (want_w) group_pair_join(scratch, lid, team, &sums.w_sum, &sums.w_comp);
      if (want_b) group_pair_join(scratch, lid, team, &sums.b_sum, &sums.b_comp);
      if (lid == 0) param_sums_store(sums, sw, sb, pbase + c, params, want_w, want_b);
    }
  } else {
    // Trip counts the whole group shares, the channel and element tested inside (PoCL's
    // work-group compiler ran a per-work-item bound here past its end).
    const uint rounds = (hi - lo + team) / team;
    for (uint k = 0; k < rounds; ++k) {
      const uint c = lo + lid + k * team;
      ParamSums sums = no_param_sums();
      for (uint s = 0; s < spread; ++s) {
        const uint j = c * spread + s;
        if (c > hi || j < begin || j >= end) continue;
        param_sums_add(&sums, load_elem(dy, first + j, xf), x, first + j, mean, r, want_w, want_b, xf);
      }
      if (c > hi) continue;
      param_sums_store(sums, sw, sb, pbase + c, params, want_w, want_b);
    }
  }
}

inline void norm_fwd_split(global const uchar* x, global const uchar* w, global const uchar* b, global uchar* y,
                           global float* mean_out, global float* rstd_out, global float* stats, ulong sets,
                           uint groups, uint channels, uint spread, uint parts, uint span, float eps, int has_weight,
                           int has_bias, int phase, local float* scratch, int xf, int pf) {
  const uint size = channels * spread;
  if (phase == 1) {
    FOR_SPLIT_SETS(set, sets, {
      global const float* st = stats + set * parts * 3;
      float sum = 0.0f;
      float comp = 0.0f;
      for (uint p = 0; p < parts; ++p) compensated_add(&sum, &comp, st[3 * p]);
      const float mean = size == 0 ? 0.0f : (sum + comp) / (float)size;
      float deviation = 0.0f;
      int m = 0;
      for (uint p = 0; p < parts; ++p) {
        join_squares(&deviation, &m, st[3 * p + 1], (int)st[3 * p + 2]);
        const uint count = part_begin(p + 1, span, size) - part_begin(p, span, size);
        if (count > 0) {
          // The part's mean as phase 0 computed it, shifted to the set's.
          float shift = 0.0f;
          int shift_m = 0;
          add_square(&shift, &shift_m, st[3 * p] / (float)count - mean);
          join_squares(&deviation, &m, shift * (float)count, shift_m);
        }
      }
      mean_out[set] = mean;
      rstd_out[set] = scaled_rstd(deviation, m, size, eps);
    })
    return;
  }
  const uint lid = get_local_id(0);
  const uint team = get_local_size(0);
  const uint steps = (span + team - 1) / team;
  const ulong units = sets * parts;
  for (ulong u = get_group_id(0); u < units; u += get_num_groups(0)) {
    const SplitUnit unit = split_unit(u, parts, span, size);
    if (phase == 0) {
      const float total = range_total(x, unit.first, unit.begin, unit.end, lid, team, steps, lid, scratch, xf);
      const float mean = unit.end == unit.begin ? 0.0f : total / (float)(unit.end - unit.begin);
      int m;
      const float deviation =
          range_squares(x, unit.first, unit.begin, unit.end, mean, lid, team, steps, lid, scratch, &m, xf);
      if (lid == 0) {
        stats[3 * u] = total;
        stats[3 * u + 1] = deviation;
        stats[3 * u + 2] = (float)m;
      }
    } else {
      range_y(x, w, b, y, unit.first, unit.begin, unit.end, (uint)(unit.set % groups) * channels, spread,
              mean_out[unit.set], rstd_out[unit.set], lid, team, steps, has_weight, has_bias, xf, pf);
    }
  }
}

inline void norm_bwd_split(global const uchar* dy, global const uchar* x, global const uchar* w,
                           global const float* mean_in, global const float* rstd_in, global uchar* dx,
                           global float* pw, global float* pb, global float* stats, ulong sets, uint groups,
                           uint channels, uint spread, uint parts, uint span, int has_weight, int want_w, int want_b,
                           int phase, local float* scratch, int xf, int pf) {
  const uint size = channels * spread;
  const uint params = groups * channels;
  const ulong units = sets * parts;
  global float* c12 = stats + 2 * units;  // c1, c2 of each set
  if (phase == 1) {
    FOR_SPLIT_SETS(set, sets, {
      global const float* st = stats + set * parts * 2;
      float s1 = 0.0f;
      float s1_comp = 0.0f;
      float s2 = 0.0f;
      float s2_comp = 0.0f;
      for (uint p = 0; p < parts; ++p) {
        compensated_add(&s1, &s1_comp, st[2 * p]);
        compensated_add(&s2, &s2_comp, st[2 * p + 1]);
      }
      c12[2 * set] = size == 0 ? 0.0f : (s1 + s1_comp) / (float)size;
      c12[2 * set + 1] = size == 0 ? 0.0f : (s2 + s2_comp) / (float)size;
    })
    return;
  }
  const uint lid = get_local_id(0);
  const uint team = get_local_size(0);
  const uint steps = (span + team - 1) / team;
  for (ulong u = get_group_id(0); u < units; u += get_num_groups(0)) {
    const SplitUnit unit = split_unit(u, parts, span, size);
    const uint pbase = (uint)(unit.set % groups) * channels;
    const float mean = mean_in[unit.set];
    const float r = rstd_in[unit.set];
    if (phase == 0) {
      const float2 sums = range_bwd_sums(dy, x, w, unit.first, unit.begin, unit.end, pbase, spread, mean, r, lid,
                                         team, steps, lid, scratch, has_weight, xf, pf);
      if (lid == 0) {
        stats[2 * u] = sums.x;
        stats[2 * u + 1] = sums.y;
      }
      if (want_w || want_b) {
        const ulong slot = (unit.set / groups) * parts + unit.part;
        part_param_grads(dy, x, pw + slot * 2 * params, pb + slot * 2 * params, unit.first, unit.begin, unit.end,
                         pbase, params, spread, mean, r, lid, team, scratch, want_w, want_b, xf);
      }
    } else {
      range_dx(dy, x, w, dx, unit.first, unit.begin, unit.end, pbase, spread, mean, r, c12[2 * unit.set],
               c12[2 * unit.set + 1], lid, team, steps, has_weight, xf, pf);
    }
  }
}

// ---- Kernels: one per (x format, parameter format) pair, so every format branch above folds.
// The arguments every kernel of a direction starts with (rows.cl's kernels too): the tensors as
// (buffer, byte offset) pairs, passed on as pointers (NORM_*_TENSORS_AT); the backward kernels that
// write parameter-gradient partials (split, rows) add them and a float work buffer `work`, named
// for each kernel (NORM_PARTIALS); then the sets' geometry.

#define NORM_FWD_TENSORS                                                                                       \
  global const uchar *x, ulong x_off, global const uchar *w, ulong w_off, global const uchar *b, ulong b_off,   \
      global uchar *y, ulong y_off, global uchar *mean, ulong mean_off, global uchar *rstd, ulong rstd_off
#define NORM_FWD_TENSORS_AT \
  x + x_off, w + w_off, b + b_off, y + y_off, (global float*)(mean + mean_off), (global float*)(rstd + rstd_off)

#define NORM_BWD_TENSORS                                                                                    \
  global const uchar *dy, ulong dy_off, global const uchar *x, ulong x_off, global const uchar *w, ulong w_off, \
      global const uchar *mean, ulong mean_off, global const uchar *rstd, ulong rstd_off, global uchar *dx,     \
      ulong dx_off
#define NORM_BWD_TENSORS_AT                                                                                \
  dy + dy_off, x + x_off, w + w_off, (global const float*)(mean + mean_off),                               \
      (global const float*)(rstd + rstd_off), dx + dx_off

#define NORM_PARTIALS(work) \
  global uchar *pw, ulong pw_off, global uchar *pb, ulong pb_off, global uchar *work, ulong work##_off
#define NORM_PARTIALS_AT(work) \
  (global float*)(pw + pw_off), (global float*)(pb + pb_off), (global float*)(work + work##_off)

#define NORM_SETS_PARAMS ulong sets, uint groups, uint channels, uint spread
#define NORM_SETS_ARGS sets, groups, channels, spread

// The forward of a set kernel (norm_fwd, rows.cl's norm_fwd_rows): the arguments after the sets.
#define NORM_FWD_PARAMS \
  NORM_FWD_TENSORS, NORM_SETS_PARAMS, uint team, float eps, int has_weight, int has_bias, local float *scratch
#define NORM_FWD_ARGS NORM_FWD_TENSORS_AT, NORM_SETS_ARGS, team, eps, has_weight, has_bias, scratch

#define NORM_SET_KERNELS(name, xf, pf)                                                                       \
  kernel void norm_fwd_##name(NORM_FWD_PARAMS) { norm_fwd(NORM_FWD_ARGS, xf, pf); }                          \
  kernel void norm_bwd_##name(NORM_BWD_TENSORS, NORM_SETS_PARAMS, uint team, int has_weight,                \
                              local float* scratch) {                                                        \
    norm_bwd(NORM_BWD_TENSORS_AT, NORM_SETS_ARGS, team, has_weight, scratch, xf, pf);                        \
  }

#define NORM_SPLIT_KERNELS(name, xf, pf)                                                                     \
  kernel void norm_fwd_split_##name(NORM_FWD_TENSORS, global uchar* stats, ulong stats_off, NORM_SETS_PARAMS, \
                                    uint parts, uint span, float eps, int has_weight, int has_bias, int phase, \
                                    local float* scratch) {                                                  \
    norm_fwd_split(NORM_FWD_TENSORS_AT, (global float*)(stats + stats_off), NORM_SETS_ARGS, parts, span, eps,  \
                   has_weight, has_bias, phase, scratch, xf, pf);                                            \
  }                                                                                                          \
  kernel void norm_bwd_split_##name(NORM_BWD_TENSORS, NORM_PARTIALS(stats), NORM_SETS_PARAMS, uint parts,    \
                                    uint span, int has_weight, int want_w, int want_b, int phase,            \
                                    local float* scratch) {                                                  \
    norm_bwd_split(NORM_BWD_TENSORS_AT, NORM_PARTIALS_AT(stats), NORM_SETS_ARGS, parts, span, has_weight,    \
                   want_w, want_b, phase, scratch, xf, pf);                                                  \
  }

#define NORM_ALL_KERNELS(name, xf, pf) NORM_SET_KERNELS(name, xf, pf) NORM_SPLIT_KERNELS(name, xf, pf)

FOR_EACH_FORMAT_PAIR(NORM_ALL_KERNELS)

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

FOR_EACH_FORMAT(NORM_DW_COLUMNS_KERNEL)

DW_REDUCE_KERNELS(norm)
