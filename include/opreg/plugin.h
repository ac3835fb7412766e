/* opreg's plugin interface: a shared library that adds a backend and kernel variants to a running
 * opreg, written in C or C++ and built with any compiler. Plain C: no C++ types and no exceptions
 * cross it; tensors cross as DLPack's DLTensor (dlpack.h 0.6, Debian's libdlpack-dev).
 *
 * A plugin exports one function, found by name with dlsym:
 *
 *   OPREG_PLUGIN_EXPORT int32_t opreg_plugin_init(const opreg_host* host, char* message,
 *                                                 size_t message_size);
 *
 * opreg calls it once per registry that loads the plugin (OPREG_PLUGINS=/a.so:/b.so when the
 * process-wide registry is built, or opreg::load_plugin(path) later). The plugin registers what it
 * brings through host->register_backend and host->register_variant and returns OPREG_OK, or
 * another status with a message (NUL-terminated, truncated to message_size). If the entry fails,
 * or any registration it asked for was refused, opreg undoes every registration of that load and
 * reports the first error; nothing half-registered stays. A plugin is never unloaded.
 *
 * Rules of the interface:
 * - Every struct starts with its size and the API version it was written against
 *   (OPREG_PLUGIN_API_VERSION when built); opreg refuses a version outside
 *   [host->min_api_version, host->api_version] and a size that is not the size of that
 *   version's struct. Set fields you do not use to zero (memset), reserved slots included: a
 *   later version gives them meaning, and zero will mean "not used".
 * - Strings passed to opreg are copied before the call returns.
 * - Functions that can fail return an opreg status (OPREG_OK = 0) and write a one-line message
 *   into the buffer they are given. Statuses mirror opreg::ErrorKind.
 * - Device indices are 0 .. device_count - 1; streams are opaque pointers (NULL: the default).
 * - Kernels and memory services may be called from any thread, concurrently.
 */
#ifndef OPREG_PLUGIN_H
#define OPREG_PLUGIN_H

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#include "opreg/op_manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 3: rope.fwd and rope.bwd (opreg_rope_fwd_args, opreg_rope_bwd_args); no struct changed.
 * 2: opreg_glu_fwd_args and opreg_glu_bwd_args end with `rounding` (and a reserved int); see
 * OPREG_C_ARGS_GROWTH below. 1: as released at 542ada0. */
#define OPREG_PLUGIN_API_VERSION 3u
#define OPREG_PLUGIN_ENTRY "opreg_plugin_init"
#if defined(_WIN32)
#define OPREG_PLUGIN_EXPORT __declspec(dllexport)
#else
#define OPREG_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Statuses (opreg::ErrorKind). */
#define OPREG_OK 0
#define OPREG_INVALID_ARGUMENT 1 /* malformed input, a name taken, a bad struct */
#define OPREG_UNSUPPORTED 2      /* well-formed, but this cannot do it */
#define OPREG_DEVICE_ERROR 3     /* a device is missing, unavailable or failed */
#define OPREG_INTERNAL_ERROR 4   /* a bug */

/* Fallback policies (what opreg does when no variant of the backend accepts a call). */
#define OPREG_FALLBACK_ERROR 0
#define OPREG_FALLBACK_WARN 1
#define OPREG_FALLBACK_SILENT 2

/* rms_norm and fused_add_rms_norm casting modes (docs/ops.md). */
#define OPREG_CASTING_LLAMA 0
#define OPREG_CASTING_GEMMA 1
#define OPREG_CASTING_NONE 2

/* geglu and swiglu rounding modes (opreg_glu_*_args.rounding, since API version 2; docs/ops.md). */
#define OPREG_ROUNDING_ONCE 0
#define OPREG_ROUNDING_TORCH 1

/* rope pairings (opreg_rope_*_args.style, since API version 3; docs/ops.md). */
#define OPREG_ROPE_HALF 0
#define OPREG_ROPE_INTERLEAVED 1

/* A device's properties, as opreg::DeviceProps. */
typedef struct opreg_device_props {
  uint32_t struct_size; /* sizeof(opreg_device_props) */
  uint32_t api_version;
  const char* name; /* e.g. "Toy accelerator 0" */
  uint64_t memory_bytes;
  int32_t compute_units;
  int32_t emulated; /* 1: not real hardware; never inferred, shown as emulated */
  uint32_t extra_count; /* free-form key=value properties (ub_bytes, ...) */
  const char* const* extra_keys;
  const char* const* extra_values;
  /* reserved[OPREG_DEVICE_HOST_MEMORY] non-NULL (e.g. (void*)1): the device's memory is the
   * host's, so memory admission counts a problem's device copies with its host copies. NULL, as
   * every plugin built before zeroed it: unknown, counted apart. The other slots: zero. */
  void* reserved[8];
} opreg_device_props;
#define OPREG_DEVICE_HOST_MEMORY 0

