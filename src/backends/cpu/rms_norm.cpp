// The fast host rms_norm, forward and backward, for every dtype pair and casting mode.
//
// Layout of the work: a row is the unit (its statistic needs all of it), rows are split
// statically across OpenMP threads, and within a row every loop is written so the compiler
// vectorises it without -ffast-math: sums go to kLanes independent f32 accumulators (an explicit
// reassociation the compiler may not make on its own), 16-bit values are converted in registers
// with branch-free integer code, and no loop stores through a pointer that may alias its loads.
//
// Rounding follows the reference (src/ops/reference) exactly in *where* values are rounded to
// x's dtype; the arithmetic in between is f32, except what costs little to do in double: the row
// sums across blocks, rstd, (offset + w) for `none`, and dweight's sums across row blocks and
// threads.
#include "backends/cpu/rms_norm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "registry/fail.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace opreg::cpu {
namespace {

// Everything the row loops call is forced inline, so that it is compiled again inside each
// instruction-set copy of those loops (see "Instruction sets" below): a call would run the
// baseline copy.
#define OPREG_RMS_INLINE [[gnu::always_inline]] inline

// ---- Element types: storage type plus bit-exact conversions to and from f32 (the same results
// as opreg::to_half / to_bfloat16 on the f32 value, NaN payloads included), written without
// branches so that loops calling them vectorise.

struct F32 {
  using T = float;
  OPREG_RMS_INLINE static float load(float v) { return v; }
  OPREG_RMS_INLINE static float store(float v) { return v; }
};

struct BF16 {
  using T = std::uint16_t;
  // bf16 is the top half of an f32.
  OPREG_RMS_INLINE static float load(std::uint16_t h) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
  }
  // Round to nearest even by adding 0x7FFF plus the lowest kept bit: the carry does the rest,
  // including rounding the largest finite values up to infinity. A NaN keeps its sign and top
  // payload bits and is made quiet, as opreg::to_bfloat16 does (the add could carry it into an
  // infinity).
  OPREG_RMS_INLINE static std::uint16_t store(float f) {
    const auto w = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t rounded = (w + 0x7FFFu + ((w >> 16) & 1u)) >> 16;
    const std::uint32_t nan = (w >> 16) | 0x40u;
    // Signed comparisons throughout these converters: SSE2 has no unsigned ones.
    return static_cast<std::uint16_t>(static_cast<std::int32_t>(w & 0x7FFFFFFFu) > 0x7F800000 ? nan : rounded);
  }
};

// IEEE binary16 in software: x86-64's baseline has no conversion instruction (F16C is an
// extension), and one portable method is easier to prove exact (every f32 has been checked
// against opreg::to_half). The method is the one of Maratyszcza's FP16 library: let the f32 unit
// do the rebias and the rounding by scaling with powers of two.
struct F16 {
  using T = std::uint16_t;
  OPREG_RMS_INLINE static float load(std::uint16_t h) {
    const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
    const std::uint32_t sign = w & 0x80000000u;
    const std::uint32_t two_w = w + w;  // exponent and mantissa, sign shifted out
    // Normal numbers, inf and NaN: put exponent and mantissa in f32 position with the exponent
    // raised by 224, so the all-ones f16 exponent becomes the all-ones f32 one, then scale by
    // 2^-112 to land on the f16 bias difference (127 - 15) exactly.
    const float normal = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    // Subnormals: the mantissa m under the exponent of 0.5 reads as 0.5 + m * 2^-24; removing
    // 0.5 leaves m * 2^-24 exactly.
    const float subnormal = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
    // A mask rather than ?:, which GCC turns back into a branch around the float arithmetic (it
    // may not speculate float operations under the default -ftrapping-math) and then cannot
    // vectorise.
    const std::uint32_t is_subnormal = 0u - static_cast<std::uint32_t>((h & 0x7C00u) == 0);
    const std::uint32_t magnitude = (std::bit_cast<std::uint32_t>(subnormal) & is_subnormal) |
                                    (std::bit_cast<std::uint32_t>(normal) & ~is_subnormal);
    return std::bit_cast<float>(sign | magnitude);
  }
  OPREG_RMS_INLINE static std::uint16_t store(float f) {
    const auto w = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = w & 0x80000000u;
    const auto magnitude = static_cast<std::int32_t>(w & 0x7FFFFFFFu);
    // Overflow: scaling up by 2^112 sends everything at or above 2^16 to infinity, then the
    // scale back down keeps smaller values exact.
    float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
    // Rounding: base is 4|f|; adding 2^(e+15) (e: f's exponent, raised to f16's smallest normal
    // exponent -14 for subnormals) leaves exactly f16's precision in the f32 sum's mantissa, so
    // the f32 add rounds to nearest even where f16 would, and the sum's low bits hold the
    // f16 exponent and mantissa.
    // bias: 2^e, at least 2^-14; then base = 2^(e+15) + 4|f|.
    std::int32_t bias = magnitude & 0x7F800000;
    bias = bias < 0x38800000 ? 0x38800000 : bias;
    base = std::bit_cast<float>(static_cast<std::uint32_t>(bias) + 0x07800000u) + base;
    const auto bits = std::bit_cast<std::uint32_t>(base);
    const std::uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    // NaN: quiet, with the top payload bits, as opreg::to_half keeps them.
    const std::uint32_t nan = 0x7E00u | ((w >> 13) & 0x3FFu);
    const std::uint32_t is_nan = 0u - static_cast<std::uint32_t>(magnitude > 0x7F800000);  // a mask: see load()
    return static_cast<std::uint16_t>((sign >> 16) | (nan & is_nan) | (nonsign & ~is_nan));
  }
};

