// rope forward and backward (src/backends/xpu/rope/launch.cpp launches them; semantics:
// docs/ops.md, src/ops/reference). One kernel per (q format, table format) pair serves both
// directions: the backward passes sin_sign -1 (the inverse rotation).
//
// Teams over positions: a work-group's work-items form teams of `team` (a power of two, near
// D/2, at most the group), one (b, t) position a team, the teams striding over the B * T
// positions. Lane j of a team takes pairs j, j + team, ... of its position: it reads each pair's
// cos and sin once, into registers, and turns that pair in every head of q, then of k. So a
// position's angles are read once for all its heads, neighbouring lanes take neighbouring pairs
// (coalesced on a GPU) and nothing is shared: no local memory, no barriers.
//
// The arithmetic is f32 with each output rounded once on store. Each output x1 c - x2 s (and
// x2 c + x1 s) is one difference of products with a relative error of at most 2^-23 (rope_dot
// below), not two rounded products and their difference: with large values (the conformance edge
// set's) the products cancel, and the plain form's f32 rounding errors, relative to the small
// result, went far past f32's tolerance (2e-4 relative on 2x6x33x64). A pair's two inputs are
// read before its outputs are written, and no other work-item touches them, so an output may be
// its input (in place). A gathered position whose row is outside [0, table_rows) turns its pairs
// by NaN (NaN outputs), reading no table.

// a b - c d, by Kahan's algorithm: w = c d rounded, its rounding error e = c d - w exactly (an
// fma), then (a b - w) in one rounding (an fma), less e: a relative error of at most 2u, u =
// 2^-24 (Jeannerod, Louvet and Muller, Math. Comp. 82 (2013)). Where w or c d is not finite, e
// is an infinity or NaN and is dropped, so that infinities and NaN land where the plain form
// puts them.
inline float rope_dot(float a, float b, float c, float d) {
  const float w = c * d;
  const float e = fma(c, d, -w);
  return fma(a, b, -w) - (isfinite(e) ? e : 0.0f);
}

// Pair i of `heads` heads at one position: element (h, a) of a side at at + h * head + a, its
// partner `apart` further on (interleaved: 1; half: D/2).
inline void rope_turn(global const uchar* in, ulong in_at, ulong in_head, global uchar* out, ulong out_at,
                      ulong out_head, ulong heads, ulong a, ulong apart, float c, float s, int fmt) {
  for (ulong h = 0; h < heads; ++h) {
    const ulong src = in_at + h * in_head + a;
    const ulong dst = out_at + h * out_head + a;
    const float x1 = load_elem(in, src, fmt);
    const float x2 = load_elem(in, src + apart, fmt);
    store_elem(out, dst, rope_dot(x1, c, x2, s), fmt);
    store_elem(out, dst + apart, rope_dot(x2, c, -x1, s), fmt);
  }
}

// One side's tensors and strides (elements; b, h, t: the last dim is contiguous), as the kernels
// take them.
#define ROPE_SIDE_PARAMS(x)                                                                           \
  global const uchar *x, ulong x##_off, global uchar *x##_out, ulong x##_out_off, ulong x##_heads,      \
      ulong x##_sb, ulong x##_sh, ulong x##_st, ulong x##o_sb, ulong x##o_sh, ulong x##o_st
#define ROPE_SIDE_ARGS(x) x, x##_off, x##_out, x##_out_off, x##_heads, x##_sb, x##_sh, x##_st, x##o_sb, x##o_sh, x##o_st

// The tables' strides are (b, t) (b's 0 for a table shared by every b). Without position_ids
// (gathered 0) position (b, t)'s row starts at b * stride_b + t * stride_t; with them at row *
// stride_t, row = position_ids[b * pos_sb + t * pos_st]. Pair i's angle is entry i * table_step of
// the row. The pairing comes as numbers: pair i's first element is i * pair_step and its second
// `apart` further on (interleaved 2 and 1, half 1 and D/2).
#define ROPE_PARAMS                                                                                    \
  ROPE_SIDE_PARAMS(q), ROPE_SIDE_PARAMS(k), global const uchar *cos_table, ulong cos_off,                \
      global const uchar *sin_table, ulong sin_off, ulong cos_sb, ulong cos_st, ulong sin_sb, ulong sin_st, \
      ulong table_rows, ulong table_step, global const uchar *positions, ulong positions_off, int gathered, \
      ulong pos_sb, ulong pos_st, ulong seq, ulong count, ulong pairs, ulong pair_step, ulong apart,        \
      uint team, float sin_sign
#define ROPE_ARGS                                                                                      \
  ROPE_SIDE_ARGS(q), ROPE_SIDE_ARGS(k), cos_table, cos_off, sin_table, sin_off, cos_sb, cos_st, sin_sb,   \
      sin_st, table_rows, table_step, positions, positions_off, gathered, pos_sb, pos_st, seq, count,       \
      pairs, pair_step, apart, team, sin_sign

inline void rope(ROPE_PARAMS, int xf, int tf) {
  const uint per_group = (uint)get_local_size(0) / team;
  const uint lane = get_local_id(0) & (team - 1);
  const ulong stride = (ulong)get_num_groups(0) * per_group;
  global const long* ids = (global const long*)(positions + positions_off);
  for (ulong p = (ulong)get_group_id(0) * per_group + get_local_id(0) / team; p < count; p += stride) {
    const ulong b = p / seq;
    const ulong t = p - b * seq;
    ulong cos_at = b * cos_sb + t * cos_st;
    ulong sin_at = b * sin_sb + t * sin_st;
    bool outside = false;
    if (gathered) {
      const long row = ids[b * pos_sb + t * pos_st];
      outside = row < 0 || row >= (long)table_rows;
      cos_at = outside ? 0 : (ulong)row * cos_st;
      sin_at = outside ? 0 : (ulong)row * sin_st;
    }
    for (ulong i = lane; i < pairs; i += team) {
      float c = NAN;
      float s = NAN;
      if (!outside) {
        c = load_elem(cos_table + cos_off, cos_at + i * table_step, tf);
        s = sin_sign * load_elem(sin_table + sin_off, sin_at + i * table_step, tf);
      }
      const ulong a = i * pair_step;
      rope_turn(q + q_off, b * q_sb + t * q_st, q_sh, q_out + q_out_off, b * qo_sb + t * qo_st, qo_sh, q_heads, a,
                apart, c, s, xf);
      rope_turn(k + k_off, b * k_sb + t * k_st, k_sh, k_out + k_out_off, b * ko_sb + t * ko_st, ko_sh, k_heads, a,
                apart, c, s, xf);
    }
  }
}

#define ROPE_KERNEL(name, xf, tf) \
  kernel void rope_##name(ROPE_PARAMS) { rope(ROPE_ARGS, xf, tf); }

FOR_EACH_FORMAT_PAIR(ROPE_KERNEL)
