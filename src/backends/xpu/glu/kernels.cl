// geglu and swiglu forward and backward (src/backends/xpu/glu/launch.cpp launches them;
// semantics: docs/ops.md, src/ops/reference).
//
// Element-wise and streaming: the work-items stride over the elements by the grid's size
// (neighbouring work-items take neighbouring elements: coalesced on a GPU, one vector lane each
// on PoCL's work-group vectoriser), no local memory, no barriers.
//
// The arithmetic is the cpu kernel's (src/backends/cpu/glu/kernels.inc): the activation in f32
// through the sigmoid, whose complement 1 - s comes from whichever side does not cancel
// (gelu_tanh(a) = a * sigmoid(2u), so 1 + tanh(u) is never formed), each output rounded once on
// store. Infinities and NaN land where the reference's double formulas put them.
//
// `torch` (rounding torch; the host passes 0 for f32): Liger-Kernel's roundings to the format as
// well, act(a) before it multiplies (c, geglu's db) and geglu's dc * b before it meets act'(a);
// swiglu's backward keeps Liger's f32 products. A branch every work-item takes the same way.

#define ACT_GELU 0
#define ACT_SILU 1

// sqrt(2 / pi) and the cubic coefficient of the tanh approximation.
#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

// One activation, written once for float and float8 (select() and the built-ins take both).
// sigmoid s = 1 / (1 + e^-x); its complement 1 - s comes from the side that does not cancel: for
// x >= 0, e = e^-x <= 1 and e * s is accurate; for x < 0, s < 1/2 and 1 - s is.
// gelu: value a s(2u), u = k (a + c a^3); slope = s + 2 a s (1 - s) k (1 + 3 c a^2), the tanh
// form's derivative in sigmoid terms. a^2 is capped in the polynomial only: where it would
// overflow, s (1 - s) is exactly 0 and an uncapped inf would make 0 * inf = NaN where the
// reference has none.
// silu: value a s(a); slope = s (1 + a (1 - s)).
#define GLU_ACTIVATION(name, T)                                                                  \
  inline T name(T a, int act, T* slope) {                                                        \
    const T x = act == ACT_GELU ? 2.0f * (GELU_K * (a + GELU_C * a * a * a)) : a;                \
    const T e = exp(-x);                                                                         \
    const T s = 1.0f / (1.0f + e);                                                               \
    const T one_minus = select(1.0f - s, e * s, x >= 0.0f);                                      \
    if (act == ACT_GELU) {                                                                       \
      const T a2 = select(a * a, (T)1e30f, a * a > 1e30f);                                       \
      *slope = s + 2.0f * a * s * one_minus * GELU_K * (1.0f + 3.0f * GELU_C * a2);              \
    } else {                                                                                     \
      *slope = s * (1.0f + a * one_minus);                                                       \
    }                                                                                            \
    return a * s;                                                                                \
  }

GLU_ACTIVATION(activation, float)
GLU_ACTIVATION(activation8, float8)

inline void glu_fwd(global const uchar* a, global const uchar* b, global uchar* c, ulong n, int act, int torch,
                    int fmt) {
  const ulong stride = get_global_size(0);
  for (ulong i = get_global_id(0); i < n; i += stride) {
    float slope;
    float value = activation(load_elem(a, i, fmt), act, &slope);
    if (torch) value = round_to(value, fmt);
    store_elem(c, i, value * load_elem(b, i, fmt), fmt);
  }
}

// da may be a and db may be b: an element's inputs are read before its outputs are written.
inline void glu_bwd(global const uchar* dc, global const uchar* a, global const uchar* b, global uchar* da,
                    global uchar* db, ulong n, int act, int torch, int fmt) {
  const int torch_bwd = torch && act == ACT_GELU;
  const ulong stride = get_global_size(0);
  for (ulong i = get_global_id(0); i < n; i += stride) {
    const float g = load_elem(dc, i, fmt);
    const float av = load_elem(a, i, fmt);
    const float bv = load_elem(b, i, fmt);
    float slope;
    const float value = activation(av, act, &slope);
    if (torch_bwd) {
      store_elem(da, i, round_to(g * bv, fmt) * slope, fmt);
      store_elem(db, i, g * round_to(value, fmt), fmt);
    } else {
      store_elem(da, i, g * bv * slope, fmt);
      store_elem(db, i, g * value, fmt);
    }
  }
}