// p + n for a weight pointer that is null when the call has no weight (null + n is undefined).
template <class T>
OPREG_RMS_INLINE const T* advance(const T* p, std::int64_t n) {
  return p == nullptr ? nullptr : p + n;
}

// round_x: what storing a value in X and reading it back gives.
template <class X>
OPREG_RMS_INLINE float round_x(float v) {
  if constexpr (std::is_same_v<X, F32>) {
    return v;
  } else {
    return X::load(X::store(v));
  }
}

// Rounds a double to f32 "to odd": truncate, then set the last bit if anything was cut off.
// Rounding that result to a format with at least two fewer mantissa bits (f16, bf16) gives the
// same answer as rounding the double directly, which a plain double -> f32 -> f16 chain does
// not (a value just off a tie lands on the tie, then ties to even).
OPREG_RMS_INLINE float to_float_odd(double d) {
  const float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  const auto bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t truncated = bits - static_cast<std::uint32_t>(std::fabs(back) > std::fabs(d));
  return std::bit_cast<float>(truncated | static_cast<std::uint32_t>(back != d));
}

// a + b rounded to odd, in f32 only (the double version above does not vectorise next to 16-bit
// lanes): the f32 sum plus its exact error (Knuth's two-sum, exact without FMA contraction, which
// this file turns off) says whether and which way the sum was rounded. An overflowed sum keeps
// its infinity (its error is NaN), which rounds to the same infinity in f16 and bf16.
OPREG_RMS_INLINE float add_odd(float a, float b) {
  const float s = a + b;
  const float bb = s - a;
  const float err = (a - (s - bb)) + (b - bb);
  // Bitwise & and | on the comparisons: no short-circuit branches in the vector loop.
  const auto inexact = static_cast<std::uint32_t>((err < 0.0f) | (err > 0.0f));
  const auto away = static_cast<std::uint32_t>(((s > 0.0f) & (err < 0.0f)) | ((s < 0.0f) & (err > 0.0f)));
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(s) - away) | inexact);
}

// ---- Tuning constants (also listed as the variants' tunables).

// Independent f32 accumulators of a row sum (one AVX-512, two AVX2 or four SSE registers), so
// the adds vectorise without reassociation and pipeline instead of waiting on each other.
constexpr int kLanes = 16;
// Elements summed in f32 before the block's total joins the row total in double: a lane then
// adds at most 64 terms, so a row of 200003 elements is as accurate as a row of 1024.
constexpr std::int64_t kBlock = 1024;
// Problems smaller than this (rows x hidden) run on the calling thread: starting an OpenMP team
// costs microseconds, more than the whole problem.
constexpr std::int64_t kSerialBelow = 32768;
// Each thread of a team gets at least this much work.
constexpr std::int64_t kMinPerThread = 16384;
// Columns handled together: (offset + w) is computed a chunk at a time, and the backward
// computes a chunk of dx into a local buffer before writing it (dx may be dy).
constexpr std::int64_t kChunk = 256;

