// geglu and swiglu forward and backward (src/backends/xpu/glu/list.cpp launches them;
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

#define ACT_GELU 0
#define ACT_SILU 1

// sqrt(2 / pi) and the cubic coefficient of the tanh approximation.
#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

typedef struct {
  float s;          // sigmoid(x)
  float one_minus;  // 1 - sigmoid(x)
} Sigmoid;

// For x >= 0, e = e^-x <= 1 and e * s is accurate; for x < 0, s < 1/2 and 1 - s is.
inline Sigmoid sigmoid_of(float x) {
  const float e = exp(-x);
  Sigmoid r;
  r.s = 1.0f / (1.0f + e);
  r.one_minus = x >= 0.0f ? e * r.s : 1.0f - r.s;
  return r;
}

// act(a) and, with `slope`, d act / d a.
// gelu: slope = s + 2 a s (1 - s) k (1 + 3 c a^2), the tanh form's derivative in sigmoid terms.
// a^2 is capped in the polynomial only: where it would overflow, s (1 - s) is exactly 0 and an
// uncapped inf would make 0 * inf = NaN where the reference has none.
// silu: slope = s (1 + a (1 - s)).
inline float activation(float a, int act, float* slope) {
  if (act == ACT_GELU) {
    const float u = GELU_K * (a + GELU_C * a * a * a);
    const Sigmoid sg = sigmoid_of(2.0f * u);
    const float a2 = a * a > 1e30f ? 1e30f : a * a;
    *slope = sg.s + 2.0f * a * sg.s * sg.one_minus * GELU_K * (1.0f + 3.0f * GELU_C * a2);
    return a * sg.s;
  }
  const Sigmoid sg = sigmoid_of(a);
  *slope = sg.s * (1.0f + a * sg.one_minus);
  return a * sg.s;
}

inline void glu_fwd(global const uchar* a, global const uchar* b, global uchar* c, ulong n, int act, int fmt) {
  const ulong stride = get_global_size(0);
  for (ulong i = get_global_id(0); i < n; i += stride) {
    float slope;
    const float value = activation(load_elem(a, i, fmt), act, &slope);
    store_elem(c, i, value * load_elem(b, i, fmt), fmt);
  }
}

// da may be a and db may be b: an element's inputs are read before its outputs are written.
inline void glu_bwd(global const uchar* dc, global const uchar* a, global const uchar* b, global uchar* da,
                    global uchar* db, ulong n, int act, int fmt) {
  const ulong stride = get_global_size(0);
  for (ulong i = get_global_id(0); i < n; i += stride) {
    const float g = load_elem(dc, i, fmt);
    const float av = load_elem(a, i, fmt);
    const float bv = load_elem(b, i, fmt);
    float slope;
    const float value = activation(av, act, &slope);
    store_elem(da, i, g * bv * slope, fmt);
    store_elem(db, i, g * value, fmt);
  }
}

// ---- Kernels: one per format (the activation is an argument: a branch every work-item takes
// the same way).

#define GLU_KERNELS(name, fmt)                                                                              \
  kernel void glu_fwd_##name(global const uchar* a, ulong a_off, global const uchar* b, ulong b_off,         \
                             global uchar* c, ulong c_off, ulong n, int act) {                              \
    glu_fwd(a + a_off, b + b_off, c + c_off, n, act, fmt);                                                  \
  }                                                                                                         \
  kernel void glu_bwd_##name(global const uchar* dc, ulong dc_off, global const uchar* a, ulong a_off,       \
                             global const uchar* b, ulong b_off, global uchar* da, ulong da_off,            \
                             global uchar* db, ulong db_off, ulong n, int act) {                            \
    glu_bwd(dc + dc_off, a + a_off, b + b_off, da + da_off, db + db_off, n, act, fmt);                      \
  }

GLU_KERNELS(f32, FMT_F32)
GLU_KERNELS(f16, FMT_F16)
GLU_KERNELS(bf16, FMT_BF16)
