// CPU test of plan_shifted_span (tilekit/pipeline/row_stream.cuh): how a shifted row stream
// copies a run of elements [first, end) of a matrix that spans [lo, hi). For every placement of
// the run and of the matrix's ends around 16-byte boundaries (2- and 4-byte elements): the bulk
// copy is 16-byte aligned and stays inside [lo, hi); bulk copy, head and tail cover each element
// of the run exactly once; the head and the tail hold less than one unit each and only exist
// where a whole-unit copy would leave the matrix; everything lands inside the units from
// `unit0` on that the stage row holds.
#include <gtest/gtest.h>

#include <cstdint>

#include "tilekit/pipeline/row_stream.cuh"

using namespace tilekit;

namespace {

void check_all(uintptr_t size) {
  constexpr uintptr_t unit = 16, base = 4096;
  int cases = 0;
  for (uintptr_t lo = base; lo < base + 2 * unit; lo += size)
    for (uintptr_t first = lo; first < lo + 3 * unit; first += size)
      for (uintptr_t end = first + size; end < first + 5 * unit; end += size)
        for (uintptr_t hi = end; hi < end + 2 * unit; hi += size) {
          ++cases;
          const shifted_span s = plan_shifted_span(first, end, lo, hi);
          SCOPED_TRACE(::testing::Message() << "lo " << lo - base << " first " << first - base << " end "
                                            << end - base << " hi " << hi - base << " size " << size);
          const uintptr_t g0 = first / unit * unit, g1 = (end + unit - 1) / unit * unit;
          ASSERT_EQ(s.unit0, g0);
          const bool bulk = s.bulk_end > s.bulk_begin;
          if (bulk) {
            ASSERT_EQ(s.bulk_begin % unit, 0u);
            ASSERT_EQ(s.bulk_end % unit, 0u);
            ASSERT_GE(s.bulk_begin, lo);
            ASSERT_LE(s.bulk_end, hi);
            ASSERT_GE(s.bulk_begin, g0);
            ASSERT_LE(s.bulk_end, g1);
          }
          ASSERT_LE(first, s.head_end);
          ASSERT_LE(s.head_end, s.tail_begin);
          ASSERT_LE(s.tail_begin, end);
          ASSERT_LT(s.head_end - first, unit);
          ASSERT_LT(end - s.tail_begin, unit);
          // Each element of the run exactly once.
          for (uintptr_t a = first; a < end; a += size) {
            const int covered =
                int(a < s.head_end) + int(a >= s.tail_begin) + int(bulk && a >= s.bulk_begin && a < s.bulk_end);
            ASSERT_EQ(covered, 1) << "element at " << a - base;
          }
          // By hand only where a whole-unit copy would leave the matrix.
          if (g0 >= lo && g1 <= hi) {
            ASSERT_EQ(s.head_end, first);
            ASSERT_EQ(s.tail_begin, end);
          }
        }
  EXPECT_GT(cases, 10000);
}

TEST(ShiftedSpan, TwoByteElements) { check_all(2); }
TEST(ShiftedSpan, FourByteElements) { check_all(4); }

}  // namespace