// (offset + w) for n <= kChunk columns, as the casting mode defines it. For `none` the reference
// rounds the double sum to x's dtype; doing the sum in double and rounding once (through
// round-to-odd for the 16-bit types) reproduces it bit for bit. llama and gemma keep it
// unrounded, so f32 is as good as the f32 arithmetic it feeds.
template <class X, class W, Casting C>
OPREG_RMS_INLINE void scale_chunk(const typename W::T* __restrict w, std::int64_t n, double offset,
                                  float* __restrict out) {
  if (w == nullptr) {  // no weight: the scale is 1 (and the op's check keeps offset at 0)
    for (std::int64_t j = 0; j < n; ++j) out[j] = 1.0f;
    return;
  }
  if constexpr (C != Casting::none) {
    const auto offset_f = static_cast<float>(offset);
    for (std::int64_t j = 0; j < n; ++j) out[j] = offset_f + W::load(w[j]);
  } else {
    // `none` rounds (offset + w) to the weight's dtype: for an f32 weight, the double sum
    // rounded to f32; for a 16-bit weight (then x has its dtype too), the same 16-bit rounding.
    if constexpr (std::is_same_v<W, F32>) {
      for (std::int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(offset + static_cast<double>(W::load(w[j])));
    } else {
      // The usual case, an offset that is an f32 (0, 1, 0.5, ...) and weights within 2^28 of it:
      // the double sum is exact (the two 24-bit mantissas span at most 53 bits), so add_odd in
      // f32 gives what to_float_odd of the double sum would, in a loop that vectorises.
      const auto offset_f = static_cast<float>(offset);
      const float magnitude = std::fabs(offset_f);
      const float low = magnitude * 0x1.0p-28f;
      const float high = magnitude * 0x1.0p+28f;
      int fast = static_cast<double>(offset_f) == offset;
      if (fast != 0 && magnitude != 0.0f) {
        for (std::int64_t j = 0; j < n; ++j) {
          const float a = std::fabs(W::load(w[j]));
          fast &= static_cast<int>((a == 0.0f) | ((a >= low) & (a <= high)));
        }
      }
      if (fast != 0) {
        for (std::int64_t j = 0; j < n; ++j) out[j] = round_x<W>(add_odd(offset_f, W::load(w[j])));
      } else {
        for (std::int64_t j = 0; j < n; ++j) {
          out[j] = round_x<W>(to_float_odd(offset + static_cast<double>(W::load(w[j]))));
        }
      }
    }
  }
}

// sum over i < n of term(i), in kLanes f32 lanes per block of kBlock, blocks summed in double.
// The order is fixed by n alone, so the result does not depend on threads or alignment.
template <class Term>
OPREG_RMS_INLINE double blocked_sum(std::int64_t n, Term term) {
  double total = 0.0;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const std::int64_t e = std::min(n, b + kBlock);
    float acc[kLanes] = {};
    std::int64_t i = b;
    for (; i + kLanes <= e; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[l] += term(i + l);
    }
    for (; i < e; ++i) acc[0] += term(i);
    for (int half = kLanes / 2; half > 0; half /= 2) {
      for (int l = 0; l < half; ++l) acc[l] += acc[l + half];
    }
    total += static_cast<double>(acc[0]);
  }
  return total;
}

// The terms of the two row sums, as functors rather than lambdas so they can be forced inline.
template <class X>
struct SquareTerm {
  const typename X::T* __restrict x;
  OPREG_RMS_INLINE float operator()(std::int64_t i) const {
    const float v = X::load(x[i]);
    return v * v;
  }
};
template <class X>
struct DotTerm {
  const typename X::T* dy;
  const float* __restrict scale;
  const typename X::T* __restrict x;
  OPREG_RMS_INLINE float operator()(std::int64_t i) const { return X::load(dy[i]) * scale[i] * X::load(x[i]); }
};

// Threads for a problem: 1 below kSerialBelow elements or without OpenMP; otherwise the
// context's count (0: OpenMP's default), no more than rows and no more than kMinPerThread
// allows. A function of the problem and the count only, so dweight is reproducible.
int team_size([[maybe_unused]] const KernelContext& ctx, [[maybe_unused]] std::int64_t rows,
              [[maybe_unused]] std::int64_t elements) {
#ifdef _OPENMP
  if (elements < kSerialBelow) return 1;
  std::int64_t t = ctx.threads > 0 ? ctx.threads : omp_get_max_threads();
  t = std::min({t, rows, (elements + kMinPerThread - 1) / kMinPerThread});
  return static_cast<int>(std::max<std::int64_t>(t, 1));
#else
  return 1;
#endif
}

