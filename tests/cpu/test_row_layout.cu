// CPU tests of the row-chunk register layout of the memory-bound kernels
// (ops/row_io.cuh): every column of the chunk is owned by exactly one
// (thread, register), the one owner() names; groups are contiguous 16-byte
// vectors; a warp's accesses to one group index are contiguous (coalesced);
// in warp-blocked layouts each warp's columns are one stretch (lane 31's
// group g is followed by lane 0's group g + 1); and row_piece<L> at
// n x group_stride holds exactly group n's registers.
#include <gtest/gtest.h>

#include <type_traits>
#include <vector>

#include "tilekit/ops/row_io.cuh"

using namespace tilekit;

namespace {

template <class Layout>
void check_layout() {
  SCOPED_TRACE(::testing::Message() << "row_layout<" << Layout::threads << ", " << Layout::groups << ", "
                                    << Layout::group_elements << ", " << Layout::block_threads << ">");
  ASSERT_EQ(Layout::columns, Layout::threads * Layout::elements);
  std::vector<int> owners(Layout::columns, 0);
  for (int t = 0; t < Layout::threads; ++t)
    for (int j = 0; j < Layout::elements; ++j) {
      const int c = Layout::column(t, j);
      ASSERT_GE(c, 0);
      ASSERT_LT(c, Layout::columns);
      ++owners[c];
      EXPECT_EQ(Layout::owner(c), uint32_t(t)) << "column " << c;
      // Registers of one group are consecutive columns starting at group_column.
      const int g = j / Layout::group_elements;
      EXPECT_EQ(c, Layout::group_column(t, g) + j % Layout::group_elements);
    }
  for (int c = 0; c < Layout::columns; ++c) ASSERT_EQ(owners[c], 1) << "column " << c;
  // Group g of consecutive threads of a block covers consecutive columns: one warp access is
  // contiguous. A block's last thread's group g is followed by its first thread's group g + 1.
  const int block = Layout::block_threads;
  for (int g = 0; g < Layout::groups; ++g)
    for (int t = 0; t + 1 < Layout::threads; ++t)
      if ((t + 1) % block != 0)
        EXPECT_EQ(Layout::group_column(t + 1, g), Layout::group_column(t, g) + Layout::group_elements);
      else if (g + 1 < Layout::groups)
        EXPECT_EQ(Layout::group_column(t + 1 - block, g + 1), Layout::group_column(t, g) + Layout::group_elements);
  // Pieces: group n of every thread is row_piece<Layout> shifted by n x group_stride.
  using piece = row_piece<Layout>;
  static_assert(piece::groups == 1 && piece::group_elements == Layout::group_elements);
  for (int n = 0; n < Layout::groups; ++n)
    for (int t = 0; t < Layout::threads; ++t)
      for (int i = 0; i < Layout::group_elements; ++i)
        ASSERT_EQ(n * Layout::group_stride + piece::column(t, i), Layout::column(t, n * Layout::group_elements + i))
            << "piece " << n << ", thread " << t;
}

}  // namespace

TEST(RowLayout, EveryColumnHasExactlyOneOwner) {
  check_layout<row_layout<4, 2, 8>>();
  check_layout<row_layout<32, 4, vector_elements<bf16>>>();
  check_layout<row_layout<256, 4, vector_elements<bf16>>>();
  check_layout<row_layout<512, 8, vector_elements<float>>>();
  check_layout<row_layout<1, 1, 1>>();
  check_layout<warp_blocked_row_layout<64, 2, 8>>();
  check_layout<warp_blocked_row_layout<512, 4, vector_elements<bf16>>>();
  check_layout<warp_blocked_row_layout<512, 8, vector_elements<float>>>();
  check_layout<row_layout<256, 3, 4, 64>>();  // blocks of two warps
}

TEST(RowLayout, WarpBlockedLayouts) {
  // One warp or less: the round-robin layout itself.
  static_assert(std::is_same_v<warp_blocked_row_layout<32, 4, 8>, row_layout<32, 4, 8>>);
  static_assert(std::is_same_v<warp_blocked_row_layout<8, 2, 8>, row_layout<8, 2, 8>>);
  static_assert(std::is_same_v<row_piece<row_layout<256, 4, 8>>, row_layout<256, 1, 8>>);
  // row_io.cuh's example: 64 threads, groups of 8, 2 groups.
  using L = warp_blocked_row_layout<64, 2, 8>;
  EXPECT_EQ(L::column(0, 0), 0);
  EXPECT_EQ(L::column(5, 0), 40);
  EXPECT_EQ(L::column(0, 8), 256);   // lane 0, group 1: after lane 31's group 0
  EXPECT_EQ(L::column(31, 15), 511);
  EXPECT_EQ(L::column(32, 0), 512);  // warp 1 starts its own stretch
  EXPECT_EQ(L::column(63, 15), 1023);
  EXPECT_EQ(L::group_stride, 256);
  EXPECT_EQ(L::block_columns, 512);
  // full(): only the warps whose stretch lies below cols.
  EXPECT_TRUE(L::full(31, 512));
  EXPECT_FALSE(L::full(31, 511));
  EXPECT_TRUE(L::full(32, 1023));  // lane 0 of warp 1 ends at column 775
  EXPECT_TRUE(L::full(62, 1023));  // lane 30 of warp 1 ends at column 1015
  EXPECT_FALSE(L::full(63, 1023));
  // A piece of a warp-blocked layout keeps the warps' stride.
  using P = row_piece<L>;
  EXPECT_EQ(P::column(32, 0), 512);
  EXPECT_EQ(P::columns, 512 + 256);
}

TEST(RowLayout, MatchesTheDocumentedExample) {
  // row_io.cuh: Threads = 4, GroupElements = 8, Groups = 2.
  using L = row_layout<4, 2, 8>;
  EXPECT_EQ(L::column(0, 0), 0);
  EXPECT_EQ(L::column(0, 8), 32);
  EXPECT_EQ(L::column(1, 7), 15);
  EXPECT_EQ(L::column(3, 15), 63);
  EXPECT_EQ(L::columns, 64);
  EXPECT_EQ(vector_elements<bf16>, 8);
  EXPECT_EQ(vector_elements<float>, 4);
  EXPECT_EQ(vector_elements<fp8e4m3>, 16);
}
