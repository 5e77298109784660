#pragma once
// Host helpers shared by the memory-move tests (test_memory_*.cu): tensor
// views with padding / batch / misalignment, the expected result of a copy
// into a poisoned buffer, and a bit-exact comparison (copies must be exact).

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/gpu_test.cuh"
#include "tilekit/tiles/gl.cuh"

namespace tilekit::testing {

// A 4-D strided view into a buffer: element (b, d, r, c) lives at
// offset + b*strides[0] + d*strides[1] + r*strides[2] + c.
struct view_spec {
  const char* name;
  int64_t shape[4];
  int64_t strides[4];
  int64_t offset = 0;  // elements from the buffer start (1 makes the base misaligned)

  int64_t index(int64_t b, int64_t d, int64_t r, int64_t c) const {
    return offset + b * strides[0] + d * strides[1] + r * strides[2] + c;
  }
  // Elements the buffer needs (last element + 1, plus a little tail so stray
  // writes just past the view are caught too).
  size_t buffer_elements() const {
    return size_t(index(shape[0] - 1, shape[1] - 1, shape[2] - 1, shape[3] - 1) + 1 + tail_elements);
  }
  int64_t slices() const { return shape[0] * shape[1]; }
  static constexpr int64_t tail_elements = 64;
};

// The views every tile-copy test walks: partial tiles on both edges, padded
// rows, a 4-D tensor with batch / depth, rows that are not 16-byte aligned,
// a misaligned base pointer, and an exact multiple of every tile.
inline std::vector<view_spec> copy_test_views() {
  return {
      {"contiguous 100x72", {1, 1, 100, 72}, {7200, 7200, 72, 1}},
      {"padded rows 100x72, row stride 80", {1, 1, 100, 72}, {8000, 8000, 80, 1}},
      {"4-D 2x3x40x48, padded strides", {2, 3, 40, 48}, {3 * 2304 + 128, 2304, 56, 1}},
      {"37x7: rows not 16-byte aligned", {1, 1, 37, 7}, {259, 259, 7, 1}},
      {"50x72 at a misaligned base", {1, 1, 50, 72}, {3600, 3600, 72, 1}, 1},
      {"exact 128x128", {1, 1, 128, 128}, {16384, 16384, 128, 1}},
  };
}

template <class T>
gl<T> make_view(T* buffer, const view_spec& v) {
  gl<T> g;
  g.data = buffer + v.offset;
  for (int i = 0; i < 4; ++i) {
    g.shape[i] = v.shape[i];
    g.strides[i] = v.strides[i];
  }
  return g;
}

// The bit pattern device_buffer poisons with (all bytes 0xFF).
template <class T>
T poison_value() {
  T value;
  std::memset(&value, 0xFF, sizeof(T));
  return value;
}

// What a copy of `src` into a poisoned buffer through view v must leave:
// src (converted through Via, then back to T) inside the view, poison elsewhere.
template <class T, class Via = T>
std::vector<T> expected_copy(const std::vector<T>& src, const view_spec& v) {
  std::vector<T> out(src.size(), poison_value<T>());
  for (int64_t b = 0; b < v.shape[0]; ++b)
    for (int64_t d = 0; d < v.shape[1]; ++d)
      for (int64_t r = 0; r < v.shape[2]; ++r)
        for (int64_t c = 0; c < v.shape[3]; ++c) {
          const int64_t i = v.index(b, d, r, c);
          out[size_t(i)] = convert<T>(convert<Via>(src[size_t(i)]));
        }
  return out;
}

// Bit-exact comparison; reports the number of mismatches and the first few.
template <class T>
void expect_same_bits(const std::vector<T>& out, const std::vector<T>& expected, const std::string& what) {
  ASSERT_EQ(out.size(), expected.size()) << what;
  size_t mismatches = 0;
  std::string first;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::memcmp(&out[i], &expected[i], sizeof(T)) != 0) {
      if (mismatches < 5)
        first += "\n  [" + std::to_string(i) + "] got " + std::to_string(to_double(out[i])) + ", expected " +
                 std::to_string(to_double(expected[i]));
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << out.size() << " elements differ" << first;
}

inline void sync_and_check(const char* what) {
  TILEKIT_CHECK_LAUNCH(what);
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
}

}  // namespace tilekit::testing
