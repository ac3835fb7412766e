/* The op manifest: every built-in op direction declared once. Plain preprocessor lists, so that
 * the C++ API (opreg/ops.h: the argument structs, op handles and entry points) and the C plugin
 * interface (opreg/plugin.h: the structs' C mirrors) are both expanded from here, and so is
 * everything inside the library that lists ops (src/ops/manifest.h: checks' tensor lists, the
 * byte model, the problem factory, the plugin conversions, the reference variants, the fuzzers'
 * ranges). docs/adding-an-op.md walks through adding one.
 *
 * OPREG_FAMILIES(F) lists the op families as F(name).
 * OPREG_ARG_STRUCTS(S) lists the argument structs as S(CxxName, c_name, family, FIELDS):
 * - family: the op family, what a backend implements (one folder per family in every backend;
 *   src/ops/families.h has their descriptors), one of OPREG_FAMILIES: rms_norm (x is rows x
 *   hidden, statistics per row, parameters of hidden), norm (the same with a mean, or, where the
 *   struct has num_groups, x is (N, C, spatial...) with statistics per (n, group) and parameters
 *   of C), glu (elementwise, every tensor one shape), rope (two activations of their own head
 *   counts rotated by per-position tables; its kernels read strides).
 * - FIELDS(T, S) lists the members in order (the C mirror keeps the order):
 *   T(name, role, kind, when, partner) a tensor:
 *     role    in | out
 *     kind    act (x's shape and dtype), param (weight-sized, the weight's dtype: the weight, the
 *             bias and their gradients), stat (f32 statistics: per row, or per (n, group)),
 *             act2 (a second activation: x's dtype, a shape of its own: rope's k), table
 *             (per-position rows: rope's cos and sin, the weight's dtype), index (int64
 *             positions: rope's position_ids)
 *     when    always | weight (present exactly when the weight is: weight, dweight) | bias
 *             (optional on its own: bias, dbias) | positions (optional on its own: position_ids)
 *     partner the input this output may be exactly (its in-place form), or none
 *   S(type, name, default, key) a scalar: type f64 | i64 | casting | rounding | rope_style | pad32
 *     (C-only padding); key: whether the choice of a variant may depend on it (key) or not (nokey).
 * OPREG_ARG_ALIASES(A) lists names that other ops give a shared struct, as
 *   A(CxxAlias, CxxName, c_alias, c_name).
 * OPREG_OPS(OP) lists the op directions, in the order docs and tools list them, as
 *   OP(ident, base, direction, CxxArgs, c_args): the op `base.direction` ("rms_norm.fwd"), its
 *   handle ident_op(), entry point ident(), reference reference::ident(), C struct c_args.
 *
 * Inputs come before outputs in every struct; statistics are f32; an absent optional tensor is an
 * undefined Tensor in C++ and NULL in C. Math, dtype pairs and in-place rules: docs/ops.md. */
#ifndef OPREG_OP_MANIFEST_H
#define OPREG_OP_MANIFEST_H

/* ---- rms_norm: y = x * rstd * (offset + w), rstd = 1 / sqrt(mean(x^2) + eps) per row. */
#define OPREG_FIELDS_RMS_NORM_FWD(T, S)                                                       \
  T(x, in, act, always, none)         /* (..., H) */                                          \
  T(weight, in, param, weight, none)  /* (H); optional: y = x * rstd (and offset must be 0) */ \
  T(y, out, act, always, none)        /* like x */                                            \
  T(rstd, out, stat, always, none)    /* f32 (rows) */                                        \
  S(f64, eps, 1e-6, nokey)                                                                    \
  S(f64, offset, 0.0, nokey)                                                                  \
  S(casting, casting, llama, key) /* where the result rounds to x's dtype (Casting) */         \
  S(pad32, reserved_int, 0, nokey)

#define OPREG_FIELDS_RMS_NORM_BWD(T, S)                                                 \
  T(dy, in, act, always, none)         /* like x */                                     \
  T(x, in, act, always, none)          /* (..., H) */                                   \
  T(weight, in, param, weight, none)   /* (H); optional */                              \
  T(rstd, in, stat, always, none)      /* f32 (rows), from the forward */               \
  T(dx, out, act, always, dy)          /* like x; may be dy itself (in place) */        \
  T(dweight, out, param, weight, none) /* like weight; undefined exactly when weight is */ \
  S(f64, offset, 0.0, nokey)                                                            \
  S(casting, casting, llama, key)                                                       \
  S(pad32, reserved_int, 0, nokey)

