#pragma once
// Keeping the L2 cache from flattering a benchmark.
//
// H100/H200 have a 50-60 MiB L2. A benchmark that launches the same kernel on
// the same small inputs back to back reads them from L2 after the first run
// and reports a bandwidth HBM cannot deliver. Two remedies, pick by case:
//
//  * rotating inputs (rotating_buffer, rotation_copies): K copies of the
//    inputs, K chosen so that between two uses of one copy the other copies
//    (K-1 sets >= 2x L2) have evicted it. Nothing runs between timed launches,
//    so launches can be timed back to back. Use it for memory-bound kernels
//    whose inputs are smaller than ~4x L2 (norms, softmax on small batches).
//  * an L2 flush (l2_flusher, timing_options::flush_l2): before each timed
//    run, outside the timed region, a sweep over a buffer of 2x L2. Costs no
//    extra input memory and works for kernels that update in place; costs
//    ~2x L2 / HBM bandwidth (~30-50 us) of wall time per iteration. Use it for
//    compute-bound kernels (GEMM, attention), whose operands would otherwise
//    sit in L2 between runs, and when rotating is awkward.
//  * neither, when the inputs are far larger than L2 (>= 4x): the kernel's own
//    traffic evicts them (the copy ceiling uses 2 GiB buffers for this reason).
//
// Why the flush READS its buffer instead of cudaMemsetAsync-ing it each time:
// L2 is write-back, so a memset leaves up to a whole L2 of dirty lines, and
// the timed kernel then pays for writing them back to HBM (~60 MiB of extra
// write traffic, 10% of a 256 MiB copy). A read sweep of 2x L2 (the buffer is
// memset once, at allocation) leaves L2 full of clean, unrelated lines, and
// any dirty lines from the previous timed run are written back during the
// sweep, not during the next timed run.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "harness/cuda_resources.cuh"
#include "harness/random.cuh"
#include "tilekit/core/device.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/util.cuh"

namespace tilekit::bench {

// Buffers of this many times the L2 size are large enough to evict it: L2 is
// not a strict LRU, so one L2's worth of traffic can leave lines behind.
inline constexpr size_t l2_eviction_factor = 2;

inline size_t current_l2_bytes() { return size_t(query_device().l2_bytes); }

// Reads every 16-byte word of `words` once. The buffer holds zeros, so the
// store never happens, but the compiler cannot know that and keeps the loads.
template <class Word = uint4>
__global__ void l2_evict_kernel(const Word* __restrict__ words, size_t count, unsigned* __restrict__ sink) {
  unsigned folded = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const Word w = __ldcg(words + i);  // .cg: cache in L2 only, the level we want to fill
    folded ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (folded != 0) *sink = folded;
}

class l2_flusher {
 public:
  // A flusher for the current device: a buffer of l2_eviction_factor x L2.
  l2_flusher() : buffer_(ceil_div(l2_eviction_factor * current_l2_bytes(), sizeof(uint4))), sink_(1) {
    TILEKIT_CHECK_CUDA(cudaMemset(buffer_.data(), 0, buffer_.bytes()));
    TILEKIT_CHECK_CUDA(cudaMemset(sink_.data(), 0, sink_.bytes()));
    // The memsets ran on the legacy default stream, which benchmarks' non-blocking
    // streams do not wait for: finish them before the first flush reads the buffer.
    TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
    constexpr int blocks_per_sm = 8;
    blocks_ = query_device().sm_count * blocks_per_sm;
  }

  // The process-wide flusher of the current device (benchmarks use one device).
  static l2_flusher& instance() {
    static l2_flusher flusher;
    return flusher;
  }

  // Enqueues the sweep on `stream`; the caller keeps it outside its timed region.
  void flush(cudaStream_t stream) const {
    constexpr int threads = 512;
    l2_evict_kernel<<<blocks_, threads, 0, stream>>>(buffer_.data(), buffer_.size(), sink_.data());
    TILEKIT_CHECK_LAUNCH("l2_evict_kernel");
  }

  size_t bytes() const { return buffer_.bytes(); }

 private:
  device_array<uint4> buffer_;
  device_array<unsigned> sink_;
  int blocks_ = 0;
};

// How many copies of an input set of `set_bytes` a rotation needs so that a
// copy is evicted before it is used again: the other K-1 copies must cover
// l2_eviction_factor x L2. 1 (no rotation) when one set already does.
inline int rotation_copies(size_t set_bytes, size_t l2_bytes = current_l2_bytes()) {
  const size_t eviction_bytes = l2_eviction_factor * l2_bytes;
  if (set_bytes == 0) return 1;
  if (set_bytes >= eviction_bytes) return 1;
  return int(ceil_div(eviction_bytes, set_bytes)) + 1;
}

// `copies` copies of an input of `count` elements, in one allocation. Give
// every input tensor of a kernel the same `copies` (from rotation_copies of
// the whole input set) and use copy(i % copies) for the i-th launch:
//
//   const int copies = rotation_copies(x_bytes + weight_bytes);
//   rotating_buffer<bf16> x(rows * cols, copies), weight(cols, copies);
//   x.fill_uniform(seed, stream); weight.fill_uniform(seed + 1, stream);
//   int launch = 0;
//   time_on_stream(state, stream, [&] { int i = launch++ % copies; rmsnorm(x.copy(i), weight.copy(i), ...); });
template <class T>
class rotating_buffer {
 public:
  rotating_buffer(size_t count, int copies)
      : count_(count), copies_(std::max(copies, 1)), pitch_(round_up(count, copy_alignment_elements())),
        storage_(pitch_ * size_t(copies_)) {}

  T* copy(int index) const { return storage_.data() + size_t(index % copies_) * pitch_; }
  int copies() const { return copies_; }
  size_t count() const { return count_; }
  size_t total_bytes() const { return storage_.bytes(); }

  // Random values in [lo, hi) in every copy (different values per copy: the
  // statistics, not the bits, are what a kernel's speed may depend on).
  void fill_uniform(uint64_t seed, cudaStream_t stream, float lo = -1.f, float hi = 1.f) {
    for (int i = 0; i < copies_; ++i)
      bench::fill_uniform(copy(i), count_, splitmix64(seed + uint64_t(i)), stream, lo, hi);
  }

 private:
  // Every copy starts on a 256-byte boundary, as cudaMalloc's own allocations
  // do, so kernels with vectorised or TMA loads accept any copy.
  static constexpr size_t copy_alignment_bytes = 256;
  static constexpr size_t copy_alignment_elements() {
    static_assert(copy_alignment_bytes % sizeof(T) == 0, "rotating_buffer: element size must divide 256 bytes");
    return copy_alignment_bytes / sizeof(T);
  }

  size_t count_;
  int copies_;
  size_t pitch_;
  device_array<T> storage_;
};

}  // namespace tilekit::bench
