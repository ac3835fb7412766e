/* A plugin backend in C: the "ctoy" accelerator, whose memory is host memory it manages itself,
 * and its own rms_norm forward kernel. Built as a shared library (libopreg_toy_plugin.so) that
 * opreg loads at run time:
 *
 *   OPREG_PLUGINS=/path/libopreg_toy_plugin.so opreg devices
 *   OPREG_PLUGINS=/path/libopreg_toy_plugin.so opreg run rms_norm.fwd --device ctoy
 *
 * It needs nothing of opreg but include/opreg/plugin.h (and dlpack.h): no C++ and no link to
 * libopreg, so any C compiler builds it. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opreg/plugin.h"

enum { kDevices = 1 };
static const uint64_t kMemoryBytes = 1ull << 30; /* what each toy device pretends to have */

/* The backend's state: bytes in use per device, against kMemoryBytes. */
typedef struct toy_state {
  _Atomic uint64_t in_use[kDevices];
} toy_state;
static toy_state g_state;

static int32_t report(char* message, size_t size, int32_t status, const char* text) {
  if (message != NULL && size > 0) snprintf(message, size, "%s", text);
  return status;
}

/* ---- Memory services: 64-byte aligned host blocks, counted against the device's memory. */

static int32_t toy_allocate(void* user, int32_t device, size_t bytes, void** out, char* message, size_t size) {
  toy_state* s = user;
  const uint64_t before = atomic_fetch_add(&s->in_use[device], bytes);
  if (before + bytes > kMemoryBytes) {
    atomic_fetch_sub(&s->in_use[device], bytes);
    char text[160];
    snprintf(text, sizeof text, "out of memory: %zu bytes asked, %llu of %llu in use", bytes,
             (unsigned long long)before, (unsigned long long)kMemoryBytes);
    return report(message, size, OPREG_DEVICE_ERROR, text);
  }
  *out = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (*out == NULL) {
    atomic_fetch_sub(&s->in_use[device], bytes);
    return report(message, size, OPREG_DEVICE_ERROR, "host allocation failed");
  }
  return OPREG_OK;
}

static void toy_deallocate(void* user, int32_t device, void* ptr, size_t bytes) {
  toy_state* s = user;
  free(ptr);
  atomic_fetch_sub(&s->in_use[device], bytes);
}

static uint64_t toy_memory_available(void* user, int32_t device) {
  toy_state* s = user;
  const uint64_t in_use = atomic_load(&s->in_use[device]);
  return in_use < kMemoryBytes ? kMemoryBytes - in_use : 1; /* 1, not 0: 0 means "unknown" */
}

static int32_t toy_copy(void* user, int32_t device, void* dst, const void* src, size_t bytes, void* stream,
                        char* message, size_t size) {
  (void)user, (void)device, (void)stream, (void)message, (void)size;
  memmove(dst, src, bytes);
  return OPREG_OK;
}

static int32_t toy_fill(void* user, int32_t device, void* dst, size_t bytes, const void* pattern,
                        size_t pattern_bytes, void* stream, char* message, size_t size) {
  (void)user, (void)device, (void)stream, (void)message, (void)size;
  for (size_t at = 0; at < bytes; at += pattern_bytes) memcpy((char*)dst + at, pattern, pattern_bytes);
  return OPREG_OK;
}

static int32_t toy_synchronize(void* user, int32_t device, void* stream, char* message, size_t size) {
  (void)user, (void)device, (void)stream, (void)message, (void)size;
  return OPREG_OK; /* every call runs to completion on the calling thread */
}

/* ---- rms_norm.fwd in C: f32 activations and weight (supports() says so for anything else). */

static int is_f32(const DLTensor* t) { return t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1; }

/* What the kernel takes, or why not (NULL: it takes it). */
static const char* rms_fwd_refusal(const opreg_rms_norm_fwd_args* a) {
  if (!is_f32(a->x) || !is_f32(a->y)) return "the C kernel takes f32 activations only";
  if (a->weight != NULL && !is_f32(a->weight)) return "the C kernel takes an f32 weight only";
  return NULL;
}

static int32_t rms_fwd_supports(void* user, const void* args, const opreg_device_props* props, char* reason,
                                size_t size) {
  (void)user, (void)props;
  const char* refusal = rms_fwd_refusal(args);
  return refusal != NULL ? report(reason, size, 0, refusal) : 1;
}