/* ---- fused_add_rms_norm: s = x + residual (rounded to x's dtype), y = rms_norm(s). */
#define OPREG_FIELDS_FUSED_ADD_RMS_NORM_FWD(T, S)                                        \
  T(x, in, act, always, none)        /* (..., H) */                                     \
  T(residual, in, act, always, none) /* like x */                                       \
  T(weight, in, param, weight, none) /* (H); optional: y = s * rstd (and offset must be 0) */ \
  T(y, out, act, always, none)       /* like x */                                       \
  T(s, out, act, always, none)       /* like x, the new residual */                     \
  T(rstd, out, stat, always, none)   /* f32 (rows) */                                   \
  S(f64, eps, 1e-6, nokey)                                                              \
  S(f64, offset, 0.0, nokey)                                                            \
  S(casting, casting, llama, key)                                                       \
  S(pad32, reserved_int, 0, nokey)

#define OPREG_FIELDS_FUSED_ADD_RMS_NORM_BWD(T, S)                                                    \
  T(dy, in, act, always, none)         /* like s */                                                  \
  T(ds_out, in, act, always, none)     /* like s: the gradient flowing into the new residual */     \
  T(s, in, act, always, none)          /* (..., H), from the forward */                              \
  T(weight, in, param, weight, none)   /* (H); optional */                                           \
  T(rstd, in, stat, always, none)      /* f32 (rows) */                                              \
  T(dx, out, act, always, dy)          /* like s; the gradient of x and of residual; may be dy */    \
  T(dweight, out, param, weight, none) /* like weight; undefined exactly when weight is */           \
  S(f64, offset, 0.0, nokey)                                                                         \
  S(casting, casting, llama, key)                                                                    \
  S(pad32, reserved_int, 0, nokey)

/* ---- layer_norm: y = (x - mean) * rstd * w + b. */
#define OPREG_FIELDS_LAYER_NORM_FWD(T, S)                                                         \
  T(x, in, act, always, none)        /* (..., H) */                                               \
  T(weight, in, param, weight, none) /* (H); optional (ones) */                                   \
  T(bias, in, param, bias, none)     /* (H), the weight's dtype (without one: x's or f32); optional */ \
  T(y, out, act, always, none)       /* like x */                                                 \
  T(mean, out, stat, always, none)   /* f32 (rows) */                                             \
  T(rstd, out, stat, always, none)   /* f32 (rows) */                                             \
  S(f64, eps, 1e-5, nokey)           /* torch.nn.LayerNorm's default */

#define OPREG_FIELDS_LAYER_NORM_BWD(T, S)                                                         \
  T(dy, in, act, always, none)         /* like x */                                               \
  T(x, in, act, always, none)          /* (..., H) */                                             \
  T(weight, in, param, weight, none)   /* (H); optional */                                        \
  T(mean, in, stat, always, none)      /* f32 (rows) */                                           \
  T(rstd, in, stat, always, none)      /* f32 (rows) */                                           \
  T(dx, out, act, always, dy)          /* like x; may be dy itself */                             \
  T(dweight, out, param, weight, none) /* like weight; undefined exactly when weight is */        \
  T(dbias, out, param, bias, none)     /* like weight (without one: x's dtype or f32); optional */

/* ---- group_norm: statistics per (n, group) over C / num_groups channels x spatial. */
#define OPREG_FIELDS_GROUP_NORM_FWD(T, S)                                                         \
  T(x, in, act, always, none)        /* (N, C, spatial...) */                                     \
  T(weight, in, param, weight, none) /* (C); optional (ones) */                                   \
  T(bias, in, param, bias, none)     /* (C), the weight's dtype (without one: x's or f32); optional */ \
  T(y, out, act, always, none)       /* like x */                                                 \
  T(mean, out, stat, always, none)   /* f32 (N, num_groups) */                                    \
  T(rstd, out, stat, always, none)   /* f32 (N, num_groups) */                                    \
  S(i64, num_groups, 1, key)                                                                      \
  S(f64, eps, 1e-5, nokey)           /* torch.nn.GroupNorm's default */

