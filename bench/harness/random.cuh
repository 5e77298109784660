#pragma once
// Random benchmark inputs generated on the device. Inputs are never all zeros:
// tensor-core power draw (and so the sustained clock) depends on the data, and
// a GEMM on zeros reports a rate no real workload reaches.
//
// The generator is a counter-based hash (splitmix64 finaliser of seed + index),
// so filling is one pass at memory bandwidth with no generator state, and the
// same (seed, index) always gives the same value.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/util.cuh"

namespace tilekit::bench {

TILEKIT_HOST_DEVICE constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A float in [0, 1) from the top 24 bits of a hash (exactly representable).
TILEKIT_HOST_DEVICE constexpr float unit_float(uint64_t hash) {
  constexpr int mantissa_bits = 24;
  constexpr float scale = 1.0f / float(1u << mantissa_bits);
  return float(hash >> (64 - mantissa_bits)) * scale;
}

#if defined(__CUDACC__)
template <class T>
__global__ void fill_uniform_kernel(T* out, size_t count, uint64_t seed, float lo, float hi) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = convert<T>(lo + (hi - lo) * unit_float(splitmix64(seed ^ splitmix64(i))));
}

// Fills out[0, count) with values uniform in [lo, hi), rounded to T.
template <class T>
void fill_uniform(T* out, size_t count, uint64_t seed, cudaStream_t stream, float lo = -1.f, float hi = 1.f) {
  if (count == 0) return;
  constexpr int threads = 256;
  // Enough blocks to fill every SM several times over; the grid-stride loop covers the rest.
  constexpr size_t max_blocks = 8192;
  const unsigned blocks = unsigned(std::min(ceil_div(count, size_t(threads)), max_blocks));
  fill_uniform_kernel<T><<<blocks, threads, 0, stream>>>(out, count, seed, lo, hi);
  TILEKIT_CHECK_LAUNCH("fill_uniform_kernel");
}
#endif

}  // namespace tilekit::bench
