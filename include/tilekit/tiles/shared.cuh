#pragma once
// Dynamic shared memory with the alignment that swizzled tiles need.
//
// The preferred style: describe a kernel's shared memory as one struct of
// tiles, vectors and barriers, let C++ lay it out (each st carries its
// alignment), and size the launch from the type:
//
//   struct storage { st_bf<128, 64> a[stages]; st_bf<256, 64> b[stages]; };
//   // host:   launch with shared_storage_bytes<storage> of dynamic shared memory
//   // device: storage& s = shared_storage<storage>();
//
// The dynamic window starts after any static __shared__ variables, only 16-B
// aligned (HOPPER_NOTES 9.1), so the base is rounded up here and the host size
// includes that slack. For variable layouts, shared_allocator hands out
// objects one after another, each aligned to its type.

#include <cstddef>
#include <cstdint>

#include "tilekit/core/util.cuh"

namespace tilekit {

// Slack added to every dynamic shared-memory request so the base can be rounded up.
inline constexpr int shared_base_alignment = 1024;

template <class Storage>
inline constexpr size_t shared_storage_bytes =
    sizeof(Storage) + (alignof(Storage) > 16 ? alignof(Storage) - 16 : 0);

#if defined(__CUDACC__)
namespace detail {
TILEKIT_DEVICE TILEKIT_INLINE unsigned char* dynamic_shared_base() {
  extern __shared__ __align__(16) unsigned char tilekit_dynamic_shared[];
  return tilekit_dynamic_shared;
}
TILEKIT_DEVICE TILEKIT_INLINE unsigned char* align_shared(unsigned char* p, size_t alignment) {
  // Align the shared-window address (the one the hardware swizzles on), not the generic one.
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  const uint32_t aligned = (addr + uint32_t(alignment) - 1) & ~uint32_t(alignment - 1);
  return p + (aligned - addr);
}
}  // namespace detail

// The kernel's dynamic shared memory viewed as one Storage object.
template <class Storage>
TILEKIT_DEVICE TILEKIT_INLINE Storage& shared_storage() {
  return *reinterpret_cast<Storage*>(detail::align_shared(detail::dynamic_shared_base(), alignof(Storage)));
}

// Bump allocator over dynamic shared memory. Host side: reserve
// `bytes_needed` (sum of sizes, each rounded to its alignment) + 1 KiB slack.
class shared_allocator {
 public:
  TILEKIT_DEVICE shared_allocator() : next_(detail::dynamic_shared_base()) {}

  template <class T>
  TILEKIT_DEVICE T& allocate() {
    next_ = detail::align_shared(next_, alignof(T));
    T* p = reinterpret_cast<T*>(next_);
    next_ += sizeof(T);
    return *p;
  }
  template <class T, int N>
  TILEKIT_DEVICE T (&allocate_array())[N] {
    next_ = detail::align_shared(next_, alignof(T));
    auto* p = reinterpret_cast<T(*)[N]>(next_);
    next_ += sizeof(T) * N;
    return *p;
  }
  // Bytes used so far, counted from the window start (for asserts against the launch size).
  TILEKIT_DEVICE uint32_t used() const {
    return static_cast<uint32_t>(next_ - detail::dynamic_shared_base());
  }

 private:
  unsigned char* next_;
};
#endif

}  // namespace tilekit
