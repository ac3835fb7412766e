// Bytes the process has allocated on the heap and not freed: what a test that asserts bounded
// memory compares before and after a loop. Under ASan or TSan the sanitizer's allocator is
// asked; otherwise glibc's mallinfo2 (every arena, mmapped chunks included).
#pragma once

#include <cstddef>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define OPREG_TEST_SANITIZER_HEAP 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OPREG_TEST_SANITIZER_HEAP 1
#endif

#ifdef OPREG_TEST_SANITIZER_HEAP
#include <sanitizer/allocator_interface.h>
#else
#include <malloc.h>
#endif

namespace opreg::testing {

inline std::size_t heap_in_use() {
#ifdef OPREG_TEST_SANITIZER_HEAP
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
#endif
}

}  // namespace opreg::testing
