// Shared by every xpu program (the runtime puts it in front of each program's source).
//
// Portable OpenCL C: 1.2 semantics, nothing optional (no half arithmetic, no sub-groups, no
// work-group collectives, no generic address space, no double), so the same text runs on PoCL's
// CPU device and on Intel GPUs, and compiles to valid SPIR-V.
//
// Every kernel must be harmless when launched with every integer and float scalar set to 1 and
// every buffer a scratch block of 8 bytes per work-item of the launch: the runtime warms each
// kernel that way, as one work-group and as the largest grid a launch uses, so that a driver's
// first-launch compile (PoCL specialises each kernel for its work-group size, and separately
// for grids under and over 65536 work-items) happens when the device context is made, never in
// a user's call.

// a * b + c stays two roundings everywhere: the bit-exact conversions and add_odd rely on it, and
// results must not depend on whether a compiler fuses.
#pragma OPENCL FP_CONTRACT OFF

// For helpers that take a format (or a flag) every call site fixes: inlined whatever the
// compiler's size budget says, so that the branches fold (PoCL left store8 and the CPU-shaped
// backward's per-set helpers as calls, testing the format per element).
// Not for the functions a kernel entry calls at top level: forced there, llvm-spirv 15 emitted
// blocks before their dominators, which spirv-val rejects.
#define OPREG_INLINE inline __attribute__((always_inline))

// The CPU-shaped kernels' column loops: `body` for j = 0, 8, 16, ... below n with count = 8 (a
// constant, so load8 / store8's partial-vector paths fold away and the loop has no per-step
// branch), then once for the tail (count = n % 8) if there is one. `body` may hold commas.
#define FOR_STEPS8(j, count, n, ...)                     \
  for (uint j = 0; j + 8 <= (n); j += 8) {              \
    const uint count = 8;                               \
    __VA_ARGS__                                         \
  }                                                     \
  if ((n) % 8 != 0) {                                   \
    const uint j = (n) & ~7u;                           \
    const uint count = (n) % 8;                         \
    __VA_ARGS__                                         \
  }

#define FMT_F32 0
#define FMT_F16 1
#define FMT_BF16 2

// The kernels of every element format, M(name, fmt), and of every (x, weight) format pair the ops
// take, M(name, xf, wf): each family instantiates its kernel macros through these lists.
#define FOR_EACH_FORMAT(M) M(f32, FMT_F32) M(f16, FMT_F16) M(bf16, FMT_BF16)
#define FOR_EACH_FORMAT_PAIR(M)                                                                  \
  M(f32_f32, FMT_F32, FMT_F32)                                                                   \
  M(f16_f16, FMT_F16, FMT_F16) M(f16_f32, FMT_F16, FMT_F32) M(bf16_bf16, FMT_BF16, FMT_BF16)    \
  M(bf16_f32, FMT_BF16, FMT_F32)

#define CAST_LLAMA 0
#define CAST_GEMMA 1
#define CAST_NONE 2

// ---- 16-bit formats as bit patterns: the same results as opreg::to_half / to_bfloat16 on the
// f32 value (round to nearest even, overflow to infinity, gradual underflow, NaN made quiet), so
// that a kernel rounds where the cpu kernel does and gets the same bits.

inline float bf16_to_float(ushort h) { return as_float((uint)h << 16); }