/* A backend: name, inference priority, fallback policy, devices, memory services and streams.
 * `user` is passed back to every callback. Every memory service is required except
 * default_stream (NULL: the device has no streams) and memory_available. */
typedef struct opreg_backend_desc {
  uint32_t struct_size; /* sizeof(opreg_backend_desc) */
  uint32_t api_version;
  const char* name; /* [a-z][a-z0-9_]*, unique in the registry; device strings are name:index */
  int32_t inference_priority; /* higher is inferred first: cuda 400, npu 300, xpu 200, cpu 0 */
  int32_t fallback;           /* OPREG_FALLBACK_* */
  int32_t available;          /* 0: registered, but unavailable for `reason` */
  int32_t device_count;       /* when available */
  const char* reason;         /* how the devices were found, or why unavailable */
  const opreg_device_props* const* devices; /* device_count entries */
  int32_t dlpack_device_type; /* DLDeviceType of the backend's memory (kDLCPU for host memory) */
  int32_t reserved_int;
  void* user;

  int32_t (*allocate)(void* user, int32_t device, size_t bytes, void** out, char* message, size_t message_size);
  void (*deallocate)(void* user, int32_t device, void* ptr, size_t bytes);
  /* Copies are complete (the data is there) when they return. */
  int32_t (*copy_to_host)(void* user, int32_t device, void* dst, const void* src, size_t bytes, void* stream,
                          char* message, size_t message_size);
  int32_t (*copy_from_host)(void* user, int32_t device, void* dst, const void* src, size_t bytes, void* stream,
                            char* message, size_t message_size);
  int32_t (*copy_on_device)(void* user, int32_t device, void* dst, const void* src, size_t bytes, void* stream,
                            char* message, size_t message_size);
  /* Repeats `pattern` (pattern_bytes long, dividing bytes) over dst. */
  int32_t (*fill)(void* user, int32_t device, void* dst, size_t bytes, const void* pattern, size_t pattern_bytes,
                  void* stream, char* message, size_t message_size);
  int32_t (*synchronize)(void* user, int32_t device, void* stream, char* message, size_t message_size);
  void* (*default_stream)(void* user, int32_t device);
  /* May be NULL. Bytes that can be allocated on the device now (0: unknown), so that a request
   * larger than that is refused before it is made; memory_bytes bounds it either way. */
  uint64_t (*memory_available)(void* user, int32_t device);
  void* reserved[8];
} opreg_backend_desc;

/* What a kernel receives besides its arguments. */
typedef struct opreg_kernel_context {
  uint32_t struct_size;
  uint32_t api_version;
  int32_t device;  /* index on the variant's backend */
  int32_t threads; /* OPREG_NUM_THREADS for host kernels; 0: the machine's cores */
  void* stream;    /* the caller's stream, or the device's default */
  const opreg_device_props* props;
  const char* variant; /* the full variant name */
  void* host;          /* opreg's, for workspace() */
  /* Scratch memory from the backend's cached workspace, valid until the kernel returns (at most
   * 4 blocks a call); NULL if it cannot be had. */
  void* (*workspace)(const struct opreg_kernel_context* ctx, size_t bytes);
  void* reserved[8];
} opreg_kernel_context;

/* A kernel variant <backend>.<op>.<impl> for one of the ops of the manifest. `args` points to the op's
 * argument struct below (opreg_rms_norm_fwd_args for "rms_norm.fwd", ...); opreg has checked it
 * (shapes, dtypes, devices, overlap) and every tensor is contiguous unless `strided` is set. */
typedef struct opreg_variant_desc {
  uint32_t struct_size; /* sizeof(opreg_variant_desc) */
  uint32_t api_version;
  const char* backend; /* a registered backend (this plugin's, or another's) */
  const char* op;      /* "rms_norm.fwd", "layer_norm.bwd", ... */
  const char* impl;    /* [a-z][a-z0-9_]*; the variant is <backend>.<op>.<impl> */
  int32_t priority;    /* higher is tried first */
  int32_t strided;     /* 1: the kernel reads strides; 0: it is given contiguous tensors only */
  uint32_t tunable_count; /* shown by `opreg ops`, e.g. block=256 */
  const char* const* tunable_names;
  const char* const* tunable_values;
  void* user;
  /* May be NULL: the variant takes every problem the op's check accepts. Otherwise 1 to accept,
   * 0 to refuse with a one-line reason. Its answer may depend only on the device, the tensors'
   * presence, dtypes, contiguity and alignment, the first tensor's shape and the op's scalars
   * that the op manifest marks `key` (casting, num_groups; not eps or offset): opreg caches it
   * per problem. A refusal is final: forcing the variant past it (OPREG_FORCE_VARIANT) is an
   * error, and run is never called on a problem supports refused. run should still check what it
   * reads and fail with OPREG_UNSUPPORTED rather than misread data. */
  int32_t (*supports)(void* user, const void* args, const opreg_device_props* props, char* reason,
                      size_t reason_size);
  int32_t (*run)(void* user, const void* args, const opreg_kernel_context* ctx, char* message, size_t message_size);
  void* reserved[8];
} opreg_variant_desc;

