// CPU tests of the layout math: shared-tile swizzles, register-fragment
// ownership, register-vector distribution. They run without a GPU.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/rv.cuh"
#include "tilekit/tiles/st.cuh"

using namespace tilekit;

namespace {

// The hardware rule (HOPPER_NOTES 2.1), on absolute byte addresses:
// 128B: a ^ (((a>>7)&7)<<4), 64B: a ^ (((a>>7)&3)<<4), 32B: a ^ (((a>>7)&1)<<4).
uint32_t hardware_swizzle(int swizzle_bytes, uint32_t a) {
  if (swizzle_bytes == 0) return a;
  const uint32_t mask = swizzle_bytes == 128 ? 7 : swizzle_bytes == 64 ? 3 : 1;
  return a ^ (((a >> 7) & mask) << 4);
}

template <class Tile>
void check_shared_tile() {
  using T = typename Tile::element;
  SCOPED_TRACE(testing::Message() << "st<" << dtype_traits<T>::name << ", " << Tile::rows << ", " << Tile::cols
                                  << "> swizzle " << Tile::swizzle_bytes);
  std::set<uint32_t> seen;
  for (int r = 0; r < Tile::rows; ++r) {
    for (int c = 0; c < Tile::cols; ++c) {
      const uint32_t off = Tile::offset(r, c);
      // In range, element aligned, and no two elements share a byte: a bijection.
      ASSERT_LT(off, uint32_t(Tile::bytes));
      ASSERT_EQ(off % sizeof(T), 0u);
      ASSERT_TRUE(seen.insert(off).second) << "offset " << off << " used twice (r=" << r << ", c=" << c << ")";
      // The panel layout TMA writes: panel p of Rows x S bytes, then the
      // hardware swizzle of the unswizzled row-major panel address.
      if constexpr (Tile::swizzle_bytes != 0) {
        constexpr int S = Tile::swizzle_bytes;
        const int byte = c * int(sizeof(T));
        const uint32_t panel_base = uint32_t((byte / S) * Tile::rows * S);
        const uint32_t linear = uint32_t(r * S + byte % S);
        ASSERT_EQ(off, panel_base + hardware_swizzle(S, linear)) << "r=" << r << " c=" << c;
        ASSERT_EQ(panel_base % (8 * S), 0u) << "panels must start on the swizzle repeat";
      } else {
        ASSERT_EQ(off, uint32_t(r * Tile::row_bytes + c * int(sizeof(T))));
      }
    }
  }
  EXPECT_EQ(seen.size(), size_t(Tile::rows * Tile::cols));
  // Chunks (16 B) stay contiguous: elements of one 16-byte chunk keep their order.
  const int per_chunk = 16 / int(sizeof(T));
  for (int r = 0; r < Tile::rows; ++r)
    for (int c = 0; c + 1 < Tile::cols; ++c)
      if ((c + 1) % per_chunk != 0) ASSERT_EQ(Tile::offset(r, c + 1), Tile::offset(r, c) + sizeof(T));
  EXPECT_EQ(alignof(Tile), size_t(Tile::alignment));
  EXPECT_EQ(sizeof(Tile), size_t(Tile::bytes));
}

}  // namespace

TEST(SharedTile, SwizzleDerivedFromRowWidth) {
  EXPECT_EQ((st<bf16, 64, 64>::swizzle_bytes), 128);
  EXPECT_EQ((st<bf16, 64, 128>::swizzle_bytes), 128);
  EXPECT_EQ((st<bf16, 64, 128>::panels), 2);
  EXPECT_EQ((st<bf16, 64, 32>::swizzle_bytes), 64);
  EXPECT_EQ((st<bf16, 64, 16>::swizzle_bytes), 32);
  EXPECT_EQ((st<bf16, 64, 8>::swizzle_bytes), 0);
  EXPECT_EQ((st<float, 64, 32>::swizzle_bytes), 128);
  EXPECT_EQ((st<float, 16, 16>::swizzle_bytes), 64);
  EXPECT_EQ((st<fp8e4m3, 64, 128>::swizzle_bytes), 128);
  EXPECT_EQ((st<bf16, 16, 96>::swizzle_bytes), 64);  // 192-B rows: three 64-B panels
  EXPECT_EQ((st<bf16, 16, 96>::panels), 3);
  EXPECT_EQ((st<bf16, 64, 64>::alignment), 1024);
  EXPECT_EQ((st<bf16, 64, 32>::alignment), 512);
  EXPECT_EQ((st<bf16, 64, 16>::alignment), 256);
  EXPECT_EQ((st<bf16, 64, 8>::alignment), 128);
}

