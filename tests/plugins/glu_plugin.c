/* A plugin kernel of geglu.fwd on the cpu backend (f32, in double), built twice
 * (tests/plugins/CMakeLists.txt): against the plugin header as released at 542ada0, whose
 * opreg_glu_fwd_args ends before `rounding` (API version 1), and against today's (version 2),
 * which reads it. opreg hands the old build the struct at its old size, and only rounding once:
 * a rounding torch problem is refused for it, with the reason, and never reaches this code.
 * Registered below the cpu's variants and the reference (priority -2000): it runs only when named. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "opreg/plugin.h"
#include "test_plugin.h"

static const char* refusal(const void* args) {
  const opreg_glu_fwd_args* a = args;
  /* The struct as this build's header has it: what opreg hands a plugin of that version. */
  if (a->struct_size != sizeof *a) return "unexpected argument struct";
  if (!is_f32(a->a) || !is_f32(a->b) || !is_f32(a->c)) return "the C kernel takes f32 tensors only";
  return NULL;
}

static int32_t glu_run(void* user, const void* args, const opreg_kernel_context* ctx, char* message, size_t size) {
  (void)user, (void)ctx;
  const opreg_glu_fwd_args* a = args;
  const char* why = refusal(a);
  if (why != NULL) return report(message, size, OPREG_UNSUPPORTED, why);
  int64_t n = 1;
  for (int d = 0; d < a->a->ndim; ++d) n *= a->a->shape[d];
  const float* x = at(a->a);
  const float* y = at(a->b);
  float* c = at(a->c);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    double gate = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
#ifdef OPREG_ROUNDING_TORCH /* API version 2 */
    if (a->rounding == OPREG_ROUNDING_TORCH) gate = (float)gate; /* rounded to a's dtype, f32 */
#endif
    c[i] = (float)(gate * y[i]);
  }
  return OPREG_OK;
}

OPREG_PLUGIN_EXPORT int32_t opreg_plugin_init(const opreg_host* host, char* message, size_t size) {
  return register_cpu_variant(host, "geglu.fwd", "cglu", supports_unless_refused, glu_run, message, size);
}
