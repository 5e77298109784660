#pragma once
// Host-side device queries. Everything here reads attributes (never
// cudaDeviceProp fields removed in CUDA 13, see HOPPER_NOTES 9.3) and never
// synchronizes, so it is safe to call from host APIs under graph capture.

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "tilekit/core/error.cuh"

namespace tilekit {

struct device_info {
  int ordinal = -1;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int l2_bytes = 0;
  int max_shared_per_block_optin = 0;  // bytes a block may use after cudaFuncSetAttribute
  int max_shared_per_sm = 0;
  int clock_khz = 0;
  std::string name;

  bool is_hopper() const { return cc_major == 9 && cc_minor == 0; }
};

namespace detail {
inline device_info read_device_info(int ordinal) {
  device_info d;
  d.ordinal = ordinal;
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    TILEKIT_CHECK_CUDA(cudaDeviceGetAttribute(&v, a, ordinal));
    return v;
  };
  d.cc_major = attr(cudaDevAttrComputeCapabilityMajor);
  d.cc_minor = attr(cudaDevAttrComputeCapabilityMinor);
  d.sm_count = attr(cudaDevAttrMultiProcessorCount);
  d.l2_bytes = attr(cudaDevAttrL2CacheSize);
  d.max_shared_per_block_optin = attr(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  d.max_shared_per_sm = attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  d.clock_khz = attr(cudaDevAttrClockRate);
  cudaDeviceProp prop{};
  TILEKIT_CHECK_CUDA(cudaGetDeviceProperties(&prop, ordinal));
  d.name = prop.name;
  return d;
}
}  // namespace detail

// Attributes of `ordinal` (or of the current device when ordinal < 0). Read once per
// device and cached: cudaGetDeviceProperties costs far more than a kernel launch, and host
// APIs call this on every launch.
inline device_info query_device(int ordinal = -1) {
  if (ordinal < 0) TILEKIT_CHECK_CUDA(cudaGetDevice(&ordinal));
  static std::mutex mutex;
  static std::map<int, device_info> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(ordinal);
  if (it == cache.end()) it = cache.emplace(ordinal, detail::read_device_info(ordinal)).first;
  return it->second;
}

// Number of visible devices; 0 (not an exception) when there is no driver or GPU.
inline int visible_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" state
    return 0;
  }
  return n;
}

// Why device `ordinal` cannot run tilekit's sm_90 kernels, or "" when it can: no usable driver
// or GPU, no such device, or not compute capability 9.0. Tests (skip reason), benchmarks and
// examples all report this one text. A failed device query's sticky error is cleared.
inline std::string hopper_unavailable_reason(int ordinal = 0) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return detail::concat("no usable CUDA device (", cudaGetErrorName(status), ": ", cudaGetErrorString(status),
                          ")");
  }
  if (count == 0) return "no CUDA device is visible";
  if (ordinal < 0 || ordinal >= count)
    return detail::concat("device ", ordinal, " was asked for, but only ", count, " device(s) are visible");
  const device_info d = query_device(ordinal);
  if (!d.is_hopper())
    return detail::concat("device ", ordinal, " is ", d.name, " (sm_", d.cc_major, d.cc_minor,
                          "), tilekit needs sm_90 (H100/H200)");
  return "";
}

// True when the environment asks for GPU work to be mandatory (TILEKIT_REQUIRE_GPU=1, set on
// GPU machines): tests and examples then fail instead of skipping when no sm_90 GPU is present.
inline bool gpu_required_by_environment() {
  const char* value = std::getenv("TILEKIT_REQUIRE_GPU");
  return value != nullptr && std::string(value) == "1";
}

// True when a compute capability 9.0 device (H100/H200) is the current device.
inline bool current_device_is_hopper() {
  if (visible_device_count() == 0) return false;
  return query_device().is_hopper();
}

}  // namespace tilekit