// Scratch from the backend's cached workspace (no allocation in a steady state; blocks are at
// least 64-byte aligned). A context without a backend (a kernel called directly, outside a
// registry) gets its own buffer.
class Scratch {
 public:
  Scratch(const KernelContext& ctx, std::size_t bytes) {
    if (ctx.backend != nullptr) {
      lease_ = ctx.backend->workspace(ctx.device.index).acquire(bytes, ctx.stream);
      data_ = lease_.data();
    } else {
      own_.resize((bytes + sizeof(double) - 1) / sizeof(double));
      data_ = own_.data();
    }
  }
  void* data() const { return data_; }

 private:
  Workspace::Lease lease_;
  std::vector<double> own_;
  void* data_ = nullptr;
};

// ---- Instruction sets
//
// The library is built for the baseline of its target (SSE2 on x86-64), where a vector holds 4
// floats and the 16-bit conversions have no unsigned compares, min/max or 32 -> 16-bit packs to
// work with. The row loops are therefore compiled three times, for the baseline, AVX2 and
// AVX-512, and the host's best is picked once from cpuid. The copies compute the same values
// bit for bit: every sum has the fixed kLanes-accumulator structure of the source, whatever the
// vector width, and -ffp-contract=off (CMakeLists.txt) keeps FMA out of the AVX copies.

// Thread t of `members` takes a contiguous share of `count` items, rows or column chunks (what
// schedule(static) would give).
struct Share {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};
inline Share share_of(std::int64_t count, int t, int members) {
  const std::int64_t base = count / members;
  const std::int64_t extra = count % members;
  const std::int64_t begin = base * t + std::min<std::int64_t>(t, extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}

// A job is one thread's share of a phase (the row loop, or a pass over the columns):
// job(t, members). Runners compile it for one instruction set; everything it calls is inline,
// so the whole loop nest is in that copy.
template <class Job>
void run_baseline(const Job& job, int t, int members) {
  job(t, members);
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OPREG_RMS_X86 1
template <class Job>
__attribute__((target("avx2"))) void run_avx2(const Job& job, int t, int members) {
  job(t, members);
}
template <class Job>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void run_avx512(const Job& job, int t, int members) {
  job(t, members);
}
#endif

enum class Isa : std::uint8_t { baseline, avx2, avx512 };

Isa host_isa() {
  static const Isa isa = [] {
#ifdef OPREG_RMS_X86
    // Also checks that the OS saves the wider registers (XCR0), not only the cpuid bits.
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq")) {
      return Isa::avx512;
    }
    if (__builtin_cpu_supports("avx2")) return Isa::avx2;
#endif
    return Isa::baseline;
  }();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    case Isa::baseline:
      break;
  }
  return "baseline";
}

template <class Job>
using Runner = void (*)(const Job&, int, int);

template <class Job>
Runner<Job> runner(Isa isa) {
#ifdef OPREG_RMS_X86
  if (isa == Isa::avx512) return &run_avx512<Job>;
  if (isa == Isa::avx2) return &run_avx2<Job>;
#endif
  static_cast<void>(isa);
  return &run_baseline<Job>;
}

#ifdef _OPENMP
// A barrier of the innermost enclosing team (an orphaned directive: run_phases calls it).
void team_barrier() {
#pragma omp barrier
}
#endif

