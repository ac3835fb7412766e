#include "backends/xpu/environment.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

namespace opreg::xpu {
namespace {

namespace fs = std::filesystem;

// The variable's value, or empty when it is unset or blank (spaces and tabs only): a
// set-but-blank variable counts as unset (docs/env.md), for the runtimes too (set_unless_given).
std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return {};
  const std::string s(v);
  return s.find_first_not_of(" \t") == std::string::npos ? std::string() : s;
}

// Sets `name` to `value` unless the user gave it a value; a blank one is replaced (setenv with
// overwrite 0 would leave "" in place, and PoCL asserts on an empty POCL_CACHE_DIR).
void set_unless_given(const char* name, const std::string& value) {
  if (env_or_empty(name).empty()) ::setenv(name, value.c_str(), 1);
}

// A blank variable the backend does not replace is removed, so that the runtimes see it unset.
void unset_if_blank(const char* name) {
  if (std::getenv(name) != nullptr && env_or_empty(name).empty()) ::unsetenv(name);
}

// mkdir -p with mode 0700 for what it creates.
bool make_directories(const std::string& dir, std::string* why) {
  // Built by appending characters: g++ 12's -O3 flags assigning or concatenating C strings here
  // (-Wrestrict, a false positive).
  std::string path(!dir.empty() && dir.front() == '/' ? 1 : 0, '/');
  std::stringstream parts(dir);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    if (!path.empty() && path.back() != '/') path += '/';
    path += part;
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      *why = fmt::format("cannot create {}: {}", path, std::strerror(errno));
      return false;
    }
  }
  return true;
}

}  // namespace

bool has_render_node(const std::string& dri_dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dri_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind("renderD", 0) == 0) return true;
  }
  return false;
}

std::string usable_directory(const std::string& dir, std::string* why) {
  if (dir.empty()) {
    *why = "empty path";
    return {};
  }
  if (!make_directories(dir, why)) return {};
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *why = fmt::format("{} is not a directory", dir);
    return {};
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    *why = fmt::format("{} is not writable: {}", dir, std::strerror(errno));
    return {};
  }
  return dir;
}

std::string private_directory(std::string* why) {
  std::vector<std::string> candidates;
  std::string tried;
  // Under a base that exists: a missing $HOME is not ours to create.
  const auto under = [&](const char* variable, const std::string& leaf) {
    const std::string base = env_or_empty(variable);
    if (base.empty()) return;
    struct stat st {};
    if (::stat(base.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      candidates.push_back(base + leaf);
    } else {
      tried += fmt::format("{}{}={} does not exist", tried.empty() ? "" : "; ", variable, base);
    }
  };
  under("XDG_CACHE_HOME", "/opreg");
  under("HOME", "/.cache/opreg");
  std::string tmp = env_or_empty("TMPDIR");
  if (tmp.empty()) tmp = "/tmp";
  // Shared with other users: it must be ours and not a link someone planted.
  const std::string shared = fmt::format("{}/opreg-{}", tmp, ::getuid());
  candidates.push_back(shared);
  for (const auto& dir : candidates) {
    std::string reason;
    std::string found = usable_directory(dir, &reason);
    if (!found.empty() && dir == shared) {
      struct stat st {};
      if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) {
        found.clear();
        reason = fmt::format("{} is not a directory owned by this user", dir);
      }
    }
    if (!found.empty()) return found;
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", reason);
  }
  *why = tried;
  return {};
}

std::vector<std::string> intel_gpu_icds(const std::string& vendors_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(vendors_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".icd") continue;
    std::ifstream in(it->path());
    std::string library;
    std::getline(in, library);
    if (library.find("libigdrcl") != std::string::npos) out.push_back(it->path().filename().string());
  }
  return out;
}