/* What opreg hands the entry function. */
typedef struct opreg_host {
  uint32_t struct_size;
  uint32_t api_version;     /* the newest this opreg speaks */
  uint32_t min_api_version; /* the oldest it accepts */
  uint32_t reserved_int;
  const char* opreg_version; /* "0.1.0" */
  const char* plugin_path;   /* as given to opreg */
  void* host;                /* pass to the functions below */
  int32_t (*register_backend)(void* host, const opreg_backend_desc* desc, char* message, size_t message_size);
  int32_t (*register_variant)(void* host, const opreg_variant_desc* desc, char* message, size_t message_size);
  /* One line to opreg's log (stderr or the registry's sink), prefixed with the plugin's path. */
  void (*log)(void* host, const char* line);
  void* reserved[8];
} opreg_host;

typedef int32_t (*opreg_plugin_init_fn)(const opreg_host* host, char* message, size_t message_size);

/* ---- The ops' arguments: C mirrors of include/opreg/ops.h's structs, expanded from the op
 * manifest (opreg/op_manifest.h), member for member in the same order: every tensor as a
 * `const DLTensor*` (NULL for an absent optional one: a norm without weight or bias), f64 scalars
 * as double, i64 as int64_t, casting as int32_t (OPREG_CASTING_*), rounding as int32_t
 * (OPREG_ROUNDING_*), rope_style as int32_t (OPREG_ROPE_*), pad32 as an int32_t kept 0.
 * Every struct starts with its size and version. For example
 *
 *   typedef struct opreg_rms_norm_fwd_args {
 *     uint32_t struct_size;
 *     uint32_t api_version;
 *     const DLTensor* x;      (..., H)
 *     const DLTensor* weight; (H) or NULL: y = x * rstd, and offset is 0
 *     const DLTensor* y;      out: like x
 *     const DLTensor* rstd;   out: f32 (rows)
 *     double eps;
 *     double offset;
 *     int32_t casting;        OPREG_CASTING_*
 *     int32_t reserved_int;
 *   } opreg_rms_norm_fwd_args;
 *
 * and opreg_geglu_fwd_args, opreg_swiglu_fwd_args are names of opreg_glu_fwd_args (likewise bwd).
 * A variant's `op` names which struct its kernel receives ("rms_norm.fwd": the struct above).
 *
 * Members added to a struct after API version 1 come at its end, listed here as
 * G(c_name, first new member, version). A variant registered with an older api_version is handed
 * the struct as that version had it (struct_size up to the first new member, api_version its own)
 * and only problems the older struct can say: its supports() never sees, and its run is never
 * given, a problem whose new members are not their defaults (an old geglu plugin is asked for
 * rounding = OPREG_ROUNDING_ONCE only; opreg refuses the others for it, with that reason). */
#define OPREG_C_ARGS_GROWTH(G)       \
  G(opreg_glu_fwd_args, rounding, 2) \
  G(opreg_glu_bwd_args, rounding, 2)

#define OPREG_C_TENSOR_(name, role, kind, when, partner) const DLTensor* name;
#define OPREG_C_SCALAR_f64_(name) double name;
#define OPREG_C_SCALAR_i64_(name) int64_t name;
#define OPREG_C_SCALAR_casting_(name) int32_t name;
#define OPREG_C_SCALAR_rounding_(name) int32_t name;
#define OPREG_C_SCALAR_rope_style_(name) int32_t name;
#define OPREG_C_SCALAR_pad32_(name) int32_t name;
#define OPREG_C_SCALAR_(type, name, value, key) OPREG_C_SCALAR_##type##_(name)
#define OPREG_C_STRUCT_(Name, c_name, family, FIELDS) \
  typedef struct c_name {                             \
    uint32_t struct_size;                             \
    uint32_t api_version;                             \
    FIELDS(OPREG_C_TENSOR_, OPREG_C_SCALAR_)          \
  } c_name;
#define OPREG_C_ALIAS_(Alias, Name, c_alias, c_name) typedef c_name c_alias;
OPREG_ARG_STRUCTS(OPREG_C_STRUCT_)
OPREG_ARG_ALIASES(OPREG_C_ALIAS_)
#undef OPREG_C_TENSOR_
#undef OPREG_C_SCALAR_f64_
#undef OPREG_C_SCALAR_i64_
#undef OPREG_C_SCALAR_casting_
#undef OPREG_C_SCALAR_rounding_
#undef OPREG_C_SCALAR_rope_style_
#undef OPREG_C_SCALAR_pad32_
#undef OPREG_C_SCALAR_
#undef OPREG_C_STRUCT_
#undef OPREG_C_ALIAS_

#ifdef __cplusplus
}
#endif

#endif /* OPREG_PLUGIN_H */