#define OPREG_FIELDS_GROUP_NORM_BWD(T, S)                                                         \
  T(dy, in, act, always, none)         /* like x */                                               \
  T(x, in, act, always, none)          /* (N, C, spatial...) */                                   \
  T(weight, in, param, weight, none)   /* (C); optional */                                        \
  T(mean, in, stat, always, none)      /* f32 (N, num_groups) */                                  \
  T(rstd, in, stat, always, none)      /* f32 (N, num_groups) */                                  \
  T(dx, out, act, always, dy)          /* like x; may be dy itself */                             \
  T(dweight, out, param, weight, none) /* like weight; undefined exactly when weight is */        \
  T(dbias, out, param, bias, none)     /* like weight (without one: x's dtype or f32); optional */ \
  S(i64, num_groups, 1, key)

/* ---- geglu: c = gelu_tanh(a) * b; swiglu: c = silu(a) * b (a, b, c one shape, one dtype).
 * rounding (Rounding): once, act(a) in f32 and each result rounded once; torch, act(a) rounded to
 * a's dtype before the multiply, as PyTorch eager and Liger-Kernel do (docs/ops.md). A key: a
 * plugin variant written before the scalar existed takes `once` only (include/opreg/plugin.h). */
#define OPREG_FIELDS_GLU_FWD(T, S)    \
  T(a, in, act, always, none)         \
  T(b, in, act, always, none)         \
  T(c, out, act, always, none)        \
  S(rounding, rounding, once, key)    \
  S(pad32, reserved_int, 0, nokey)

#define OPREG_FIELDS_GLU_BWD(T, S)                                           \
  T(dc, in, act, always, none)                                               \
  T(a, in, act, always, none)                                                \
  T(b, in, act, always, none)                                                \
  T(da, out, act, always, a) /* may be a itself (in place, as Liger does) */ \
  T(db, out, act, always, b) /* may be b itself */                           \
  S(rounding, rounding, once, key)                                           \
  S(pad32, reserved_int, 0, nokey)

/* ---- rope: rotary position embedding of q and k, each rotated independently by the angle of
 * each (b, t) position: a pair (x1, x2) becomes (x1 cos - x2 sin, x2 cos + x1 sin), in f32 with one
 * rounding. style (RopeStyle): half, pairs (i, i + D/2) (HF's rotate_half); interleaved, pairs
 * (2i, 2i + 1). Pair i's angle is the table row's entry i of a half-length row (D/2), and of a
 * full one (D) entry i under half (HF's cat(freqs, freqs): the first half) and 2i under
 * interleaved (the repeat_interleave layout). The backward is the same rotation with sin negated.
 * q, k and the outputs are read through their strides (HF's transposed views), D contiguous. */
#define OPREG_FIELDS_ROPE_FWD(T, S)                                                                \
  T(q, in, act, always, none)          /* [B, Hq, T, D], D even */                                 \
  T(k, in, act2, always, none)         /* [B, Hk, T, D], q's dtype */                              \
  T(cos, in, table, always, none)      /* [T', D or D/2] or [1 or B, T', D or D/2], T' >= T; with   \
                                          position_ids [max_pos, D or D/2]; q's dtype or f32 */    \
  T(sin, in, table, always, none)      /* like cos */                                              \
  T(position_ids, in, index, positions, none) /* int64 [1 or B, T]: the table row of (b, t); optional */ \
  T(q_out, out, act, always, q)        /* like q; may be q itself (in place) */                    \
  T(k_out, out, act2, always, k)       /* like k; may be k itself */                               \
  S(rope_style, style, half, key)                                                                  \
  S(pad32, reserved_int, 0, nokey)

#define OPREG_FIELDS_ROPE_BWD(T, S)                                                                \
  T(dq_out, in, act, always, none)     /* like q: the gradient of q_out */                         \
  T(dk_out, in, act2, always, none)    /* like k: the gradient of k_out */                         \
  T(cos, in, table, always, none)      /* the forward's */                                         \
  T(sin, in, table, always, none)                                                                  \
  T(position_ids, in, index, positions, none)                                                      \
  T(dq, out, act, always, dq_out)      /* like q; may be dq_out itself */                          \
  T(dk, out, act2, always, dk_out)     /* like k; may be dk_out itself */                          \
  S(rope_style, style, half, key)                                                                  \
  S(pad32, reserved_int, 0, nokey)

#define OPREG_FAMILIES(F) F(rms_norm) F(norm) F(glu) F(rope)

