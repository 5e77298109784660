#pragma once
// Reference register-tile I/O for tests: every lane reads/writes exactly the
// elements rt::position() says it owns, one element at a time. It is slow and
// obviously correct, so tests of the real load/store paths (ldmatrix, vector
// loads, wgmma fragments) and of register ops can use it as ground truth.

#include "tilekit/core/dtypes.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/rv.cuh"

namespace tilekit::testing {

// tile <- src[(row0 + r) * ld + col0 + c], element type converted.
template <class Tile, class T>
__device__ void reference_load(Tile& tile, const T* src, int ld, int row0 = 0, int col0 = 0) {
  using E = typename Tile::element;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < Tile::height; ++i)
#pragma unroll
    for (int j = 0; j < Tile::width; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        auto p0 = Tile::position(lane, i, j, k, 0);
        auto p1 = Tile::position(lane, i, j, k, 1);
        E lo = convert<E>(src[size_t(row0 + p0.row) * ld + col0 + p0.col]);
        E hi = convert<E>(src[size_t(row0 + p1.row) * ld + col0 + p1.col]);
        tile.data[i][j][k] = make_pair(lo, hi);
      }
}

// dst[(row0 + r) * ld + col0 + c] <- tile, element type converted.
template <class T, class Tile>
__device__ void reference_store(T* dst, int ld, const Tile& tile, int row0 = 0, int col0 = 0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < Tile::height; ++i)
#pragma unroll
    for (int j = 0; j < Tile::width; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        auto p0 = Tile::position(lane, i, j, k, 0);
        auto p1 = Tile::position(lane, i, j, k, 1);
        dst[size_t(row0 + p0.row) * ld + col0 + p0.col] = convert<T>(low(tile.data[i][j][k]));
        dst[size_t(row0 + p1.row) * ld + col0 + p1.col] = convert<T>(high(tile.data[i][j][k]));
      }
}

// Vector I/O by rv::index (replicated entries are written by several lanes with the same value).
template <class Vec, class T>
__device__ void reference_load(Vec& v, const T* src) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < Vec::fragments; ++i)
#pragma unroll
    for (int e = 0; e < Vec::per_fragment; ++e) v.data[i][e] = convert<typename Vec::element>(src[Vec::index(lane, i, e)]);
}
template <class T, class Vec>
__device__ void reference_store(T* dst, const Vec& v) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < Vec::fragments; ++i)
#pragma unroll
    for (int e = 0; e < Vec::per_fragment; ++e) dst[Vec::index(lane, i, e)] = convert<T>(v.data[i][e]);
}

}  // namespace tilekit::testing
