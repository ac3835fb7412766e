// SplitMix64 (Steele, Lea and Flood): a small, fast, seedable stream of 64-bit values, for what
// must be reproducible from a seed: the problem factory's inputs and the npu emulator's block
// order. Not for anything that needs unpredictability.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace opreg {

struct SplitMix {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // In [0, 1), 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Fisher-Yates over [first, last).
  template <class It>
  void shuffle(It first, It last) {
    for (auto n = last - first; n > 1; --n) std::swap(first[n - 1], first[static_cast<std::ptrdiff_t>(next() % n)]);
  }
};

}  // namespace opreg
