#include "common/gpu_test.cuh"

#include <cstdlib>
#include <functional>

#include "tilekit/core/device.cuh"

namespace tilekit::testing {

std::string gpu_unavailable_reason() {
  static const std::string reason = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("no usable CUDA device (") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
    }
    if (n == 0) return std::string("no CUDA device");
    const device_info d = query_device(0);
    if (!d.is_hopper())
      return "device 0 is " + d.name + " (sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor) +
             "), tilekit needs sm_90";
    return std::string();
  }();
  return reason;
}

bool gpu_required() { return gpu_required_by_environment(); }

uint64_t test_seed() {
  uint64_t base = 20261129;
  if (const char* v = std::getenv("TILEKIT_TEST_SEED")) base = std::strtoull(v, nullptr, 10);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "";
  return base ^ std::hash<std::string>{}(name);
}

}  // namespace tilekit::testing