TEST(SharedTile, AddressFunctionIsABijectionMatchingTheHardwarePattern) {
  check_shared_tile<st<bf16, 64, 64>>();
  check_shared_tile<st<bf16, 128, 64>>();
  check_shared_tile<st<bf16, 64, 128>>();
  check_shared_tile<st<bf16, 16, 256>>();
  check_shared_tile<st<bf16, 32, 32>>();
  check_shared_tile<st<bf16, 16, 16>>();
  check_shared_tile<st<bf16, 16, 8>>();
  check_shared_tile<st<bf16, 16, 96>>();
  check_shared_tile<st<fp16, 64, 64>>();
  check_shared_tile<st<float, 64, 32>>();
  check_shared_tile<st<float, 16, 64>>();
  check_shared_tile<st<float, 8, 8>>();
  check_shared_tile<st<fp8e4m3, 64, 128>>();
  check_shared_tile<st<fp8e4m3, 64, 64>>();
}

TEST(SharedTile, WorkedExample128B) {
  // HOPPER_NOTES 1.6: byte(r, k) = 128r + (((k>>3) ^ (r&7)) << 4) + 2*(k&7) for 64x64 bf16.
  using T = st<bf16, 64, 64>;
  for (int r = 0; r < 64; ++r)
    for (int k = 0; k < 64; ++k)
      ASSERT_EQ(T::offset(r, k), uint32_t(128 * r + ((((k >> 3) ^ (r & 7))) << 4) + 2 * (k & 7)));
  // Row 1: logical chunk 0 sits in physical slot 1 (table in st.cuh).
  EXPECT_EQ(T::offset(1, 0), 128u + 16u);
  EXPECT_EQ(T::offset(7, 8), 7u * 128 + (1 ^ 7) * 16);
}

TEST(SharedTile, EightRowsOfAChunkHitDistinctBankGroups) {
  // ldmatrix reads 8 rows x 16 B; with the swizzle they land in 8 different
  // 16-byte bank groups (bank group = (offset / 16) % 8), hence no conflicts.
  using T = st<bf16, 64, 64>;
  for (int chunk = 0; chunk < 8; ++chunk) {
    std::set<int> groups;
    for (int r = 0; r < 8; ++r) groups.insert(int(T::offset(r, chunk * 8) / 16) % 8);
    EXPECT_EQ(groups.size(), 8u) << "chunk " << chunk;
  }
}

namespace {
template <layout L>
void check_fragment_map() {
  std::set<std::pair<int, int>> seen;
  for (int lane = 0; lane < 32; ++lane)
    for (int k = 0; k < 4; ++k)
      for (int h = 0; h < 2; ++h) {
        auto p = fragment_element<L>(lane, k, h);
        ASSERT_GE(p.row, 0);
        ASSERT_LT(p.row, 16);
        ASSERT_GE(p.col, 0);
        ASSERT_LT(p.col, 16);
        ASSERT_TRUE(seen.insert({p.row, p.col}).second);
      }
  EXPECT_EQ(seen.size(), 256u);
}
}  // namespace

TEST(RegisterTile, FragmentOwnershipIsABijection) {
  check_fragment_map<layout::row>();
  check_fragment_map<layout::col>();
}

TEST(RegisterTile, RowLayoutIsTheMmaAFragment) {
  // PTX m16n8k16 A: element i of lane (g,q): row = g + 8*((i>>1)&1), col = 2q + (i&1) + 8*(i>>2);
  // register i/2 holds elements i (low) and i+1 (high): our pair k = i/2, half h = i&1.
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 8; ++i) {
      const int g = lane / 4, q = lane % 4;
      auto p = fragment_element<layout::row>(lane, i / 2, i & 1);
      EXPECT_EQ(p.row, g + 8 * ((i >> 1) & 1));
      EXPECT_EQ(p.col, 2 * q + (i & 1) + 8 * (i >> 2));
    }
}

