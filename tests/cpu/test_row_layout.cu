// CPU tests of the row-chunk register layout of the memory-bound kernels
// (ops/row_io.cuh): every column of the chunk is owned by exactly one
// (thread, register), groups are contiguous 16-byte vectors, and a warp's
// accesses to one group index are contiguous (coalesced).
#include <gtest/gtest.h>

#include <vector>

#include "tilekit/ops/row_io.cuh"

using namespace tilekit;

namespace {

template <class Layout>
void check_layout() {
  SCOPED_TRACE(::testing::Message() << "row_layout<" << Layout::threads << ", " << Layout::groups << ", "
                                    << Layout::group_elements << ">");
  std::vector<int> owners(Layout::columns, 0);
  for (int t = 0; t < Layout::threads; ++t)
    for (int j = 0; j < Layout::elements; ++j) {
      const int c = Layout::column(t, j);
      ASSERT_GE(c, 0);
      ASSERT_LT(c, Layout::columns);
      ++owners[c];
      // Registers of one group are consecutive columns starting at group_column.
      const int g = j / Layout::group_elements;
      EXPECT_EQ(c, Layout::group_column(t, g) + j % Layout::group_elements);
    }
  for (int c = 0; c < Layout::columns; ++c) ASSERT_EQ(owners[c], 1) << "column " << c;
  // Group g of consecutive threads covers consecutive columns: one warp access is contiguous.
  for (int g = 0; g < Layout::groups; ++g)
    for (int t = 0; t + 1 < Layout::threads; ++t)
      EXPECT_EQ(Layout::group_column(t + 1, g), Layout::group_column(t, g) + Layout::group_elements);
}

}  // namespace

TEST(RowLayout, EveryColumnHasExactlyOneOwner) {
  check_layout<row_layout<4, 2, 8>>();
  check_layout<row_layout<32, 4, vector_elements<bf16>>>();
  check_layout<row_layout<256, 4, vector_elements<bf16>>>();
  check_layout<row_layout<512, 8, vector_elements<float>>>();
  check_layout<row_layout<1, 1, 1>>();
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
