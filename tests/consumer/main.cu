// Builds against an installed tilekit; runs on any machine (no GPU needed).
#include <tilekit/tilekit.cuh>

#include <cstdio>

int main() {
  using tile = tilekit::st_bf<64, 64>;
  static_assert(tile::swizzle_bytes == 128);
  std::printf("tilekit consumer: st_bf<64,64> uses a %d-byte swizzle, %d bytes\n", tile::swizzle_bytes, tile::bytes);
  return tile::offset(1, 0) == 144 ? 0 : 1;
}