TEST(RegisterTile, RowLayoutIsTheWgmmaAccumulator) {
  // HOPPER_NOTES 1.8 for one warp (w = 0) of an m64n16 accumulator: register i of
  // lane: row = g + 8*((i>>1)&1), col = 8*(i>>2) + 2q + (i&1). Pairs (i, i+1) are pair k = i/2.
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 8; ++i) {
      const int g = lane / 4, q = lane % 4;
      auto p = fragment_element<layout::row>(lane, i / 2, i & 1);
      EXPECT_EQ(p.row, g + 8 * ((i >> 1) & 1));
      EXPECT_EQ(p.col, 8 * (i >> 2) + 2 * q + (i & 1));
    }
}

TEST(RegisterTile, ColLayoutIsTheMmaBFragment) {
  // PTX m16n8k16 B (k x n): element i: k = 2q + (i&1) + 8*(i>>1), n = g. For the
  // 16x16 col-layout tile, n-block 0 is pairs {0, 2}, n-block 1 is pairs {1, 3}.
  for (int lane = 0; lane < 32; ++lane)
    for (int nb = 0; nb < 2; ++nb)
      for (int i = 0; i < 4; ++i) {
        const int g = lane / 4, q = lane % 4;
        const int k_pair = nb + 2 * (i >> 1);
        auto p = fragment_element<layout::col>(lane, k_pair, i & 1);
        EXPECT_EQ(p.row, 2 * q + (i & 1) + 8 * (i >> 1));
        EXPECT_EQ(p.col, 8 * nb + g);
      }
}

TEST(RegisterTile, ColLayoutIsTheTransposedRowLayout) {
  using A = rt<bf16, 32, 48, layout::col>;
  using B = rt_transposed<A>;
  static_assert(B::rows == 48 && B::cols == 32 && B::tile_layout == layout::row);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < A::height; ++i)
      for (int j = 0; j < A::width; ++j)
        for (int k = 0; k < 4; ++k)
          for (int h = 0; h < 2; ++h) {
            auto a = A::position(lane, i, j, k, h);
            auto b = B::position(lane, j, i, k, h);
            EXPECT_EQ(a.row, b.col);
            EXPECT_EQ(a.col, b.row);
          }
}

TEST(RegisterVector, DistributionsMatchTileRowsAndColumns) {
  using Tile = rt<float, 32, 32, layout::row>;
  using RowV = row_vec<Tile>;
  using ColV = col_vec<Tile>;
  static_assert(RowV::layout_kind == vec_layout::grouped && ColV::layout_kind == vec_layout::paired);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < Tile::height; ++i)
      for (int k = 0; k < 4; ++k)
        for (int h = 0; h < 2; ++h) {
          auto p = Tile::position(lane, i, 0, k, h);
          // The row of pair k is row-vector entry data[i][k & 1].
          EXPECT_EQ(RowV::index(lane, i, k & 1), p.row);
          auto pc = Tile::position(lane, 0, i, k, h);
          // The column of pair k, half h, is column-vector entry data[i][(k>>1)*2 + h].
          EXPECT_EQ(ColV::index(lane, i, (k >> 1) * 2 + h), pc.col);
        }
  using ColTile = rt<float, 32, 32, layout::col>;
  static_assert(row_vec<ColTile>::layout_kind == vec_layout::paired);
  static_assert(col_vec<ColTile>::layout_kind == vec_layout::grouped);
}

TEST(SharedTile, RowBlocksAliasTheParentRows) {
  // A row block of a single-panel tile is a tile of its own with the same swizzle: element
  // (r, c) of block i is element (i*SubRows + r, c) of the parent, byte for byte.
  alignas(1024) static st<bf16, 128, 64> parent;
  for (int i = 0; i < 2; ++i) {
    auto& block = row_block<64>(parent, i);
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) ASSERT_EQ(&block(r, c), &parent(i * 64 + r, c)) << i << " " << r << " " << c;
  }
  alignas(1024) static st<fp8e4m3, 256, 128> wide;
  EXPECT_EQ(&row_block<128>(wide, 1)(5, 77), &wide(133, 77));
}
