// Detection under the environments a user's machine may have, each in a child process (the
// ICD loader and PoCL read their variables once per process): no OpenCL platform, only a CPU
// device, POCL_CACHE_DIR unset or unusable; that the first call after the context is made
// compiles nothing; that Level Zero is never loaded. And the environment helpers on fixtures.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "backends/xpu/environment.h"
#include "xpu_test_support.h"

namespace opreg::xpu {
namespace {

namespace fs = std::filesystem;
using xpu_test::run;
using xpu_test::temp_dir;

// The CLI with the OPREG_* variables cleared and `env` (VAR=value ...) added.
std::string cli(const std::string& env, const std::string& args) {
  return "env -u OPREG_DEVICE -u OPREG_BACKEND_ORDER -u OPREG_DISABLE -u OPREG_FORCE_VARIANT " + env + " " +
         OPREG_TEST_CLI + " " + args;
}

bool has(const std::string& text, const std::string& pattern) { return std::regex_search(text, std::regex(pattern)); }

// The CLI's output for `args` under `env` (as cli()), which must exit 0.
std::string output(const std::string& env, const std::string& args) {
  const auto out = run(cli(env, args));
  EXPECT_EQ(out.status, 0) << "opreg " << args << ":\n" << out.text;
  return out.text;
}

TEST(XpuDetection, NoOpenClPlatformMakesXpuUnavailableWithTheReason) {
  const std::string empty = temp_dir("novendors");
  const std::string out = output("OCL_ICD_VENDORS=" + empty, "devices");
  EXPECT_TRUE(has(out, "xpu +[0-9]+ +200 +warn +unavailable: no OpenCL platform: the ICD loader found no vendor "
                       "library \\(OCL_ICD_VENDORS=" + empty))
      << out;
  const auto named = run(cli("OCL_ICD_VENDORS=" + empty + " OPREG_DEVICE=xpu", "devices"));
  EXPECT_EQ(named.status, 3) << named.text;
  EXPECT_TRUE(has(named.text, "device xpu:0 is unavailable: no OpenCL platform")) << named.text;
  fs::remove_all(empty);
}

TEST(XpuDetection, OnlyACpuDeviceIsListedEmulatedAndSkippedByInference) {
  const std::string out = output("", "devices");
  EXPECT_TRUE(has(out, "xpu +[0-9]+ +200 +warn +available: no Intel GPU; 1 OpenCL CPU device listed as emulated"))
      << out;
  EXPECT_TRUE(has(out, "\n  xpu:0 +.* \\(emulated, OpenCL CPU device\\) \\[emulated\\];")) << out;
  EXPECT_TRUE(has(out, "skipped.*xpu \\(emulated: used only when named")) << out;
  const std::string named = output("OPREG_DEVICE=xpu", "run rms_norm.bwd --shape 127x4099 --dtype bf16");
  EXPECT_TRUE(has(named, "^result op=rms_norm.bwd device=xpu:0 emulated=1 variant=xpu\\.rms_norm\\.bwd\\.rows "
                         "dtype=bf16 .* status=pass"))
      << named;
}

TEST(XpuDetection, UnsetPoclCacheDirGetsAPrivateOne) {
  const std::string home = temp_dir("home");
  const std::string out = output("-u POCL_CACHE_DIR -u XDG_CACHE_HOME HOME=" + home, "devices");
  EXPECT_TRUE(has(out, "xpu:0 .* pocl_cache_dir=" + home + "/.cache/opreg/pocl")) << out;
  EXPECT_TRUE(fs::is_directory(home + "/.cache/opreg/pocl"));
  fs::remove_all(home);
}

TEST(XpuDetection, UnusablePoclCacheDirIsTheReasonGiven) {
  // Under a regular file: not creatable even for root.
  const std::string out = output("POCL_CACHE_DIR=/dev/null/cache", "devices");
  EXPECT_TRUE(has(out, "xpu .* unavailable: no usable OpenCL device; OpenCL platform 'Portable Computing "
                       "Language' lists no devices: POCL_CACHE_DIR=/dev/null/cache is unusable"))
      << out;
  EXPECT_TRUE(has(out, "point POCL_CACHE_DIR at a writable directory")) << out;
}

// Issue 18: a set-but-blank POCL_CACHE_DIR counts as unset, for PoCL too (it asserted on "" and
// took every command down, cpu runs included).
TEST(XpuDetection, BlankPoclCacheDirCountsAsUnset) {
  // Unset, the cache is $HOME/.cache/opreg/pocl: here a home whose cache is the tests' shared one,
  // so that the xpu runs compile nothing (every kernel: a minute and a half, twice under ASan).
  const std::string home = temp_dir("blankhome");
  fs::create_directories(OPREG_TEST_POCL_CACHE);
  fs::create_directories(home + "/.cache/opreg");
  fs::create_directory_symlink(OPREG_TEST_POCL_CACHE, home + "/.cache/opreg/pocl");
  // (A tab inside single quotes reaches the variable as it is, whichever shell runs the line.)
  for (const std::string value : {"", " ", "\t \t"}) {
    SCOPED_TRACE("POCL_CACHE_DIR='" + value + "'");
    const std::string env = "-u XDG_CACHE_HOME HOME=" + home + " POCL_CACHE_DIR='" + value + "'";
    const std::string out = output(env, "devices");
    EXPECT_TRUE(has(out, "xpu:0 .* pocl_cache_dir=/")) << out;
    output(env, "run rms_norm.fwd --device cpu --shape 3x5 --repeat 1");
    output(env, "run rms_norm.fwd --device xpu --shape 3x5 --repeat 1");
  }
  fs::remove_all(home);  // the link, not the shared cache
}

// A POCL_CACHE_DIR PoCL lists its device under but cannot build kernels in (a regular file): the
// device is not offered, and the reason names the variable (it was clBuildProgram's -11 at run).
TEST(XpuDetection, APoclCacheDirThatIsAFileIsTheReasonGiven) {
  const std::string dir = temp_dir("cachefile");
  const std::string file = dir + "/cache";
  std::ofstream(file) << "not a directory\n";
  const std::string env = "POCL_CACHE_DIR=" + file;
  const std::string out = output(env, "devices");
  EXPECT_TRUE(has(out, "xpu .* unavailable: .*POCL_CACHE_DIR=" + file + " is unusable")) << out;
  const auto named = run(cli(env + " OPREG_DEVICE=xpu", "devices"));
  EXPECT_EQ(named.status, 3) << named.text;
  const auto xpu = run(cli(env, "run rms_norm.fwd --device xpu --shape 3x5"));
  EXPECT_EQ(xpu.status, 3) << xpu.text;
  EXPECT_TRUE(has(xpu.text, "POCL_CACHE_DIR=" + file + " is unusable")) << xpu.text;
  output(env, "run rms_norm.fwd --device cpu --shape 3x5 --repeat 1");
  fs::remove_all(dir);
}

TEST(XpuDetection, PoclDevicesNamingNoDriverIsInTheReason) {
  const std::string out = output("POCL_DEVICES=bogus", "devices");
  EXPECT_TRUE(has(out, "xpu .* unavailable: .*lists no devices \\(POCL_DEVICES=bogus names its drivers\\)"))
      << out;
}

// OPREG_DISABLE=xpu keeps OpenCL unloaded: with a vendor library that aborts when loaded, every
// command still works; only naming an xpu device loads it (and then the process aborts, which
// shows the library is what the ICD loader would load).
TEST(XpuDetection, ADisabledXpuLoadsNoOpenCl) {
  const std::string vendors = temp_dir("abortvendors");
  std::ofstream(vendors + "/abort.icd") << OPREG_TEST_ABORT_ICD << "\n";
  const std::string env = "OCL_ICD_VENDORS=" + vendors + " OPREG_DISABLE=xpu";
  const std::string devices = output(env, "devices");
  EXPECT_TRUE(has(devices, "xpu .* unavailable: disabled by OPREG_DISABLE, not probed")) << devices;
  output(env, "run rms_norm.bwd --device cpu --shape 3x5 --repeat 1");
  output(env, "ops --op rms_norm.fwd");
  EXPECT_NE(run(cli("OCL_ICD_VENDORS=" + vendors, "devices")).status, 0) << "enabled, the vendor library is loaded";
  fs::remove_all(vendors);
}

TEST(XpuDetection, NoWritablePlaceForThePoclCacheIsTheReasonGiven) {
  // As root PoCL would create the missing HOME itself (and then work), so run as nobody, who
  // must be able to reach the build (not so under a root-only home directory).
  const std::string as_user = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  if (!as_user.empty() && run(as_user + OPREG_TEST_CLI + " --version").status != 0) {
    GTEST_SKIP() << "running as root and user nobody cannot run " << OPREG_TEST_CLI;
  }
  const auto out =
      run(as_user + cli("-u POCL_CACHE_DIR -u XDG_CACHE_HOME HOME=/nonexistent/home TMPDIR=/dev/null", "devices"));
  EXPECT_EQ(out.status, 0) << out.text;
  EXPECT_TRUE(has(out.text, "xpu .* unavailable: .*no writable directory for PoCL's kernel cache \\(tried HOME=/nonexistent/home "
                            "does not exist; cannot create /dev/null/opreg-"))
      << out.text;
  EXPECT_FALSE(fs::exists("/nonexistent/home")) << "a missing HOME is not created";
}

TEST(XpuDetection, FirstCallAfterTheContextCompilesNothing) {
  // A cache without compiled kernels: PoCL may reuse the programs' front-end output (the slow,
  // uninteresting part) but must compile every work-group function anew.
  const std::string cache = temp_dir("kcache");
  if (const char* shared = std::getenv("POCL_CACHE_DIR"); shared != nullptr && fs::is_directory(shared)) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(shared, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path relative = fs::relative(it->path(), shared);
      if (it->is_directory()) {
        if (relative.string().find("goffs") == std::string::npos) fs::create_directories(fs::path(cache) / relative);
      } else if (it->path().extension() != ".so" && it->path().string().find("goffs") == std::string::npos) {
        fs::copy_file(it->path(), fs::path(cache) / relative, fs::copy_options::overwrite_existing, ec);
      }
    }
  }
  const auto out = run("POCL_CACHE_DIR=" + cache + " " + OPREG_TEST_CHILD + " first-call");
  EXPECT_EQ(out.status, 0) << out.text;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out.text, m, std::regex("warmed=([0-9]+) after=([0-9]+)"))) << out.text;
  EXPECT_GT(std::stoul(m[1]), 0U) << "the warm-up compiled nothing: " << out.text;
  EXPECT_EQ(m[1], m[2]) << "calls after the warm-up compiled kernels of their own: " << out.text;
  fs::remove_all(cache);
}

