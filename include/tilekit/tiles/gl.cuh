#pragma once
// Global tensor views: gl<T>, a pointer with a runtime shape and runtime
// strides, up to 4 dimensions, the last one contiguous.
//
// Dimensions are named from the outside in: batch (b), depth (d, e.g. heads),
// rows (r), cols (c). A rank-2 tensor has batch = depth = 1. Strides are in
// elements; stride(cols) is always 1. Coordinates are element indices:
//
//   gl<bf16> q = make_gl(ptr, {batch, heads, seqlen, head_dim})   // contiguous [b, h, s, head_dim]
//   warp::load(tile, q, {.b = b, .d = h, .r = row0, .c = 0});      // rows row0.. of head h
//
// Loads and stores take the coordinate of the tile's top-left element and
// handle tiles that hang over the tensor edge (zero fill / dropped writes).

#include <array>
#include <cstdint>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/util.cuh"

namespace tilekit {

// An element coordinate (b, d, r, c); designated initializers read well:
// coord{.b = 1, .r = 64}.
struct coord {
  int b = 0;
  int d = 0;
  int r = 0;
  int c = 0;
};

template <class T>
struct gl {
  using element = T;
  T* data = nullptr;
  int64_t shape[4] = {1, 1, 1, 1};    // batch, depth, rows, cols
  int64_t strides[4] = {0, 0, 0, 1};  // elements; strides[3] == 1

  TILEKIT_HOST_DEVICE int64_t batch() const { return shape[0]; }
  TILEKIT_HOST_DEVICE int64_t depth() const { return shape[1]; }
  TILEKIT_HOST_DEVICE int64_t rows() const { return shape[2]; }
  TILEKIT_HOST_DEVICE int64_t cols() const { return shape[3]; }
  TILEKIT_HOST_DEVICE int64_t row_stride() const { return strides[2]; }

  // Element offset of (b, d, r, c) from data.
  TILEKIT_HOST_DEVICE int64_t offset(const coord& x) const {
    return x.b * strides[0] + x.d * strides[1] + x.r * strides[2] + int64_t(x.c);
  }
  TILEKIT_HOST_DEVICE T* ptr(const coord& x) const { return data + offset(x); }
  TILEKIT_HOST_DEVICE T& operator[](const coord& x) const { return data[offset(x)]; }
  // Inside the tensor? (all four coordinates checked)
  TILEKIT_HOST_DEVICE bool contains(const coord& x) const {
    return x.b >= 0 && x.b < shape[0] && x.d >= 0 && x.d < shape[1] && x.r >= 0 && x.r < shape[2] &&
           x.c >= 0 && x.c < shape[3];
  }
  // Number of Tile-sized tiles needed to cover rows / cols (the last one may be partial).
  template <class Tile>
  TILEKIT_HOST_DEVICE int64_t row_tiles() const { return ceil_div<int64_t>(shape[2], Tile::rows); }
  template <class Tile>
  TILEKIT_HOST_DEVICE int64_t col_tiles() const { return ceil_div<int64_t>(shape[3], Tile::cols); }
};

// Checks a view: non-null data (unless empty), positive shape, last stride 1,
// non-negative strides, and `alignment_bytes` alignment of the pointer and of
// every outer stride (16 for vectorized / TMA access). Throws invalid_argument.
template <class T>
void validate(const gl<T>& g, const char* name, int alignment_bytes = int(sizeof(T))) {
  for (int i = 0; i < 4; ++i)
    TILEKIT_CHECK_ARG(g.shape[i] >= 1, name, ": dimension ", i, " must be >= 1, got ", g.shape[i]);
  TILEKIT_CHECK_ARG(g.data != nullptr, name, ": data pointer is null");
  TILEKIT_CHECK_ARG(g.strides[3] == 1, name, ": the last dimension must be contiguous (stride 1), got stride ",
                    g.strides[3]);
  for (int i = 0; i < 3; ++i) {
    TILEKIT_CHECK_ARG(g.strides[i] >= 0, name, ": stride of dimension ", i, " is negative (", g.strides[i], ")");
    TILEKIT_CHECK_ARG(g.shape[i] == 1 || (g.strides[i] * int64_t(sizeof(T))) % alignment_bytes == 0, name,
                      ": stride of dimension ", i, " (", g.strides[i], " elements) is not a multiple of ",
                      alignment_bytes, " bytes");
  }
  TILEKIT_CHECK_ARG(reinterpret_cast<uintptr_t>(g.data) % alignment_bytes == 0, name, ": data pointer is not ",
                    alignment_bytes, "-byte aligned");
}

// A contiguous tensor of shape {..., rows, cols} (1 to 4 dims, outermost first).
template <class T, size_t Rank>
gl<T> make_gl(T* data, const int64_t (&shape)[Rank]) {
  static_assert(Rank >= 1 && Rank <= 4, "gl views have 1 to 4 dimensions");
  gl<T> g;
  g.data = data;
  for (size_t i = 0; i < Rank; ++i) g.shape[4 - Rank + i] = shape[i];
  int64_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    g.strides[i] = stride;
    stride *= g.shape[i];
  }
  return g;
}

// A strided tensor: shape and strides (in elements) outermost first; the last
// stride must be 1 (checked by validate(), which host APIs call).
template <class T, size_t Rank>
gl<T> make_gl(T* data, const int64_t (&shape)[Rank], const int64_t (&strides)[Rank]) {
  static_assert(Rank >= 1 && Rank <= 4, "gl views have 1 to 4 dimensions");
  gl<T> g = make_gl(data, shape);
  for (size_t i = 0; i < Rank; ++i) g.strides[4 - Rank + i] = strides[i];
  for (int i = 0; i < 4 - int(Rank); ++i) g.strides[i] = 0;  // size-1 leading dims
  return g;
}

}  // namespace tilekit
