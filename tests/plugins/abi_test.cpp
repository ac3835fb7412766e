// The C plugin interface kept binary compatible: every struct of opreg/plugin.h has the size and
// member offsets of the interface as released at 542ada0 (abi_542ada0/opreg/plugin.h, a copy of
// that header), now that the op argument structs are expanded from the op manifest; a struct that
// grew since (OPREG_C_ARGS_GROWTH: the glu structs' rounding, API version 2) keeps the released
// members where they were and starts its new ones where the released struct ended. Checked at
// compile time; the example plugin built from that header also loads and runs, and a geglu
// plugin built from it runs rounding once and is refused rounding torch
// (tests/plugins/CMakeLists.txt: plugins.abi_542ada0.*, plugins.glu_542ada0.*). Structs added
// since (rope's, API version 3) are checked for the layout they were added with.
#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

#include "opreg/plugin.h"

// Today's version, before the released header defines its own.
constexpr unsigned kApiVersionNow = OPREG_PLUGIN_API_VERSION;
#undef OPREG_PLUGIN_API_VERSION
#undef OPREG_PLUGIN_H
namespace released {
#include "abi_542ada0/opreg/plugin.h"
}  // namespace released

namespace {

#define OPREG_SAME_MEMBER_(Struct, member)                                                  \
  static_assert(offsetof(::Struct, member) == offsetof(released::Struct, member), #Struct); \
  static_assert(sizeof(::Struct::member) == sizeof(released::Struct::member), #Struct);

// The glu structs as released: the manifest's tensors (their scalars came in API version 2).
#define OPREG_ABI_NO_SCALARS_(...)
#define OPREG_RELEASED_GLU_FWD_(T, S) OPREG_FIELDS_GLU_FWD(T, OPREG_ABI_NO_SCALARS_)
#define OPREG_RELEASED_GLU_BWD_(T, S) OPREG_FIELDS_GLU_BWD(T, OPREG_ABI_NO_SCALARS_)

// The op argument structs released at 542ada0, member by member as the manifest lists them now
// (an op added since has no released layout to keep).
#define OPREG_RELEASED_STRUCTS_(S)                                              \
  S(opreg_rms_norm_fwd_args, OPREG_FIELDS_RMS_NORM_FWD)                         \
  S(opreg_rms_norm_bwd_args, OPREG_FIELDS_RMS_NORM_BWD)                         \
  S(opreg_fused_add_rms_norm_fwd_args, OPREG_FIELDS_FUSED_ADD_RMS_NORM_FWD)     \
  S(opreg_fused_add_rms_norm_bwd_args, OPREG_FIELDS_FUSED_ADD_RMS_NORM_BWD)     \
  S(opreg_layer_norm_fwd_args, OPREG_FIELDS_LAYER_NORM_FWD)                     \
  S(opreg_layer_norm_bwd_args, OPREG_FIELDS_LAYER_NORM_BWD)                     \
  S(opreg_group_norm_fwd_args, OPREG_FIELDS_GROUP_NORM_FWD)                     \
  S(opreg_group_norm_bwd_args, OPREG_FIELDS_GROUP_NORM_BWD)                     \
  S(opreg_glu_fwd_args, OPREG_RELEASED_GLU_FWD_)                               \
  S(opreg_glu_bwd_args, OPREG_RELEASED_GLU_BWD_)

// The size a struct had at API version 1: up to its first member added since, if it grew.
template <class Now>
constexpr std::size_t version1_size() {
  return sizeof(Now);
}
#define OPREG_ABI_GROWN_(c_name, member, version)                     \
  template <>                                                         \
  constexpr std::size_t version1_size<::c_name>() {                   \
    static_assert(version == 2, "a struct that grew at version 2");   \
    return offsetof(::c_name, member);                                \
  }
OPREG_C_ARGS_GROWTH(OPREG_ABI_GROWN_)

// Each struct's size and header, then each member (a helper per struct, so that a member macro
// knows its struct).
#define OPREG_ABI_STRUCT_(c_name, FIELDS)                                              \
  static_assert(version1_size<::c_name>() == sizeof(released::c_name), #c_name);      \
  OPREG_SAME_MEMBER_(c_name, struct_size)                                             \
  OPREG_SAME_MEMBER_(c_name, api_version)                                             \
  struct c_name##_members {                                                           \
    using Now = ::c_name;                                                             \
    using Then = released::c_name;                                                    \
    FIELDS(OPREG_ABI_TENSOR_, OPREG_ABI_SCALAR_)                                      \
  };
#define OPREG_ABI_MEMBER_(member)                                                        \
  static_assert(offsetof(Now, member) == offsetof(Then, member), "offset of " #member); \
  static_assert(sizeof(Now::member) == sizeof(Then::member), "size of " #member);
#define OPREG_ABI_TENSOR_(name, role, kind, when, partner) OPREG_ABI_MEMBER_(name)
#define OPREG_ABI_SCALAR_(type, name, value, key) OPREG_ABI_MEMBER_(name)
OPREG_RELEASED_STRUCTS_(OPREG_ABI_STRUCT_)

// The aliases name the same structs.
static_assert(std::is_same_v<::opreg_geglu_fwd_args, ::opreg_glu_fwd_args>);
static_assert(std::is_same_v<::opreg_swiglu_bwd_args, ::opreg_glu_bwd_args>);
static_assert(sizeof(released::opreg_geglu_fwd_args) == sizeof(released::opreg_glu_fwd_args));

// The interface's own structs are unchanged.
static_assert(sizeof(::opreg_device_props) == sizeof(released::opreg_device_props));
static_assert(sizeof(::opreg_backend_desc) == sizeof(released::opreg_backend_desc));
static_assert(sizeof(::opreg_kernel_context) == sizeof(released::opreg_kernel_context));
static_assert(sizeof(::opreg_variant_desc) == sizeof(released::opreg_variant_desc));
static_assert(sizeof(::opreg_host) == sizeof(released::opreg_host));
// Version 2 added the glu structs' rounding (and a reserved int after it, so they stay a multiple
// of 8 bytes); the growth list names both structs.
static_assert(kApiVersionNow == 3u);
static_assert(OPREG_PLUGIN_API_VERSION == 1u);  // the released header's
static_assert(sizeof(::opreg_glu_fwd_args) == sizeof(released::opreg_glu_fwd_args) + 8);
static_assert(sizeof(::opreg_glu_bwd_args) == sizeof(released::opreg_glu_bwd_args) + 8);
static_assert(version1_size<::opreg_glu_fwd_args>() < sizeof(::opreg_glu_fwd_args));
static_assert(version1_size<::opreg_glu_bwd_args>() < sizeof(::opreg_glu_bwd_args));

// Version 3 added rope's structs (no struct changed): the header, seven tensors in manifest
// order, the style and a reserved int, a multiple of 8 bytes with no padding between.
#define OPREG_ABI_ROPE_(c_name, q, k, q_out, k_out)                         \
  static_assert(offsetof(::c_name, q) == 8 && offsetof(::c_name, k) == 16); \
  static_assert(offsetof(::c_name, cos) == 24 && offsetof(::c_name, sin) == 32); \
  static_assert(offsetof(::c_name, position_ids) == 40);                     \
  static_assert(offsetof(::c_name, q_out) == 48 && offsetof(::c_name, k_out) == 56); \
  static_assert(offsetof(::c_name, style) == 64 && sizeof(::c_name::style) == 4); \
  static_assert(sizeof(::c_name) == 72);
OPREG_ABI_ROPE_(opreg_rope_fwd_args, q, k, q_out, k_out)
OPREG_ABI_ROPE_(opreg_rope_bwd_args, dq_out, dk_out, dq, dk)
static_assert(OPREG_ROPE_HALF == 0 && OPREG_ROPE_INTERLEAVED == 1);

TEST(PluginAbi, StructsKeepThe542ada0Layout) { SUCCEED() << "checked at compile time"; }
TEST(PluginAbi, GrownStructsStartTheirNewMembersWhereTheReleasedOnesEnded) {
  SUCCEED() << "checked at compile time (version1_size)";
}

}  // namespace