TEST(XpuDetection, LevelZeroIsNeverLoaded) {
  const auto out = run(std::string(OPREG_TEST_CHILD) + " libraries");
  EXPECT_EQ(out.status, 0) << out.text;
  EXPECT_TRUE(has(out.text, "level_zero=none")) << out.text;
}

// ---- The environment helpers on fixtures.

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(XpuEnvironment, IntelGpuIcdsAreFoundAndFilteredOut) {
  const std::string vendors = temp_dir("vendors");
  write(vendors + "/pocl.icd", "libpocl.so.2.10.0\n");
  write(vendors + "/intel.icd", "/usr/lib/x86_64-linux-gnu/intel-opencl/libigdrcl.so\n");
  write(vendors + "/intel-cpu.icd", "/opt/intel/oneapi/lib/libintelocl.so\n");
  write(vendors + "/README", "not an icd\n");
  const auto intel = intel_gpu_icds(vendors);
  ASSERT_EQ(intel.size(), 1U);
  EXPECT_EQ(intel[0], "intel.icd");
  const std::string filtered = temp_dir("filtered");
  write(filtered + "/stale.icd", "libgone.so\n");
  std::string why;
  ASSERT_TRUE(write_filtered_vendors(vendors, intel, filtered, &why)) << why;
  EXPECT_TRUE(fs::exists(filtered + "/pocl.icd"));
  EXPECT_TRUE(fs::exists(filtered + "/intel-cpu.icd"));
  EXPECT_FALSE(fs::exists(filtered + "/intel.icd"));
  EXPECT_FALSE(fs::exists(filtered + "/stale.icd"));
  EXPECT_FALSE(fs::exists(filtered + "/README"));
  fs::remove_all(vendors);
  fs::remove_all(filtered);
}