// CPU-shaped: work-item id takes the contiguous run [id * chunk, (id + 1) * chunk) eight
// elements at a time (PoCL runs a work-item's loop as host code, which the strided loops above
// leave scalar). The same arithmetic and rounding points, lane by lane.
inline void glu_fwd_chunk(global const uchar* a, global const uchar* b, global uchar* c, ulong n, ulong chunk,
                          int act, int torch, int fmt) {
  const ulong first = get_global_id(0) * chunk;
  const ulong end = min(n, first + chunk);
  for (ulong i = first; i < end; i += 8) {
    const uint count = (uint)min((ulong)8, end - i);
    float8 slope;
    float8 value = activation8(load8(a, i, count, fmt), act, &slope);
    if (torch) value = round8(value, fmt);
    store8(c, i, count, value * load8(b, i, count, fmt), fmt);
  }
}

inline void glu_bwd_chunk(global const uchar* dc, global const uchar* a, global const uchar* b, global uchar* da,
                          global uchar* db, ulong n, ulong chunk, int act, int torch, int fmt) {
  const int torch_bwd = torch && act == ACT_GELU;
  const ulong first = get_global_id(0) * chunk;
  const ulong end = min(n, first + chunk);
  for (ulong i = first; i < end; i += 8) {
    const uint count = (uint)min((ulong)8, end - i);
    const float8 g = load8(dc, i, count, fmt);
    const float8 av = load8(a, i, count, fmt);
    const float8 bv = load8(b, i, count, fmt);
    float8 slope;
    const float8 value = activation8(av, act, &slope);
    if (torch_bwd) {
      store8(da, i, count, round8(g * bv, fmt) * slope, fmt);
      store8(db, i, count, g * round8(value, fmt), fmt);
    } else {
      store8(da, i, count, g * bv * slope, fmt);
      store8(db, i, count, g * value, fmt);
    }
  }
}

// ---- Kernels: one per format and shape (`_chunk`: CPU-shaped, contiguous runs); the activation
// and the rounding are arguments: branches every work-item takes the same way.

#define GLU_KERNELS(name, fmt, suffix, chunk_param, ...)                                              \
  kernel void glu_fwd_##name##suffix(global const uchar* a, ulong a_off, global const uchar* b,           \
                                     ulong b_off, global uchar* c, ulong c_off, ulong n chunk_param,     \
                                     int act, int torch) {                                              \
    glu_fwd##suffix(a + a_off, b + b_off, c + c_off, n, __VA_ARGS__ act, torch, fmt);            \
  }                                                                                                     \
  kernel void glu_bwd_##name##suffix(global const uchar* dc, ulong dc_off, global const uchar* a,         \
                                     ulong a_off, global const uchar* b, ulong b_off, global uchar* da,   \
                                     ulong da_off, global uchar* db, ulong db_off, ulong n chunk_param,  \
                                     int act, int torch) {                                              \
    glu_bwd##suffix(dc + dc_off, a + a_off, b + b_off, da + da_off, db + db_off, n, __VA_ARGS__ act, \
                    torch, fmt);                                                                        \
  }

#define GLU_STREAM(name, fmt) GLU_KERNELS(name, fmt, , , )
#define GLU_CHUNK(name, fmt) GLU_KERNELS(name, fmt, _chunk, GLU_COMMA ulong chunk, chunk GLU_COMMA)
#define GLU_COMMA ,

FOR_EACH_FORMAT(GLU_STREAM)
FOR_EACH_FORMAT(GLU_CHUNK)
