// Builds against an installed tilekit; runs on any machine (no GPU needed).
// main.cu is compiled by nvcc, host.cpp by the host C++ compiler alone.
#include <tilekit/tilekit.cuh>

#include <cstdio>
#include <string>

std::string host_summary();

int main() {
  using tile = tilekit::st_bf<64, 64>;
  static_assert(tile::swizzle_bytes == 128, "a 64-element bf16 row is 128 bytes: the 128-byte swizzle");
  std::printf("tilekit consumer: st_bf<64,64> uses a %d-byte swizzle, %d bytes\n", tile::swizzle_bytes, tile::bytes);
  std::printf("tilekit consumer: %s\n", host_summary().c_str());
  // Row 1 starts one 128-byte row later, at chunk 0 ^ 1 of the 128B swizzle: byte 128 + 16.
  constexpr int expected_row1_offset = 144;
  return tile::offset(1, 0) == expected_row1_offset ? 0 : 1;
}