static int32_t rms_fwd_run(void* user, const void* args, const opreg_kernel_context* ctx, char* message,
                           size_t size) {
  (void)user, (void)ctx;
  const opreg_rms_norm_fwd_args* a = args;
  if (a->struct_size != sizeof *a) return report(message, size, OPREG_INTERNAL_ERROR, "unexpected argument struct");
  /* opreg never runs a problem supports() refused, but a kernel is the last line: it checks what
   * it reads, as docs/adding-a-backend.md asks of plugin kernels. */
  const char* refusal = rms_fwd_refusal(a);
  if (refusal != NULL) return report(message, size, OPREG_UNSUPPORTED, refusal);
  /* rows x hidden: hidden is the last extent, rows the product of the others. */
  int64_t hidden = a->x->ndim > 0 ? a->x->shape[a->x->ndim - 1] : 1;
  int64_t rows = 1;
  for (int d = 0; d + 1 < a->x->ndim; ++d) rows *= a->x->shape[d];
  const float* x = a->x->data;
  const float* w = a->weight != NULL ? a->weight->data : NULL;
  float* y = a->y->data;
  float* rstd_out = a->rstd->data;
  if (hidden == 0) { /* empty rows: rstd = 1 / sqrt(eps), and x and y may have no memory at all */
    for (int64_t r = 0; r < rows; ++r) rstd_out[r] = (float)(1.0 / sqrt(a->eps));
    return OPREG_OK;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    float* yr = y + r * hidden;
    double squares = 0.0;
    for (int64_t i = 0; i < hidden; ++i) squares += (double)xr[i] * xr[i];
    const double rstd = 1.0 / sqrt((hidden > 0 ? squares / (double)hidden : 0.0) + a->eps);
    for (int64_t i = 0; i < hidden; ++i) {
      /* llama and none round x * rstd to x's dtype (f32 here), gemma keeps it; (offset + w) in
       * f32 is already the weight's dtype, so none equals llama. */
      const double xhat = a->casting == OPREG_CASTING_GEMMA ? xr[i] * rstd : (double)(float)(xr[i] * rstd);
      const double scale = w != NULL ? a->offset + w[i] : 1.0;
      yr[i] = (float)(xhat * scale);
    }
    rstd_out[r] = (float)rstd;
  }
  return OPREG_OK;
}

/* ---- Registration. */

OPREG_PLUGIN_EXPORT int32_t opreg_plugin_init(const opreg_host* host, char* message, size_t size) {
  if (host->api_version < OPREG_PLUGIN_API_VERSION) {
    return report(message, size, OPREG_UNSUPPORTED, "this plugin needs plugin API version 1 or newer");
  }
  static const char* const keys[] = {"lanes", "kind"};
  static const char* const values[] = {"8", "host-memory toy"};
  static const opreg_device_props device = {
      .struct_size = sizeof(opreg_device_props),
      .api_version = OPREG_PLUGIN_API_VERSION,
      .name = "C toy accelerator (host memory)",
      .memory_bytes = 1ull << 30,
      .compute_units = 4,
      .emulated = 1, /* not hardware: shown as emulated, used only when named */
      .extra_count = 2,
      .extra_keys = keys,
      .extra_values = values,
#ifdef OPREG_DEVICE_HOST_MEMORY /* (older plugin headers have no name for the slot) */
      .reserved = {[OPREG_DEVICE_HOST_MEMORY] = (void*)1}, /* its memory is the host's */
#endif
  };
  static const opreg_device_props* const devices[kDevices] = {&device};

  opreg_backend_desc backend;
  memset(&backend, 0, sizeof backend);
  backend.struct_size = sizeof backend;
  backend.api_version = OPREG_PLUGIN_API_VERSION;
  backend.name = "ctoy";
  backend.inference_priority = 100;
  backend.fallback = OPREG_FALLBACK_WARN;
  backend.available = 1;
  backend.device_count = kDevices;
  backend.reason = "the C toy accelerator of examples/plugin_backend";
  backend.devices = devices;
  backend.dlpack_device_type = kDLExtDev;
  backend.user = &g_state;
  backend.allocate = toy_allocate;
  backend.deallocate = toy_deallocate;
  backend.copy_to_host = toy_copy;
  backend.copy_from_host = toy_copy;
  backend.copy_on_device = toy_copy;
  backend.fill = toy_fill;
  backend.synchronize = toy_synchronize;
  backend.memory_available = toy_memory_available;
  int32_t status = host->register_backend(host->host, &backend, message, size);
  if (status != OPREG_OK) return status;

  static const char* const tunable_names[] = {"accumulate"};
  static const char* const tunable_values[] = {"f64"};
  opreg_variant_desc variant;
  memset(&variant, 0, sizeof variant);
  variant.struct_size = sizeof variant;
  variant.api_version = OPREG_PLUGIN_API_VERSION;
  variant.backend = "ctoy";
  variant.op = "rms_norm.fwd";
  variant.impl = "c";
  variant.priority = 10;
  variant.tunable_count = 1;
  variant.tunable_names = tunable_names;
  variant.tunable_values = tunable_values;
  variant.supports = rms_fwd_supports;
  variant.run = rms_fwd_run;
  return host->register_variant(host->host, &variant, message, size);
}