#define OPREG_ARG_STRUCTS(S)                                                                                      \
  S(RmsNormFwdArgs, opreg_rms_norm_fwd_args, rms_norm, OPREG_FIELDS_RMS_NORM_FWD)                                 \
  S(RmsNormBwdArgs, opreg_rms_norm_bwd_args, rms_norm, OPREG_FIELDS_RMS_NORM_BWD)                                 \
  S(FusedAddRmsNormFwdArgs, opreg_fused_add_rms_norm_fwd_args, rms_norm, OPREG_FIELDS_FUSED_ADD_RMS_NORM_FWD)     \
  S(FusedAddRmsNormBwdArgs, opreg_fused_add_rms_norm_bwd_args, rms_norm, OPREG_FIELDS_FUSED_ADD_RMS_NORM_BWD)     \
  S(LayerNormFwdArgs, opreg_layer_norm_fwd_args, norm, OPREG_FIELDS_LAYER_NORM_FWD)                               \
  S(LayerNormBwdArgs, opreg_layer_norm_bwd_args, norm, OPREG_FIELDS_LAYER_NORM_BWD)                               \
  S(GroupNormFwdArgs, opreg_group_norm_fwd_args, norm, OPREG_FIELDS_GROUP_NORM_FWD)                               \
  S(GroupNormBwdArgs, opreg_group_norm_bwd_args, norm, OPREG_FIELDS_GROUP_NORM_BWD)                               \
  S(GluFwdArgs, opreg_glu_fwd_args, glu, OPREG_FIELDS_GLU_FWD)                                                    \
  S(GluBwdArgs, opreg_glu_bwd_args, glu, OPREG_FIELDS_GLU_BWD)                                                    \
  S(RopeFwdArgs, opreg_rope_fwd_args, rope, OPREG_FIELDS_ROPE_FWD)                                                \
  S(RopeBwdArgs, opreg_rope_bwd_args, rope, OPREG_FIELDS_ROPE_BWD)

#define OPREG_ARG_ALIASES(A)                                                 \
  A(GegluFwdArgs, GluFwdArgs, opreg_geglu_fwd_args, opreg_glu_fwd_args)     \
  A(GegluBwdArgs, GluBwdArgs, opreg_geglu_bwd_args, opreg_glu_bwd_args)     \
  A(SwigluFwdArgs, GluFwdArgs, opreg_swiglu_fwd_args, opreg_glu_fwd_args)   \
  A(SwigluBwdArgs, GluBwdArgs, opreg_swiglu_bwd_args, opreg_glu_bwd_args)

#define OPREG_OPS(OP)                                                                                      \
  OP(rms_norm_fwd, rms_norm, fwd, RmsNormFwdArgs, opreg_rms_norm_fwd_args)                                 \
  OP(rms_norm_bwd, rms_norm, bwd, RmsNormBwdArgs, opreg_rms_norm_bwd_args)                                 \
  OP(fused_add_rms_norm_fwd, fused_add_rms_norm, fwd, FusedAddRmsNormFwdArgs, opreg_fused_add_rms_norm_fwd_args) \
  OP(fused_add_rms_norm_bwd, fused_add_rms_norm, bwd, FusedAddRmsNormBwdArgs, opreg_fused_add_rms_norm_bwd_args) \
  OP(layer_norm_fwd, layer_norm, fwd, LayerNormFwdArgs, opreg_layer_norm_fwd_args)                         \
  OP(layer_norm_bwd, layer_norm, bwd, LayerNormBwdArgs, opreg_layer_norm_bwd_args)                         \
  OP(group_norm_fwd, group_norm, fwd, GroupNormFwdArgs, opreg_group_norm_fwd_args)                         \
  OP(group_norm_bwd, group_norm, bwd, GroupNormBwdArgs, opreg_group_norm_bwd_args)                         \
  OP(geglu_fwd, geglu, fwd, GegluFwdArgs, opreg_geglu_fwd_args)                                            \
  OP(geglu_bwd, geglu, bwd, GegluBwdArgs, opreg_geglu_bwd_args)                                            \
  OP(swiglu_fwd, swiglu, fwd, SwigluFwdArgs, opreg_swiglu_fwd_args)                                        \
  OP(swiglu_bwd, swiglu, bwd, SwigluBwdArgs, opreg_swiglu_bwd_args)                                        \
  OP(rope_fwd, rope, fwd, RopeFwdArgs, opreg_rope_fwd_args)                                                \
  OP(rope_bwd, rope, bwd, RopeBwdArgs, opreg_rope_bwd_args)

#endif /* OPREG_OP_MANIFEST_H */
