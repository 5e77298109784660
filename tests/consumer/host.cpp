// A host-only translation unit (plain C++, no nvcc): downstream C++ code such
// as a framework's dispatch layer includes tilekit headers for the host API
// (device queries, errors, layouts) without being compiled as CUDA.
#include <tilekit/tilekit.cuh>

#include <string>

std::string host_summary() {
  using tile = tilekit::st_bf<64, 64>;
  std::string summary = "host C++: st_bf<64,64> is " + std::to_string(tile::bytes) + " bytes, ";
  try {
    TILEKIT_CHECK_ARG(tile::bytes > 0, "a tile has bytes");
    summary += std::to_string(tilekit::visible_device_count()) + " CUDA device(s) visible";
  } catch (const tilekit::error& failure) {
    summary += failure.what();
  }
  return summary;
}