bool write_filtered_vendors(const std::string& vendors_dir, const std::vector<std::string>& excluded,
                            const std::string& filtered_dir, std::string* why) {
  if (usable_directory(filtered_dir, why).empty()) return false;
  std::error_code ec;
  // Start from an empty directory: a vendor removed since the last run must not linger.
  for (fs::directory_iterator it(filtered_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".icd") fs::remove(it->path(), ec);
  }
  for (fs::directory_iterator it(vendors_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->path().extension() != ".icd") continue;
    bool skip = false;
    for (const auto& e : excluded) skip = skip || e == name;
    if (skip) continue;
    std::error_code copy_ec;
    fs::copy_file(it->path(), fs::path(filtered_dir) / name, fs::copy_options::overwrite_existing, copy_ec);
    if (copy_ec) {
      *why = fmt::format("cannot copy {} to {}: {}", it->path().string(), filtered_dir, copy_ec.message());
      return false;
    }
  }
  if (ec) {
    *why = fmt::format("cannot read {}: {}", vendors_dir, ec.message());
    return false;
  }
  return true;
}

std::string pocl_level_zero_driver(const std::vector<std::string>& lib_dirs) {
  for (const auto& dir : lib_dirs) {
    const std::string path = dir + "/pocl/libpocl-devices-level0.so";
    if (::access(path.c_str(), F_OK) == 0) return path;
  }
  return {};
}

EnvironmentReport prepare_environment() {
  EnvironmentReport report;
  report.render_node = has_render_node("/dev/dri");
  std::string private_why;
  const std::string private_dir = private_directory(&private_why);

  // PoCL's kernel cache.
  if (const std::string set = env_or_empty("POCL_CACHE_DIR"); !set.empty()) {
    std::string why;
    if (usable_directory(set, &why).empty()) {
      report.pocl_cache_problem = fmt::format("POCL_CACHE_DIR={} is unusable ({}); PoCL builds no kernels without a "
                                              "writable kernel cache: point POCL_CACHE_DIR at a writable directory",
                                              set, why);
    }
    report.pocl_cache_dir = set;
  } else if (!private_dir.empty()) {
    const std::string dir = private_dir + "/pocl";
    std::string why;
    if (!usable_directory(dir, &why).empty()) {
      set_unless_given("POCL_CACHE_DIR", dir);
      report.pocl_cache_dir = dir;
    } else {
      unset_if_blank("POCL_CACHE_DIR");
      report.pocl_cache_problem = fmt::format("no writable directory for PoCL's kernel cache ({}); PoCL lists no "
                                              "devices without one: set POCL_CACHE_DIR to a writable directory",
                                              why);
    }
  } else {
    unset_if_blank("POCL_CACHE_DIR");
    report.pocl_cache_problem = fmt::format("no writable directory for PoCL's kernel cache (tried {}); PoCL lists no "
                                            "devices without one: set POCL_CACHE_DIR to a writable directory",
                                            private_why);
  }

  if (report.render_node) {
    unset_if_blank("OCL_ICD_VENDORS");
    unset_if_blank("POCL_DEVICES");
    return report;
  }

  // No GPU render node: keep Intel's GPU stack out of the process.
  if (env_or_empty("OCL_ICD_VENDORS").empty()) {
    const std::string vendors = "/etc/OpenCL/vendors";
    if (const auto intel = intel_gpu_icds(vendors); !intel.empty()) {
      std::string why = private_why;
      const std::string filtered = private_dir.empty() ? std::string() : private_dir + "/icd-vendors";
      if (!filtered.empty() && write_filtered_vendors(vendors, intel, filtered, &why)) {
        set_unless_given("OCL_ICD_VENDORS", filtered);
        report.notes.push_back(fmt::format("Intel GPU OpenCL runtime ({}) not loaded: no /dev/dri/renderD* node",
                                           intel.front()));
      } else {
        report.notes.push_back(fmt::format("Intel GPU OpenCL runtime ({}) left to the ICD loader: {}", intel.front(),
                                           why));
      }
    }
  }
  if (env_or_empty("POCL_DEVICES").empty()) {
    const std::string driver = pocl_level_zero_driver(
        {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"});
    if (!driver.empty()) {
      set_unless_given("POCL_DEVICES", "pthread");
      report.notes.push_back("PoCL limited to its CPU driver (POCL_DEVICES=pthread): its Level Zero driver would "
                             "call zeInit with no /dev/dri/renderD* node");
    }
  }
  unset_if_blank("OCL_ICD_VENDORS");
  unset_if_blank("POCL_DEVICES");
  return report;
}

}  // namespace opreg::xpu
