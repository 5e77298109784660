#pragma once
// Owning wrappers for the CUDA objects a benchmark creates: device memory, a
// stream, an event. Benchmarks allocate inputs once per benchmark function and
// let these free them, so an exception thrown by a CUDA check leaks nothing.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "tilekit/core/error.cuh"

namespace tilekit::bench {

// `count` elements of T in device memory, uninitialised (benchmarks fill their
// inputs with fill_uniform from random.cuh; outputs need no poisoning here,
// correctness is the tests' job).
template <class T>
class device_array {
 public:
  device_array() = default;
  explicit device_array(size_t count) : count_(count) {
    if (count_ > 0) TILEKIT_CHECK_CUDA(cudaMalloc(&data_, count_ * sizeof(T)));
  }
  ~device_array() { release(); }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  device_array(device_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  device_array& operator=(device_array&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  void release() {
    if (data_) (void)cudaFree(data_);  // never throw from a destructor
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  size_t count_ = 0;
};

// A non-blocking stream, so timings never serialise with the legacy default stream.
class cuda_stream {
 public:
  cuda_stream() { TILEKIT_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~cuda_stream() { (void)cudaStreamDestroy(stream_); }
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }  // NOLINT: used wherever a cudaStream_t is expected
  void synchronize() const { TILEKIT_CHECK_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event with timing enabled (the default flags).
class cuda_event {
 public:
  cuda_event() { TILEKIT_CHECK_CUDA(cudaEventCreate(&event_)); }
  ~cuda_event() { (void)cudaEventDestroy(event_); }
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const { TILEKIT_CHECK_CUDA(cudaEventRecord(event_, stream)); }

 private:
  cudaEvent_t event_ = nullptr;
};

// Seconds between two recorded events (waits for `stop`).
inline double elapsed_seconds(const cuda_event& start, const cuda_event& stop) {
  constexpr double seconds_per_millisecond = 1e-3;
  TILEKIT_CHECK_CUDA(cudaEventSynchronize(stop.get()));
  float milliseconds = 0.f;
  TILEKIT_CHECK_CUDA(cudaEventElapsedTime(&milliseconds, start.get(), stop.get()));
  return double(milliseconds) * seconds_per_millisecond;
}

}  // namespace tilekit::bench
