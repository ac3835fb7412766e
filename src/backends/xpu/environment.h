// What the xpu backend arranges in the process environment before its first OpenCL call, and
// why: the OpenCL runtimes read these variables once, when the ICD loader first loads them.
//
// - PoCL needs a writable kernel cache (POCL_CACHE_DIR, else $XDG_CACHE_HOME/pocl or
//   $HOME/.cache/pocl). Without one it lists no devices and says nothing, so when POCL_CACHE_DIR
//   is unset the backend points it at a private directory of its own, and when it is set but
//   unusable the backend says so in its availability reason.
// - Without a GPU render node (/dev/dri/renderD*) no Intel GPU can be used, and loading Intel's
//   GPU stack there is at best wasted work: its Level Zero driver crashes the process in zeInit
//   when no GPU is present. So, with no render node, the ICD loader is kept from Intel's GPU
//   OpenCL runtime (OCL_ICD_VENDORS points at a filtered copy of the vendor directory) and PoCL
//   from its Level Zero driver (POCL_DEVICES names its CPU driver), unless the user set those
//   variables. opreg itself never links or loads Level Zero.
#pragma once

#include <string>
#include <vector>

namespace opreg::xpu {

struct EnvironmentReport {
  bool render_node = false;        // a /dev/dri/renderD* node exists
  std::string pocl_cache_dir;      // POCL_CACHE_DIR as PoCL will see it (empty: PoCL's own default)
  std::string pocl_cache_problem;  // non-empty: why PoCL will list no devices
  std::vector<std::string> notes;  // what the backend changed, for the availability reason
};

// Sets the variables above where they are unset (setenv: call before any other thread reads the
// environment, as registry initialisation does). Never throws.
EnvironmentReport prepare_environment();

// The pieces, with their directories as arguments so tests can run them on fixtures.

// Whether `dri_dir` holds a renderD* node.
bool has_render_node(const std::string& dri_dir);

// A directory this process may write: `dir` itself when it exists (or can be made, parents
// included, mode 0700) and is writable; otherwise empty with the reason in `why`.
std::string usable_directory(const std::string& dir, std::string* why);

// The opreg private directory for run-time files: $XDG_CACHE_HOME/opreg, else $HOME/.cache/opreg,
// else $TMPDIR/opreg-<uid> (or /tmp/...), the first that is usable; empty when none is, with the
// places tried in `why`.
std::string private_directory(std::string* why);

// The ICD files in `vendors_dir` that load Intel's GPU OpenCL runtime (libigdrcl).
std::vector<std::string> intel_gpu_icds(const std::string& vendors_dir);

// Makes `filtered_dir` hold copies of the ICD files of `vendors_dir` except `excluded` (file
// names); false with the reason in `why` on failure.
bool write_filtered_vendors(const std::string& vendors_dir, const std::vector<std::string>& excluded,
                            const std::string& filtered_dir, std::string* why);

// A PoCL Level Zero driver library found in the usual library directories, or empty.
std::string pocl_level_zero_driver(const std::vector<std::string>& lib_dirs);

}  // namespace opreg::xpu