// Runs the jobs one after the other, each as job(t, members) on every thread of a team of
// `team`, with a barrier between two jobs; a team of one is the calling thread, with no OpenMP
// region at all (small problems must not pay for one).
template <class... Jobs>
void run_phases(int team, const Jobs&... jobs) {
  const Isa isa = host_isa();
  if (team <= 1) {
    (runner<Jobs>(isa)(jobs, 0, 1), ...);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel num_threads(team)
  {
    // The team may be smaller than asked (nested parallelism, thread limits): shares, and the
    // backward's partials, go by the actual team size.
    const int t = omp_get_thread_num();
    const int members = omp_get_num_threads();
    int phase = 0;
    ((phase++ == 0 ? void() : team_barrier(), runner<Jobs>(isa)(jobs, t, members)), ...);
  }
#endif
}

// (offset + w) for all h columns into `out`, a share of the column chunks per thread.
template <class X, class W, Casting C>
struct ScaleJob {
  const typename W::T* w;
  std::int64_t h;
  double offset;
  float* out;
  OPREG_RMS_INLINE void operator()(int t, int members) const {
    const Share share = share_of((h + kChunk - 1) / kChunk, t, members);
    for (std::int64_t c = share.begin; c < share.end; ++c) {
      scale_chunk<X, W, C>(advance(w, c * kChunk), std::min(kChunk, h - c * kChunk), offset, out + c * kChunk);
    }
  }
};

// ---- Forward

// One row: rstd, then y. round_x(x * rstd) rounds the f32 product, which can differ from the
// reference's single rounding by one ulp of x's dtype at a tie; y's own rounding is that coarse,
// and the reference's product uses the double rstd that no f32 rstd reproduces anyway (the
// backward, where an f32 dweight would see it, rounds once).
template <class X, class W, Casting C>
OPREG_RMS_INLINE void fwd_row(const typename X::T* __restrict x, const typename W::T* __restrict w,
                              typename X::T* __restrict y, float* __restrict rstd_out, std::int64_t h, double eps,
                              double offset, const float* __restrict scaled) {
  const double squares = blocked_sum(h, SquareTerm<X>{x});
  const double mean = h == 0 ? 0.0 : squares / static_cast<double>(h);
  const auto rstd = static_cast<float>(1.0 / std::sqrt(mean + eps));
  *rstd_out = rstd;
  float local[kChunk];
  for (std::int64_t b = 0; b < h; b += kChunk) {
    const std::int64_t n = std::min(kChunk, h - b);
    const float* scale = local;
    if (scaled != nullptr) {
      scale = scaled + b;
    } else {
      scale_chunk<X, W, C>(advance(w, b), n, offset, local);
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const float xhat = X::load(x[b + j]) * rstd;
      y[b + j] = X::store(C == Casting::gemma ? xhat * scale[j] : round_x<X>(xhat) * scale[j]);
    }
  }
}

template <class X, class W, Casting C>
struct FwdJob {
  const typename X::T* x;
  const typename W::T* w;
  typename X::T* y;
  float* rstd;
  std::int64_t rows;
  std::int64_t h;
  double eps;
  double offset;
  const float* scaled;  // (offset + w) for all h columns, or nullptr: each row computes its own
  OPREG_RMS_INLINE void operator()(int t, int members) const {
    const Share share = share_of(rows, t, members);
    for (std::int64_t r = share.begin; r < share.end; ++r) {
      fwd_row<X, W, C>(x + r * h, w, y + r * h, rstd + r, h, eps, offset, scaled);
    }
  }
};

template <class X, class W, Casting C>
struct Fwd {
  static void run(const RmsNormFwdArgs& a, const KernelContext& ctx) {
    const RowsHidden shape = rows_hidden(a.x.shape());
    const std::int64_t h = shape.hidden;
    const auto* w = a.weight.data_as<const typename W::T>();
    FwdJob<X, W, C> job{};
    job.x = a.x.data_as<const typename X::T>();
    job.w = w;
    job.y = a.y.data_as<typename X::T>();
    job.rstd = a.rstd.data_as<float>();
    job.rows = shape.rows;
    job.h = h;
    job.eps = a.eps;
    job.offset = a.offset;
    job.scaled = nullptr;
    if (shape.rows * h < kSerialBelow) {
      // Small problems (the dispatch benchmark's 1x8 among them) run on this thread and touch no
      // workspace: each row computes (offset + w) chunk by chunk as it goes.
      run_phases(1, job);
      return;
    }
    // Large ones compute (offset + w) once, shared by the team, instead of once per row (`none`
    // rounds it through round-to-odd, a dozen operations per column).
    Scratch scratch(ctx, static_cast<std::size_t>(h) * sizeof(float));
    auto* scaled = static_cast<float*>(scratch.data());
    job.scaled = scaled;
    run_phases(team_size(ctx, shape.rows, shape.rows * h), ScaleJob<X, W, C>{w, h, a.offset, scaled}, job);
  }
};

// ---- Backward

// One row: dx = rstd * m - rstd^3 * dot / H * x with m = dy * w' and dot = sum(m * x), and the
// row's share of dweight (dy * xhat) added to this thread's partial `dw`. dy is not restrict:
// dx may be the same memory. The row's dot is complete before any dx is written, and each chunk
// of dx is written only after the chunk's dy was read into registers and `out`.
template <class X, Casting C, bool kFirst>
OPREG_RMS_INLINE void bwd_row(const typename X::T* dy, const typename X::T* __restrict x, const float* __restrict scale,
                              float rstd, typename X::T* dx, float* __restrict dw, std::int64_t h) {
  const double dot = blocked_sum(h, DotTerm<X>{dy, scale, x});
  const double r = rstd;
  const auto coeff = static_cast<float>(h == 0 ? 0.0 : r * r * r * dot / static_cast<double>(h));
  // dweight sums dy * round_x(x * rstd) over rows, in the weight's dtype, which may be f32: one
  // x * rstd rounded to f32 first and then to f16 lands on a tie and differs from the reference's
  // single rounding by a whole f16 ulp in about one element in 2^13, far beyond an f32 dweight's
  // tolerance. So the product is rounded once: rstd = hi + lo with 12 significant bits each makes
  // x * hi and x * lo exact in f32 (x has at most 11), and add_odd rounds their sum to odd.
  const float rstd_hi = std::bit_cast<float>(std::bit_cast<std::uint32_t>(rstd) & 0xFFFFF000u);
  const float rstd_lo = rstd - rstd_hi;
  float out[kChunk];
  for (std::int64_t b = 0; b < h; b += kChunk) {
    const std::int64_t n = std::min(kChunk, h - b);
    for (std::int64_t j = 0; j < n; ++j) {
      const float g = X::load(dy[b + j]);
      const float xv = X::load(x[b + j]);
      const float xhat = xv * rstd;
      out[j] = rstd * (g * scale[b + j]) - coeff * xv;
      float term;
      if constexpr (C == Casting::gemma || std::is_same_v<X, F32>) {
        term = g * xhat;  // (for f32, round_x is the identity)
      } else {
        term = g * round_x<X>(add_odd(xv * rstd_hi, xv * rstd_lo));
      }
      // The first row of a block sets it: no pass to zero the block beforehand.
      dw[b + j] = kFirst ? term : dw[b + j] + term;
    }
    for (std::int64_t j = 0; j < n; ++j) dx[b + j] = X::store(out[j]);
  }
}

// Rows of one thread's share between folds of its f32 dweight block into its f64 total: the f32
// chain stays 32 terms long however many rows there are (4096 rows summed in one f32 chain
// already miss an f32 dweight's tolerance), and the fold is one pass over H every 32 rows.
constexpr std::int64_t kRowBlock = 32;

// total += block (total = block for the first), one thread's partials over h columns.
template <bool kFirst>
OPREG_RMS_INLINE void fold(const float* __restrict block, double* __restrict total, std::int64_t h) {
  for (std::int64_t i = 0; i < h; ++i) total[i] = (kFirst ? 0.0 : total[i]) + static_cast<double>(block[i]);
}

// Whether each thread's share of the rows fits in one block: then the f32 blocks are the
// partials, and folding them into f64 totals would only add scratch traffic (a thread of a
// two-row problem would move its 200003-column partials three more times) for the same values.
inline bool one_block_each(std::int64_t rows, int members) { return (rows + members - 1) / members <= kRowBlock; }

// Columns [begin, end) of dweight (at most kChunk): the partials (f32 blocks or f64 totals) of
// threads 0 .. members-1 added in that order in double, rounded once to W (through round-to-odd
// for the 16-bit types, see to_float_odd; two loops, as SSE2 cannot vectorise double and 16-bit
// lanes in one).
template <class W, class P>
OPREG_RMS_INLINE void reduce_columns(const P* __restrict partials, int members, std::size_t stride,
                                     typename W::T* __restrict dweight, std::int64_t begin, std::int64_t end) {
  double acc[kChunk];
  const std::int64_t n = end - begin;
  for (std::int64_t j = 0; j < n; ++j) acc[j] = static_cast<double>(partials[begin + j]);
  for (int t = 1; t < members; ++t) {
    const P* p = partials + stride * static_cast<std::size_t>(t) + static_cast<std::size_t>(begin);
    for (std::int64_t j = 0; j < n; ++j) acc[j] += static_cast<double>(p[j]);
  }
  if constexpr (std::is_same_v<W, F32>) {
    for (std::int64_t j = 0; j < n; ++j) dweight[begin + j] = static_cast<float>(acc[j]);
  } else {
    float odd[kChunk];
    for (std::int64_t j = 0; j < n; ++j) odd[j] = to_float_odd(acc[j]);
    for (std::int64_t j = 0; j < n; ++j) dweight[begin + j] = W::store(odd[j]);
  }
}

// One thread's rows of the backward: dx, and dweight partials in its own f32 block and f64
// total (which rows share a block, and hence dweight's bits, depend on the team size only).
template <class X, Casting C>
struct BwdJob {
  const typename X::T* dy;
  const typename X::T* x;
  const float* scaled;
  const float* rstd;
  typename X::T* dx;
  std::int64_t rows;
  std::int64_t h;
  std::size_t stride;
  float* blocks;
  double* totals;
  OPREG_RMS_INLINE void operator()(int t, int members) const {
    const Share share = share_of(rows, t, members);
    float* block = blocks + stride * static_cast<std::size_t>(t);
    double* total = totals + stride * static_cast<std::size_t>(t);
    const bool direct = one_block_each(rows, members);
    // Neither partial is zeroed first (with few rows a thread, that would be most of the
    // scratch traffic): a block's first row and the first fold assign instead of adding.
    if (share.begin == share.end) {  // rows = 0: dweight = 0
      if (direct) {
        std::fill(block, block + h, 0.0f);
      } else {
        std::fill(total, total + h, 0.0);
      }
      return;
    }
    for (std::int64_t first = share.begin; first < share.end; first += kRowBlock) {
      const std::int64_t end = std::min(share.end, first + kRowBlock);
      bwd_row<X, C, true>(dy + first * h, x + first * h, scaled, rstd[first], dx + first * h, block, h);
      for (std::int64_t r = first + 1; r < end; ++r) {
        bwd_row<X, C, false>(dy + r * h, x + r * h, scaled, rstd[r], dx + r * h, block, h);
      }
      if (direct) break;  // the only block
      if (first == share.begin) {
        fold<true>(block, total, h);
      } else {
        fold<false>(block, total, h);
      }
    }
  }
};

// dweight from the threads' partials, a share of the column chunks per thread.
template <class W>
struct ReduceJob {
  const float* blocks;
  const double* totals;
  std::size_t stride;
  typename W::T* dweight;
  std::int64_t rows;
  std::int64_t h;
  OPREG_RMS_INLINE void operator()(int t, int members) const {
    const Share share = share_of((h + kChunk - 1) / kChunk, t, members);
    const bool direct = one_block_each(rows, members);
    for (std::int64_t c = share.begin; c < share.end; ++c) {
      const std::int64_t end = std::min(h, (c + 1) * kChunk);
      if (direct) {
        reduce_columns<W>(blocks, members, stride, dweight, c * kChunk, end);
      } else {
        reduce_columns<W>(totals, members, stride, dweight, c * kChunk, end);
      }
    }
  }
};

template <class X, class W, Casting C>
struct Bwd {
  static void run(const RmsNormBwdArgs& a, const KernelContext& ctx) {
    const RowsHidden shape = rows_hidden(a.x.shape());
    const std::int64_t rows = shape.rows;
    const std::int64_t h = shape.hidden;
    const int team = team_size(ctx, rows, rows * h);
    // Scratch, each array padded to a 64-byte multiple so threads never share a cache line:
    // (offset + w) once per call (f32, h), then per thread an f32 block and an f64 total of
    // dweight (h each).
    const auto stride = static_cast<std::size_t>((h + 15) / 16 * 16);
    const auto members_max = static_cast<std::size_t>(team);
    Scratch scratch(ctx, stride * sizeof(float) * (1 + members_max) + stride * sizeof(double) * members_max);
    auto* scaled = static_cast<float*>(scratch.data());
    float* blocks = scaled + stride;
    auto* totals = reinterpret_cast<double*>(blocks + stride * members_max);
    // Three phases, each waiting for the one before: (offset + w); the rows (dx, and each
    // thread's dweight partials); dweight from the partials.
    const ScaleJob<X, W, C> scale{a.weight.data_as<const typename W::T>(), h, a.offset, scaled};
    const BwdJob<X, C> rows_job{a.dy.data_as<const typename X::T>(),
                                a.x.data_as<const typename X::T>(),
                                scaled,
                                a.rstd.data_as<const float>(),
                                a.dx.data_as<typename X::T>(),
                                rows,
                                h,
                                stride,
                                blocks,
                                totals};
    if (!a.dweight.defined()) {  // no weight, no dweight: the partials go unused
      run_phases(team, scale, rows_job);
      return;
    }
    const ReduceJob<W> reduce{blocks, totals, stride, a.dweight.data_as<typename W::T>(), rows, h};
    run_phases(team, scale, rows_job, reduce);
  }
};

// ---- Dispatch on (x dtype, weight dtype, casting): one template, instantiated for each.

template <template <class, class, Casting> class K, class X, class W, class Args>
void by_casting(const Args& a, const KernelContext& ctx) {
  switch (a.casting) {
    case Casting::llama:
      return K<X, W, Casting::llama>::run(a, ctx);
    case Casting::gemma:
      return K<X, W, Casting::gemma>::run(a, ctx);
    case Casting::none:
      return K<X, W, Casting::none>::run(a, ctx);
  }
  fail(ErrorKind::internal, "cpu.rms_norm: unknown casting mode {}", static_cast<int>(a.casting));
}

template <template <class, class, Casting> class K, class Args>
void by_dtype(const Args& a, const KernelContext& ctx, const char* variant) {
  const DType xd = a.x.dtype();
  // No weight: an f32 kernel whose weight pointer is null (the scale is 1).
  const DType wd = a.weight.defined() ? a.weight.dtype() : DType::f32;
  const bool weight_f32 = wd == DType::f32;
  if (xd == DType::f32 && weight_f32) return by_casting<K, F32, F32>(a, ctx);
  if (xd == DType::f16 && weight_f32) return by_casting<K, F16, F32>(a, ctx);
  if (xd == DType::f16 && wd == DType::f16) return by_casting<K, F16, F16>(a, ctx);
  if (xd == DType::bf16 && weight_f32) return by_casting<K, BF16, F32>(a, ctx);
  if (xd == DType::bf16 && wd == DType::bf16) return by_casting<K, BF16, BF16>(a, ctx);
  // The op's check refuses every other pair before dispatch.
  fail(ErrorKind::internal, "{}: no kernel for x {} with weight {}", variant, to_string(xd), to_string(wd));
}

// name=value pairs for `opreg ops` and verbose logs, short and true: where the thread count
// comes from, the constants above, and the instruction set the row loops run with here.
std::vector<Tunable> tunables() {
#ifdef _OPENMP
  std::string threads = "OPREG_NUM_THREADS";
#else
  std::string threads = "1";
#endif
  return {{"threads", std::move(threads)},
          {"serial_below", std::to_string(kSerialBelow)},
          {"min_per_thread", std::to_string(kMinPerThread)},
          {"lanes", std::to_string(kLanes)},
          {"row_block", std::to_string(kRowBlock)},
          {"isa", isa_name(host_isa())}};
}

}  // namespace

void rms_norm_fwd_generic(const RmsNormFwdArgs& args, const KernelContext& ctx) {
  by_dtype<Fwd>(args, ctx, "cpu.rms_norm.fwd.generic");
}

void rms_norm_bwd_generic(const RmsNormBwdArgs& args, const KernelContext& ctx) {
  by_dtype<Bwd>(args, ctx, "cpu.rms_norm.bwd.generic");
}

void register_rms_norm(Registry& registry) {
  VariantSpec<RmsNormFwdArgs> fwd;
  fwd.backend = "cpu";
  fwd.impl = "generic";
  fwd.priority = 100;
  fwd.run = rms_norm_fwd_generic;
  fwd.tunables = tunables();
  registry.add_variant(rms_norm_fwd_op(), std::move(fwd)).release();

  VariantSpec<RmsNormBwdArgs> bwd;
  bwd.backend = "cpu";
  bwd.impl = "generic";
  bwd.priority = 100;
  bwd.run = rms_norm_bwd_generic;
  bwd.tunables = tunables();
  registry.add_variant(rms_norm_bwd_op(), std::move(bwd)).release();
}

}  // namespace opreg::cpu
