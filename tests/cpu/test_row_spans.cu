// How a clustered row is dealt over its CTAs (kernels/common/row_kernel.cuh, row_cluster_span):
// for every cluster class of the row tables and every width of the class, the CTAs' shares
// cover the row exactly, each fits the class's chunk, keeps 16-byte alignment for every element
// type and holds columns, and no CTA holds much less than an even share. These run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/row_kernel.cuh"
#include "cross_entropy/cross_entropy_tables.cuh"

namespace {
namespace tkd = tilekit::kernels::detail;

void check_table(const tkd::row_table& table, const std::string& name) {
  int previous_max = 0;
  for (int i = 0; i < table.count; ++i) {
    const tkd::row_config& c = table.configs[i];
    const int chunk = c.group_threads * c.elements_per_thread;
    const int n = c.cluster_ctas;
    if (n > 1) {
      ASSERT_EQ(chunk % tkd::row_span_granule, 0) << name << " class " << i;
      int checked = 0;
      // Every width of the class near its ends, and a spread in between.
      for (int cols = previous_max + 1; cols <= c.max_cols; ++cols) {
        const bool near_end = cols < previous_max + 200 || cols > c.max_cols - 200;
        if (!near_end && cols % 97 != 0) continue;
        ++checked;
        const int span = tkd::row_cluster_span(cols, n);
        const std::string at = name + " class " + std::to_string(i) + " cols " + std::to_string(cols);
        ASSERT_EQ(span % tkd::row_span_granule, 0) << at;  // 16 elements: 32 bytes of bf16, 64 of fp32
        ASSERT_LE(span, chunk) << at;
        ASSERT_GE(int64_t(span) * n, cols) << at;  // the CTAs cover the row
        int covered = 0;
        for (int rank = 0; rank < n; ++rank) {
          const int held = std::min(span, cols - rank * span);  // row_place::cols of that CTA
          ASSERT_GT(held, 0) << at << " rank " << rank;          // no CTA idle
          // None much below an even share: at most n granules less than cols / n.
          ASSERT_GE(int64_t(held) * n, int64_t(cols) - int64_t(n) * n * tkd::row_span_granule) << at << " rank " << rank;
          covered += held;
        }
        ASSERT_EQ(covered, cols) << at;
      }
      EXPECT_GT(checked, 400) << name << " class " << i;
    }
    previous_max = c.max_cols;
  }
}

TEST(RowSpans, ClustersDealRowsEvenly) {
  check_table(tkd::default_row_table, "default_row_table");
  check_table(tkd::packed_row_table, "packed_row_table");
  check_table(tkd::wide_row_table, "wide_row_table");
  check_table(tkd::fused_packed_table, "fused_packed_table");  // clusters of 4, 5 and 8
  check_table(tkd::fused_wide_table, "fused_wide_table");      // the fp16 forward with dlogits
}

// A cluster of 5 (fused_packed_table's class 9, 131073-163840 columns): the even shares at the
// widths that matter, every CTA holding columns.
TEST(RowSpans, ClustersOfFive) {
  const tkd::row_table& t = tkd::fused_packed_table;
  EXPECT_EQ(t.configs[t.index(131072)].cluster_ctas, 4);
  EXPECT_EQ(t.configs[t.index(131073)].cluster_ctas, 5);
  EXPECT_EQ(t.configs[t.index(151936)].cluster_ctas, 5);
  EXPECT_EQ(t.configs[t.index(163840)].cluster_ctas, 5);
  EXPECT_EQ(t.configs[t.index(163841)].cluster_ctas, 8);
  EXPECT_EQ(t.configs[t.index(262144)].cluster_ctas, 8);
  // The 7-group classes (56 columns per thread).
  EXPECT_EQ(t.configs[t.index(50304)].elements_per_thread, 56);
  EXPECT_EQ(t.configs[t.index(57345)].elements_per_thread, 64);
  EXPECT_EQ(t.configs[t.index(102400)].elements_per_thread, 56);
  EXPECT_EQ(t.configs[t.index(102400)].cluster_ctas, 4);
  EXPECT_EQ(t.configs[t.index(114689)].elements_per_thread, 64);
  EXPECT_EQ(tkd::row_cluster_span(151936, 5), 30400);  // 4 x 30400 + 30336
  EXPECT_EQ(tkd::row_cluster_span(163840, 5), 32768);  // whole chunks at the class's bound
  EXPECT_EQ(tkd::row_cluster_span(131073, 5), 26224);  // 4 x 26224 + 26177
  // fp16 logits (fused_wide_table): the same clusters from 32K on.
  const tkd::row_table& w = tkd::fused_wide_table;
  EXPECT_EQ(w.index(151936), 9);
  for (int cols : {32768, 32769, 65536, 65537, 131072, 131073, 151936, 163840, 163841, 262144})
    EXPECT_EQ(w.configs[w.index(cols)].cluster_ctas, t.configs[t.index(cols)].cluster_ctas) << cols;
}

// The backward of 16-bit logits (backward_wide_table): default_row_table's clusters of 8 and 16
// CTAs of 16384 columns, with 5 CTAs of 32768 between them, at the forward's class edges, so that
// both kernels deal a vocabulary of this class over the same CTA spans.
TEST(RowSpans, BackwardClustersOfFive) {
  const tkd::row_table& t = tkd::backward_wide_table;
  const tkd::row_table& f = tkd::fused_packed_table;
  EXPECT_EQ(t.configs[t.index(131072)].cluster_ctas, 8);
  EXPECT_EQ(t.configs[t.index(131072)].elements_per_thread, 32);
  for (int cols : {131073, 151936, 163840}) {
    const tkd::row_config& c = t.configs[t.index(cols)];
    EXPECT_EQ(c.cluster_ctas, 5) << cols;
    EXPECT_EQ(c.elements_per_thread, 64) << cols;
    EXPECT_TRUE(c.pairs) << cols;
    EXPECT_EQ(c.cluster_ctas, f.configs[f.index(cols)].cluster_ctas) << cols;
  }
  EXPECT_EQ(t.configs[t.index(163841)].cluster_ctas, 16);
  EXPECT_EQ(t.configs[t.index(262144)].cluster_ctas, 16);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(t.configs[i].max_cols, tkd::default_row_table.configs[i].max_cols);
}

// with_class_inserted moves the classes from its index up by one and keeps the table well formed;
// well_formed rejects what the row kernel cannot run.
TEST(RowSpans, InsertedClassAndWellFormedTables) {
  const tkd::row_table t = tkd::with_class_inserted(tkd::packed_row_table, 9, {163840, 512, 1, 5, 64, true});
  ASSERT_EQ(t.count, tkd::packed_row_table.count + 1);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(t.configs[i].max_cols, tkd::packed_row_table.configs[i].max_cols);
  EXPECT_EQ(t.configs[9].cluster_ctas, 5);
  EXPECT_EQ(t.configs[10].max_cols, 262144);
  EXPECT_EQ(t.configs[10].cluster_ctas, 8);
  EXPECT_TRUE(t.well_formed());
  EXPECT_EQ(t.index(163840), 9);
  EXPECT_EQ(t.index(163841), 10);
  // Out of order, a layout too small for its class, a cluster of CTAs that share it with other
  // rows, a last class short of row_max_cols: each not well formed.
  EXPECT_FALSE(tkd::with_class_inserted(tkd::packed_row_table, 9, {100000, 512, 1, 5, 64, true}).well_formed());
  EXPECT_FALSE(tkd::with_class_inserted(tkd::packed_row_table, 9, {163840, 512, 1, 4, 64, true}).well_formed());
  EXPECT_FALSE(tkd::with_class_inserted(tkd::packed_row_table, 9, {163840, 256, 1, 10, 64, true}).well_formed());
  // No room (a full table) or an index past the classes: an exception, not a write past the array.
  tkd::row_table full = t;
  while (full.count < tkd::max_row_configs) full = tkd::with_class_inserted(full, 9, full.configs[9]);
  EXPECT_THROW(tkd::with_class_inserted(full, 5, {4096, 64, 1, 1, 64, true}), std::invalid_argument);
  EXPECT_THROW(tkd::with_class_inserted(tkd::packed_row_table, 12, {262144, 512, 1, 8, 64, true}),
               std::invalid_argument);
  tkd::row_table short_table = tkd::packed_row_table;
  short_table.count = 9;
  EXPECT_FALSE(short_table.well_formed());
}

TEST(RowSpans, Examples) {
  EXPECT_EQ(tkd::row_cluster_span(50304, 4), 12576);   // 4 x 12576
  EXPECT_EQ(tkd::row_cluster_span(50257, 4), 12576);   // 3 x 12576 + 12529
  EXPECT_EQ(tkd::row_cluster_span(200000, 16), 12512); // 15 x 12512 + 12320
  EXPECT_EQ(tkd::row_cluster_span(262144, 16), 16384); // whole chunks at the class's bound
  EXPECT_EQ(tkd::row_cluster_span(65536, 2), 32768);
}

}  // namespace
