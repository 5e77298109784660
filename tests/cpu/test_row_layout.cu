// CPU tests of the row-chunk register layout of the memory-bound kernels
// (ops/row_io.cuh): every column of the chunk is owned by exactly one
// (thread, register), the one owner() names; groups are contiguous 16-byte
// vectors; a warp's accesses to one group index are contiguous (coalesced);
// in warp-blocked layouts each warp's columns are one stretch (lane 31's
// group g is followed by lane 0's group g + 1); and row_piece<L> at
// n x group_stride holds exactly group n's registers. And the bookkeeping of the order-free
// loads of shifted rows (held_columns): the registers it says hold a column name each column of
// the chunk exactly once, as the stage position they read (the lead's from the extra unit), and
// all() is true exactly where every register holds one.
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

// held_columns of an order-free load of a shifted chunk (E-element units, `shift` elements in)
// and of the ordered loads (shift 0), for every shift and `cols` cutting the chunk anywhere.
template <class Layout, int E>
void check_held_columns() {
  SCOPED_TRACE(::testing::Message() << "row_layout<" << Layout::threads << ", " << Layout::groups << ", "
                                    << Layout::group_elements << ", " << Layout::block_threads << ">, E " << E);
  constexpr int C = Layout::columns;
  for (int shift = 0; shift < E; ++shift)
    for (int cols : {-3, 0, 1, E - 1, E, E + 1, C / 2 + 3, C - E - 1, C - E + 1, C - 2, C - 1, C, C + 1, C + 9}) {
      SCOPED_TRACE(::testing::Message() << "shift " << shift << ", cols " << cols);
      const int held_cols = cols < 0 ? 0 : (cols < C ? cols : C);
      const auto held = detail::unordered_columns<Layout>(shifted_row<bf16>{nullptr, shift}, cols);
      const held_columns<Layout, false> ordered{cols};
      std::vector<int> seen(C, 0);
      for (int t = 0; t < Layout::threads; ++t) {
        bool every = true, every_ordered = true;
        for (int j = 0; j < Layout::elements; ++j) {
          const int p = Layout::column(t, j);
          // The stage position register j reads: its own, or for the lead (the first E registers
          // of column 0's owner, below shift) the extra unit's.
          const int position = (p < shift && Layout::owner(0) == uint32_t(t)) ? C + p : p;
          const int column = position - shift;
          const bool inside = column >= 0 && column < held_cols;
          ASSERT_EQ(held.holds(t, j), inside) << "thread " << t << " register " << j;
          if (inside) {
            EXPECT_EQ(held.column(t, j), column) << "thread " << t << " register " << j;
            ++seen[column];
          }
          every = every && inside;
          EXPECT_EQ(ordered.holds(t, j), p < cols);
          EXPECT_EQ(ordered.column(t, j), p);
          every_ordered = every_ordered && p < cols;
        }
        EXPECT_EQ(held.all(t), every) << "thread " << t;
        EXPECT_EQ(ordered.all(t), every_ordered) << "thread " << t;
      }
      for (int c = 0; c < C; ++c) ASSERT_EQ(seen[c], c < held_cols ? 1 : 0) << "column " << c;
    }
}

}  // namespace

TEST(RowLayout, HeldColumnsOfOrderFreeLoads) {
  check_held_columns<row_layout<2, 2, 8>, 8>();  // row_io.cuh's example
  check_held_columns<row_layout<32, 4, 8>, 8>();
  check_held_columns<warp_blocked_row_layout<64, 2, 8>, 8>();
  check_held_columns<warp_blocked_row_layout<128, 8, 8>, 8>();  // 64 bf16 columns per thread
  check_held_columns<warp_blocked_row_layout<128, 2, 4>, 4>();  // fp32 units
  check_held_columns<warp_blocked_row_layout<64, 2, 16>, 8>();  // two units per group
  // The documented example: thread 0's lead holds the tail's columns 29, 30, 31.
  const auto held = detail::unordered_columns<row_layout<2, 2, 8>>(shifted_row<bf16>{nullptr, 3}, 40);
  EXPECT_EQ(held.column(0, 0), 29);
  EXPECT_EQ(held.column(0, 2), 31);
  EXPECT_EQ(held.column(0, 3), 0);
  EXPECT_EQ(held.column(0, 8), 13);
  EXPECT_EQ(held.column(1, 0), 5);
}

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