// Adding 0x7FFF plus the lowest kept bit rounds to nearest even; the carry moves into the
// exponent by itself (the largest finite values round up to infinity).
inline ushort float_to_bf16(float f) {
  const uint w = as_uint(f);
  const uint rounded = (w + 0x7FFFu + ((w >> 16) & 1u)) >> 16;
  const uint nan = (w >> 16) | 0x40u;
  return (ushort)((w & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

// The f32 unit does the rebias: exponent and mantissa moved to f32 position with the exponent
// raised by 224 (so f16's all-ones exponent becomes f32's), then scaled by 2^-112. Subnormals:
// the mantissa under the exponent of 0.5 reads as 0.5 + m * 2^-24, less 0.5 exactly.
inline float f16_to_float(ushort h) {
  const uint w = (uint)h << 16;
  const uint sign = w & 0x80000000u;
  const uint two_w = w + w;
  const float normal = as_float((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float subnormal = as_float((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint magnitude = (h & 0x7C00u) == 0 ? as_uint(subnormal) : as_uint(normal);
  return as_float(sign | magnitude);
}

// Scaling by 2^112 then 2^-110 sends everything at or above 2^16 to infinity and leaves 4|f|;
// adding 2^(e+15) (e: f's exponent, at least f16's -14) leaves exactly f16's precision in the
// sum's mantissa, so the f32 add rounds where f16 would and the low bits hold the f16 encoding.
inline ushort float_to_f16(float f) {
  const uint w = as_uint(f);
  const uint sign = w & 0x80000000u;
  const uint magnitude = w & 0x7FFFFFFFu;
  float base = (fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  uint bias = magnitude & 0x7F800000u;
  bias = bias < 0x38800000u ? 0x38800000u : bias;
  base = as_float(bias + 0x07800000u) + base;
  const uint bits = as_uint(base);
  const uint nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  const uint nan = 0x7E00u | ((w >> 13) & 0x3FFu);
  return (ushort)((sign >> 16) | (magnitude > 0x7F800000u ? nan : nonsign));
}

// Element i of a tensor of format `fmt`. `fmt` is a constant at every call site, so the
// branches fold away when the kernel is compiled.
inline float load_elem(global const uchar* base, ulong i, int fmt) {
  if (fmt == FMT_F32) return ((global const float*)base)[i];
  const ushort h = ((global const ushort*)base)[i];
  return fmt == FMT_F16 ? f16_to_float(h) : bf16_to_float(h);
}

inline void store_elem(global uchar* base, ulong i, float v, int fmt) {
  if (fmt == FMT_F32) {
    ((global float*)base)[i] = v;
  } else {
    ((global ushort*)base)[i] = fmt == FMT_F16 ? float_to_f16(v) : float_to_bf16(v);
  }
}

// What storing v in `fmt` and reading it back gives.
inline float round_to(float v, int fmt) {
  if (fmt == FMT_F16) return f16_to_float(float_to_f16(v));
  if (fmt == FMT_BF16) return bf16_to_float(float_to_bf16(v));
  return v;
}

// a + b rounded to odd: the f32 sum and its exact error (two-sum, exact without contraction)
// say whether and which way the sum was rounded. Rounding the result to a format with at least
// two fewer mantissa bits (f16, bf16) then gives what rounding the exact sum would.
inline float add_odd(float a, float b) {
  const float s = a + b;
  const float bb = s - a;
  const float err = (a - (s - bb)) + (b - bb);
  const uint inexact = (err < 0.0f || err > 0.0f) ? 1u : 0u;
  const uint away = ((s > 0.0f && err < 0.0f) || (s < 0.0f && err > 0.0f)) ? 1u : 0u;
  return as_float((as_uint(s) - away) | inexact);
}

// ---- Sums that do not lose a long chain's low bits (the devices need not have doubles):
// Neumaier's compensated sum, a running (sum, compensation) pair. Once the sum is infinite (or
// NaN) the compensation stays as it was: inf - inf would turn it into NaN, and sum + comp must
// stay the infinity the plain sum is.
inline void compensated_add(float* sum, float* comp, float v) {
  const float t = *sum + v;
  if (isfinite(t)) *comp += fabs(*sum) >= fabs(v) ? (*sum - t) + v : (v - t) + *sum;
  *sum = t;
}

// Adds a term (hi + lo) to a compensated sum (a non-finite lo comes only with a non-finite hi,
// which decides the sum alone).
inline void add_term(float* sum, float* comp, float hi, float lo) {
  compensated_add(sum, comp, hi);
  if (isfinite(lo)) *comp += lo;
}

// a * b = product + *error exactly (Dekker's product, no fused multiply-add needed: each half
// has at most 12 significant bits, so the partial products are exact). Operands beyond 2^100
// (whose halves would overflow) and non-finite products get no error term.
inline float upper_half(float a) {
  const float c = a * 4097.0f;  // 2^12 + 1
  return fabs(a) < 0x1.0p+100f ? c - (c - a) : a;
}

inline float two_product(float a, float b, float* error) {
  const float product = a * b;
  const float ah = upper_half(a);
  const float al = a - ah;
  const float bh = upper_half(b);
  const float bl = b - bh;
  const float e = ((ah * bh - product) + ah * bl + al * bh) + al * bl;
  *error = isfinite(product) && isfinite(e) ? e : 0.0f;
  return product;
}

// The sum of `v` over the `team` work-items lid - t .. lid - t + team - 1 (team a power of two,
// t = lid % team), by a tree in local memory, the same order every time. Every work-item of the
// group must call it (it holds barriers); `scratch` has one float per work-item.
inline float team_sum(local float* scratch, uint lid, uint t, uint team, float v) {
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = team >> 1; s > 0; s >>= 1) {
    if (t < s) scratch[lid] += scratch[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = scratch[lid - t];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}

// ---- Sums of squares that neither overflow nor change ordinary results. Squares of f32 (and
// bf16) values up to 2^64 fit f32, but a few hundred of them summed do not; the devices need
// not have doubles. So each work-item keeps its sum scaled by 2^(-2m), m the largest exponent
// of its values (0 for |v| < 2: then nothing is scaled and the sum is the plain one, bit for
// bit). Scales are powers of two, so scaling is exact.

// 2^e for e in [-126, 127].
inline float pow2(int e) { return as_float((uint)(e + 127) << 23); }

// rstd from a sum of squares scaled by 2^2m (square_scale) over n elements: 2^-m / sqrt(sum / n +
// eps 2^-2m); with m = 0, 1 / sqrt(mean + eps). rms_norm's sum is of x, the norms' of deviations.
inline float scaled_rstd(float sum, int m, uint n, float eps) {
  const float mean = n == 0 ? 0.0f : sum / (float)n;
  const float down = pow2(-m);
  return down / sqrt(mean + eps * down * down);
}

// The scale exponent of v: its binary exponent, at least 0 and at most 126 (infinities and NaN
// get 126 and stay what they are).
inline int square_scale(float v) { return clamp((int)((as_uint(v) >> 23) & 0xFFu) - 127, 0, 126); }

// sum(v^2) = *sum * 2^(2 * *m); adds v.
inline void add_square(float* sum, int* m, float v) {
  const int e = square_scale(v);
  if (e > *m) {
    const float down = pow2(*m - e);  // >= 2^-126; applied twice for the square
    *sum = *sum * down * down;
    *m = e;
  }
  const float u = v * pow2(-*m);
  *sum += u * u;
}

// The team's (sum, m) pairs joined as team_sum joins sums; `scratch` has two floats per work-item.
inline float team_square_sum(local float* scratch, uint lid, uint t, uint team, float sum, int m, int* m_out) {
  local float* sums = scratch;
  local float* scales = scratch + get_local_size(0);
  sums[lid] = sum;
  scales[lid] = (float)m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = team >> 1; s > 0; s >>= 1) {
    if (t < s) {
      const int a = (int)scales[lid];
      const int b = (int)scales[lid + s];
      const int top = max(a, b);
      const float da = pow2(a - top);
      const float db = pow2(b - top);
      sums[lid] = sums[lid] * da * da + sums[lid + s] * db * db;
      scales[lid] = (float)top;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = sums[lid - t];
  *m_out = (int)scales[lid - t];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}

// ---- Rows shared out to teams of a work-group.

// How a group's work-items split into teams over the rows. Column loops run a count every
// work-item of the group shares (steps = ceil(h / team)) and test the column inside, so a GPU
// sees one trip count per group.
typedef struct {
  uint lid;        // the work-item in its group
  uint t;          // its place in its team
  uint team;       // work-items per row, a power of two
  uint steps;      // column steps of a team over a row
  ulong first;     // the group's first row
  ulong stride;    // rows from one turn of the groups to the next
} Teams;

inline Teams teams_of(uint team, uint h) {
  Teams g;
  const uint per_group = (uint)get_local_size(0) / team;
  g.lid = get_local_id(0);
  g.t = g.lid & (team - 1);
  g.team = team;
  g.steps = (h + team - 1) / team;
  g.first = (ulong)get_group_id(0) * per_group;
  g.stride = (ulong)get_num_groups(0) * per_group;
  return g;
}

// This work-item's row in the turn of the groups starting at `base`.
inline ulong team_row(Teams g, ulong base) { return base + g.lid / g.team; }

// The team kernels' walk over `rows` rows of `h` elements: declares the Teams `g` (teams of `team`
// work-items), then runs `body` once for each turn of the groups over the rows, with `row` the
// team's row, `valid` whether the team has one in this turn (every work-item of a group turns as
// often as the others, for the barriers) and `first` the row's first element. `body` may hold
// commas.
#define FOR_TEAM_ROWS(g, team, rows, h, row, valid, first, ...)                  \
  const Teams g = teams_of(team, h);                                             \
  for (ulong g##_base = g.first; g##_base < (rows); g##_base += g.stride) {      \
    const ulong row = team_row(g, g##_base);                                     \
    const bool valid = row < (rows);                                             \
    const ulong first = row * (h);                                               \
    __VA_ARGS__                                                                  \
  }

// ---- Parameter gradients from per-slot partials.

// A parameter gradient (dweight, dbias) = the column sums of `partial`'s slots (each slot h
// compensated sums, then their h compensations), in the parameter's format `wf`, rounded once.
// A column tile is `cols` columns (a power of two dividing L), the groups striding over the
// tiles; each column's L / cols lanes sum every (L / cols)-th slot with compensation, then a tree
// in local memory joins the lanes in a fixed order (deterministic, no atomics).
// `scratch` has two floats per work-item.
inline void partials_reduce(global const float* partial, global uchar* dw, uint slots, uint h, uint cols,
                            local float* scratch, int wf) {
  const uint lid = get_local_id(0);
  const uint size = (uint)get_local_size(0);
  const uint lanes = size / cols;
  const uint lane = lid / cols;
  const uint tiles = (h + cols - 1) / cols;
  local float* sums = scratch;
  local float* comps = scratch + size;
  for (uint tile = get_group_id(0); tile < tiles; tile += get_num_groups(0)) {
    const uint j = tile * cols + (lid & (cols - 1));
    float sum = 0.0f;
    float comp = 0.0f;
    if (j < h) {
      for (uint k = lane; k < slots; k += lanes) {
        add_term(&sum, &comp, partial[(ulong)k * 2 * h + j], partial[(ulong)k * 2 * h + h + j]);
      }
    }
    sums[lid] = sum;
    comps[lid] = comp;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = lanes >> 1; s > 0; s >>= 1) {
      if (lane < s) {
        float a = sums[lid];
        float c = comps[lid] + comps[lid + s * cols];
        compensated_add(&a, &c, sums[lid + s * cols]);
        sums[lid] = a;
        comps[lid] = c;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lane == 0 && j < h) {
      // add_odd keeps the pair's value for the one rounding to a 16-bit format.
      const float total = wf == FMT_F32 ? sums[lid] + comps[lid] : add_odd(sums[lid], comps[lid]);
      store_elem(dw, j, total, wf);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// A family's parameter-gradient reductions, one kernel per gradient format:
// <family>_dw_reduce_<f32|f16|bf16>(partial, dw, slots, h, cols, scratch) over partials_reduce.
#define DW_REDUCE_KERNEL(family, name, wf)                                                                    \
  kernel void family##_dw_reduce_##name(global const uchar* partial, ulong partial_off, global uchar* dw,      \
                                        ulong dw_off, uint slots, uint h, uint cols, local float* scratch) {  \
    partials_reduce((global const float*)(partial + partial_off), dw + dw_off, slots, h, cols, scratch, wf);    \
  }
#define DW_REDUCE_KERNELS(family)           \
  DW_REDUCE_KERNEL(family, f32, FMT_F32)    \
  DW_REDUCE_KERNEL(family, f16, FMT_F16)    \
  DW_REDUCE_KERNEL(family, bf16, FMT_BF16)

// ---- Eight elements at a time, for the CPU-shaped kernels (a work-item walking a contiguous
// run): the same bits as load_elem / store_elem per element, written with vector operations so
// that PoCL's compiler emits vector instructions inside the work-item. `count` < 8 loads zeros
// past the end and stores only the first `count` elements (a run's tail).

// Eight elements as one vector access of the element's own alignment (2 or 4 bytes): a typedef
// may lower a type's alignment (OpenCL C 6.11.1, as in GCC). vload8 / vstore8 mean the same, but
// PoCL's library writes vstore8 of ushort as eight 2-byte stores, a third of a bf16 forward's time.
typedef ushort8 ushort8_elems __attribute__((aligned(2)));
typedef float8 float8_elems __attribute__((aligned(4)));

OPREG_INLINE float8 load8(global const uchar* base, ulong i, uint count, int fmt) {
  if (count == 8) {
    if (fmt == FMT_F32) return *(global const float8_elems*)((global const float*)base + i);
    // f16 through vload_half8 / vstore_half8_rte (core OpenCL C, no half arithmetic), where eight
    // lanes of f16_to_float / float_to_f16 took about ten integer and float operations a vector
    // each way: rms_norm.fwd f16 4096x4096 49.5 -> 12.4 ms on PoCL. Both round to nearest even,
    // overflow to infinity and keep subnormals, as f16_to_float / float_to_f16 do (a NaN stays a
    // NaN; its payload is the device's).
    if (fmt == FMT_F16) return vload_half8(0, (global const half*)base + i);
    return as_float8(convert_uint8(*(global const ushort8_elems*)((global const ushort*)base + i)) << 16);
  }
  // Lane by lane, without a private array (SPIR-V wants every variable in the entry block, and
  // an inlined array lands in the loop).
  float8 v = 0.0f;
#define LOAD8_LANE(k, s) v.s = (k) < count ? load_elem(base, i + (k), fmt) : 0.0f;
  LOAD8_LANE(0, s0) LOAD8_LANE(1, s1) LOAD8_LANE(2, s2) LOAD8_LANE(3, s3)
  LOAD8_LANE(4, s4) LOAD8_LANE(5, s5) LOAD8_LANE(6, s6) LOAD8_LANE(7, s7)
#undef LOAD8_LANE
  return v;
}

OPREG_INLINE void store8(global uchar* base, ulong i, uint count, float8 v, int fmt) {
  if (count == 8) {
    if (fmt == FMT_F32) {
      *(global float8_elems*)((global float*)base + i) = v;
      return;
    }
    if (fmt == FMT_F16) {
      vstore_half8_rte(v, 0, (global half*)base + i);
      return;
    }
    const uint8 w = as_uint8(v);  // bf16
    const uint8 bits =
        select((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16, (w >> 16) | 0x40u, (w & 0x7FFFFFFFu) > 0x7F800000u);
    *(global ushort8_elems*)((global ushort*)base + i) = convert_ushort8(bits);
    return;
  }
#define STORE8_LANE(k, s) \
  if ((k) < count) store_elem(base, i + (k), v.s, fmt);
  STORE8_LANE(0, s0) STORE8_LANE(1, s1) STORE8_LANE(2, s2) STORE8_LANE(3, s3)
  STORE8_LANE(4, s4) STORE8_LANE(5, s5) STORE8_LANE(6, s6) STORE8_LANE(7, s7)
#undef STORE8_LANE
}

// round_to and add_odd on eight lanes (the same bits lane by lane).
OPREG_INLINE float8 round8(float8 v, int fmt) {
  if (fmt == FMT_F32) return v;
  const uint8 w = as_uint8(v);
  if (fmt == FMT_BF16) {
    const uint8 h = select((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16, (w >> 16) | 0x40u, (w & 0x7FFFFFFFu) > 0x7F800000u);
    return as_float8(h << 16);
  }
  // f16: through a private vector, as load8/store8 do through memory. The compiler keeps it in
  // registers (F16C's two conversions on PoCL's CPU device); the integer form it replaces took
  // about twenty-five operations a vector. Both gave the same bits for every one of the 2^32 f32
  // inputs on PoCL 3.1 (a NaN stays a NaN), compared by a throwaway OpenCL program.
  ushort8 bits;
  vstore_half8_rte(v, 0, (private half*)&bits);
  return vload_half8(0, (private const half*)&bits);
}

OPREG_INLINE float8 add_odd8(float8 a, float8 b) {
  const float8 s = a + b;
  const float8 bb = s - a;
  const float8 err = (a - (s - bb)) + (b - bb);
  const uint8 inexact = as_uint8(err < 0.0f || err > 0.0f) & 1u;
  const uint8 away = as_uint8((s > 0.0f && err < 0.0f) || (s < 0.0f && err > 0.0f)) & 1u;
  return as_float8((as_uint8(s) - away) | inexact);
}

inline float sum8(float8 v) {
  const float4 a = v.lo + v.hi;
  const float2 b = a.lo + a.hi;
  return b.lo + b.hi;
}

// ---- Compensated sums and exact products on eight lanes (compensated_add, add_term,
// two_product lane by lane, the same bits), for the CPU-shaped backward kernels.

OPREG_INLINE void compensated_add8(float8* sum, float8* comp, float8 v) {
  const float8 t = *sum + v;
  const float8 e = select((v - t) + *sum, (*sum - t) + v, isgreaterequal(fabs(*sum), fabs(v)));
  *comp = select(*comp, *comp + e, isfinite(t));
  *sum = t;
}

OPREG_INLINE void add_term8(float8* sum, float8* comp, float8 hi, float8 lo) {
  compensated_add8(sum, comp, hi);
  *comp = select(*comp, *comp + lo, isfinite(lo));
}

// A block's pair (hi, lo) into the compensated slot entries at [c] and [params + c]; lo only where
// hi is finite (non-finite hi decides the sum alone, as in add_term).
OPREG_INLINE void slot_fold8(global float* slot, uint params, uint c, uint count, float8 hi, float8 lo) {
  global uchar* s = (global uchar*)slot;
  float8 sum = load8(s, c, count, FMT_F32);
  float8 comp = load8(s, params + c, count, FMT_F32);
  add_term8(&sum, &comp, hi, select((float8)0.0f, lo, isfinite(hi)));
  store8(s, c, count, sum, FMT_F32);
  store8(s, params + c, count, comp, FMT_F32);
}

// a * b = product + *error exactly, by fma: OpenCL C's fma rounds once on every device (one
// instruction on CPUs with FMA3, as PoCL's CPU device compiles for, and on Intel GPUs), so this is
// two_product's error in three operations instead of Dekker's twenty, and exact also where
// Dekker's split is not (operands beyond 2^100). Non-finite products get no error term.
OPREG_INLINE float8 two_product8(float8 a, float8 b, float8* error) {
  const float8 product = a * b;
  const float8 e = fma(a, b, -product);
  *error = select((float8)0.0f, e, isfinite(e));
  return product;
}

// a * b rounded to odd (add_odd8 of two_product8's pair, the same bits): with a format of at most
// 11 significant bits for a and b, rounding it to f16 or bf16 gives the exact product's rounding.
OPREG_INLINE float8 mul_odd8(float8 a, float8 b) {
  const float8 p = a * b;
  const float8 e = fma(a, b, -p);
  const uint8 inexact = as_uint8(e < 0.0f || e > 0.0f) & 1u;
  // p was rounded away from zero when the error has the other sign.
  const uint8 away = as_uint8((p > 0.0f && e < 0.0f) || (p < 0.0f && e > 0.0f)) & 1u;
  return as_float8((as_uint8(p) - away) | inexact);
}

// A lane-wise compensated pair (sum, comp) joined into one (hi, *lo) pair, lanes 0 to 7 in order.
OPREG_INLINE float join8(float8 sum, float8 comp, float* lo) {
  float s = 0.0f;
  float c = 0.0f;
  compensated_add(&s, &c, sum.s0);
  compensated_add(&s, &c, sum.s1);
  compensated_add(&s, &c, sum.s2);
  compensated_add(&s, &c, sum.s3);
  compensated_add(&s, &c, sum.s4);
  compensated_add(&s, &c, sum.s5);
  compensated_add(&s, &c, sum.s6);
  compensated_add(&s, &c, sum.s7);
  const float rest = sum8(comp);
  *lo = isfinite(rest) ? c + rest : c;
  return s;
}

inline float fmax8(float8 v) {
  const float4 a = fmax(v.lo, v.hi);
  const float2 b = fmax(a.lo, a.hi);
  return fmax(b.lo, b.hi);
}

// Lanes 0 .. count - 1 set (all lanes for count >= 8): masks a run's tail.
inline int8 lanes_below(uint count) { return (int8)(0, 1, 2, 3, 4, 5, 6, 7) < (int8)(int)min(count, 8u); }
