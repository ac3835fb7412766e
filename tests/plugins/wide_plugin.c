/* A plugin kernel of the op with the most tensors, group_norm.bwd (eight: dy, x, weight, mean,
 * rstd, dx, dweight, dbias), on the cpu backend: every tensor crosses the C ABI as a DLTensor, so
 * the plugin layer's views must hold them all (tests/plugins/wide_plugin_test.cpp runs it through
 * the conformance harness). f32 only, accumulated in double; registered below the cpu's own
 * variants and the reference (priority -2000), so it runs only when named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opreg/plugin.h"
#include "test_plugin.h"

static const char* refusal(const void* args) {
  const opreg_group_norm_bwd_args* a = args;
  if (a->struct_size != sizeof *a) return "unexpected argument struct";
  const DLTensor* all[] = {a->dy, a->x, a->weight, a->mean, a->rstd, a->dx, a->dweight, a->dbias};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    if (!is_f32(all[i])) return "the C kernel takes f32 tensors only";
  }
  return NULL;
}

static int32_t wide_run(void* user, const void* args, const opreg_kernel_context* ctx, char* message, size_t size) {
  (void)user, (void)ctx;
  const opreg_group_norm_bwd_args* a = args;
  const char* why = refusal(a);
  if (why != NULL) return report(message, size, OPREG_UNSUPPORTED, why);
  /* (N, C, spatial...): sets of C / G channels x S positions, one per (n, group). */
  const int64_t n = a->x->shape[0];
  const int64_t c = a->x->shape[1];
  int64_t s = 1;
  for (int d = 2; d < a->x->ndim; ++d) s *= a->x->shape[d];
  const int64_t groups = a->num_groups;
  const int64_t per = c / groups;
  const float* dy = at(a->dy);
  const float* x = at(a->x);
  const float* w = at(a->weight);
  const float* mean = at(a->mean);
  const float* rstd = at(a->rstd);
  float* dx = at(a->dx);
  float* dw = at(a->dweight);
  float* db = at(a->dbias);
  /* dweight (dy * xhat) and dbias (dy) per channel, in double. */
  double* sums = calloc(2 * (size_t)c + 1, sizeof(double));
  if (sums == NULL) return report(message, size, OPREG_DEVICE_ERROR, "out of host memory");
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t set = i * groups + g;
      const double m = mean[set];
      const double r = rstd[set];
      const int64_t base = (i * c + g * per) * s;
      /* The set's two sums, read before dx (which may be dy) is written. */
      double sum_wdy = 0.0;
      double sum_wdy_xhat = 0.0;
      for (int64_t ch = 0; ch < per; ++ch) {
        const double wc = w != NULL ? w[g * per + ch] : 1.0;
        for (int64_t p = 0; p < s; ++p) {
          const int64_t e = base + ch * s + p;
          const double xhat = (x[e] - m) * r;
          sum_wdy += wc * dy[e];
          sum_wdy_xhat += wc * dy[e] * xhat;
          sums[2 * (g * per + ch)] += dy[e] * xhat;
          sums[2 * (g * per + ch) + 1] += dy[e];
        }
      }
      const double count = (double)(per * s);
      for (int64_t ch = 0; ch < per; ++ch) {
        const double wc = w != NULL ? w[g * per + ch] : 1.0;
        for (int64_t p = 0; p < s; ++p) {
          const int64_t e = base + ch * s + p;
          const double xhat = (x[e] - m) * r;
          dx[e] = (float)(r * (wc * dy[e] - sum_wdy / count - xhat * sum_wdy_xhat / count));
        }
      }
    }
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    if (dw != NULL) dw[ch] = (float)sums[2 * ch];
    if (db != NULL) db[ch] = (float)sums[2 * ch + 1];
  }
  free(sums);
  return OPREG_OK;
}

OPREG_PLUGIN_EXPORT int32_t opreg_plugin_init(const opreg_host* host, char* message, size_t size) {
  return register_cpu_variant(host, "group_norm.bwd", "cwide", supports_unless_refused, wide_run, message, size);
}