TEST(XpuEnvironment, RenderNodesAndPoclLevelZeroDriverAreFoundOnFixtures) {
  const std::string dri = temp_dir("dri");
  write(dri + "/card0", "");
  EXPECT_FALSE(has_render_node(dri));
  write(dri + "/renderD128", "");
  EXPECT_TRUE(has_render_node(dri));
  EXPECT_FALSE(has_render_node(dri + "/missing"));
  const std::string lib = temp_dir("lib");
  fs::create_directories(lib + "/pocl");
  write(lib + "/pocl/libpocl-devices-pthread.so", "");
  EXPECT_EQ(pocl_level_zero_driver({lib}), "");
  write(lib + "/pocl/libpocl-devices-level0.so", "");
  EXPECT_EQ(pocl_level_zero_driver({"/nonexistent", lib}), lib + "/pocl/libpocl-devices-level0.so");
  fs::remove_all(dri);
  fs::remove_all(lib);
}

TEST(XpuEnvironment, UsableDirectorySaysWhyNot) {
  std::string why;
  EXPECT_EQ(usable_directory("/dev/null/x", &why), "");
  EXPECT_NE(why.find("cannot create /dev/null/x"), std::string::npos) << why;
  const std::string base = temp_dir("usable");
  EXPECT_EQ(usable_directory(base + "/a/b", &why), base + "/a/b");
  struct stat st {};
  ASSERT_EQ(::stat((base + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700U);
  fs::remove_all(base);
}

}  // namespace
}  // namespace opreg::xpu
