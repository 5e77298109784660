// store_row (tilekit/ops/row_io.cuh) at every offset of the row inside its 16-byte unit: the
// aligned path (offset 0), the realigned path of whole warps (Realign = true, 16-byte groups:
// each lane writes the unit that straddles its own and the next, the neighbour's by shuffle;
// pieces at the two ends of each warp's stretch: every group in round-robin layouts of several
// warps, the warp's whole columns in warp-blocked ones) and the element path (Realign = false,
// groups under 16 bytes, or a warp that is not whole at the call). bf16, fp16 and fp32, layouts
// of 1 to 16 warps and 1 to 4 groups, round-robin and warp-blocked, and `cols` cutting the row
// anywhere. The same for store_row_from_pairs (16-bit rows from packed pairs, in blocks of one
// group or all: warp-blocked layouts chain the groups as store_row does) and store_row_pairs
// (the pairs stored as they are: whole 16-byte units when aligned, the realigned writer's
// put_units when chained, else store_row_from_pairs).
//
// Each thread stores exact small integers (column % 200 - 100) from the layout's registers into
// a poisoned buffer; every element of the buffer is checked: the row's columns [0, cols) hold
// their values, everything else (before the row, after cols, after the layout) the poison.
// Layouts of several warps are also stored by ONE warp alone (the first, the last): then exactly
// that warp's columns hold values. So a warp's realigned stores write exactly the columns its
// lanes hold, never another warp's, which is what lets a lane overwrite one of its columns after
// the row's store with only a __syncwarp between (cross_entropy.cu, patch_label_dlogit).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/gpu_test.cuh"
#include "tilekit/ops/row_io.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

float value_of(int column) { return float(column % 200 - 100); }

// How the row is written: store_row, store_row_from_pairs (blocks of one group, or of all
// groups), or store_row_pairs.
enum class mode { store_row, pairs_by_group, pairs_whole, pairs_as_is };

// `half_warps`: only lanes 0-15 of each warp store (the others skip the call), so the warp is
// not whole at the call and the stores take their element path. `only_warp` >= 0: only that warp
// stores.
template <class T, class Layout, bool Realign, mode Mode>
__global__ void store_kernel(T* out, int offset, int cols, bool half_warps, int only_warp) {
  float v[Layout::elements];
#pragma unroll
  for (int j = 0; j < Layout::elements; ++j) v[j] = float(Layout::column(threadIdx.x, j) % 200 - 100);
  if (half_warps && laneid() >= 16) return;
  if (only_warp >= 0 && int(threadIdx.x) / 32 != only_warp) return;
  if constexpr (Mode == mode::store_row) {
    store_row<Layout, cache_policy::streaming, Realign>(out + offset, v, cols, threadIdx.x);
  } else if constexpr (Mode == mode::pairs_as_is) {
    packed_t<T> pairs[Layout::elements / 2];
#pragma unroll
    for (int i = 0; i < Layout::elements / 2; ++i) pairs[i] = make_pair<T>(convert<T>(v[2 * i]), convert<T>(v[2 * i + 1]));
    store_row_pairs<Layout, cache_policy::streaming, Realign>(out + offset, pairs, cols, threadIdx.x);
  } else {
    packed_t<T> pairs[Layout::elements / 2];
#pragma unroll
    for (int i = 0; i < Layout::elements / 2; ++i)
      pairs[i] = make_pair<T>(convert<T>(v[2 * i] - 1.0f), convert<T>(v[2 * i + 1] - 1.0f));
    constexpr int block_groups = Mode == mode::pairs_by_group ? 1 : Layout::groups;
    store_row_from_pairs<Layout, block_groups, cache_policy::streaming, Realign>(
        out + offset, pairs, [](float x) { return x + 1.0f; }, cols, threadIdx.x);
  }
}

template <class T, class Layout, bool Realign, mode Mode>
int run_case(int offset, int cols, bool half_warps, int only_warp = -1) {
  const int span = offset + Layout::columns + 32;
  device_buffer<T> out{size_t(span)};  // poisoned
  store_kernel<T, Layout, Realign, Mode><<<1, Layout::threads>>>(out.get(), offset, cols, half_warps, only_warp);
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<T> got = out.download();
  std::vector<bool> stored(size_t(Layout::columns), false);
  for (int t = 0; t < Layout::threads; ++t)
    if ((!half_warps || t % 32 < 16) && (only_warp < 0 || t / 32 == only_warp))
      for (int j = 0; j < Layout::elements; ++j) stored[size_t(Layout::column(t, j))] = true;
  int bad = 0;
  for (int i = 0; i < span; ++i) {
    const int c = i - offset;
    const bool written = c >= 0 && c < std::min(cols, int(Layout::columns)) && stored[size_t(c)];
    const uint32_t want = written ? raw_bits(convert<T>(value_of(c))) : poison_bits<T>();
    const uint32_t have = raw_bits(got[size_t(i)]);
    if (have != want && ++bad <= 5)
      ADD_FAILURE() << "element " << i << " (column " << c << "): 0x" << std::hex << have << " want 0x" << want
                    << std::dec << " (" << Layout::threads << " threads, " << Layout::groups << " groups of "
                    << Layout::group_elements << (Layout::blocks > 1 ? ", warp-blocked" : "") << ", offset "
                    << offset << ", cols " << cols << (half_warps ? ", half warps" : "")
                    << (only_warp >= 0 ? ", only warp " + std::to_string(only_warp) : std::string())
                    << (Realign ? ", realign" : "") << ", mode " << int(Mode) << ")";
  }
  return bad;
}

template <class T, class Layout, mode Mode = mode::store_row>
void every_case() {
  constexpr int E = 16 / int(sizeof(T));
  constexpr int n = Layout::columns;
  constexpr int w = 32 * Layout::group_elements;
  constexpr int warps = Layout::threads / 32;
  int bad = 0;
  for (int offset = 0; offset < E; ++offset) {
    // (w + 2: just past the first unit of lane 0's second group, or of the second warp, whose
    // head is a piece)
    for (int cols : {1, E - 1, E, E + 1, w + 2, n / 2 + 3, n - E - 1, n - 1, n, n + 5})
      for (bool half : {false, true}) {
        bad += run_case<T, Layout, true, Mode>(offset, cols, half);
        bad += run_case<T, Layout, false, Mode>(offset, cols, half);
        if (bad > 20) return;
      }
    for (int cols : {w + 2, n - E - 1, n - 1, n})
      if constexpr (warps > 1)
        for (int only : {0, warps - 1}) bad += run_case<T, Layout, true, Mode>(offset, cols, false, only);
  }
  EXPECT_EQ(bad, 0);
}
// Every mode: store_row and, for 16-bit rows, store_row_from_pairs and store_row_pairs.
template <class T, class Layout>
void every_mode() {
  every_case<T, Layout, mode::store_row>();
  if constexpr (is_16bit_float<T>) {
    every_case<T, Layout, mode::pairs_by_group>();
    every_case<T, Layout, mode::pairs_whole>();
    every_case<T, Layout, mode::pairs_as_is>();
  }
}

class RowIo : public GpuTest {};

TEST_F(RowIo, StoreRowBf16OneWarp) {
  every_case<bf16, row_layout<32, 1, 8>>();
  every_case<bf16, row_layout<32, 4, 8>>();
  every_case<bf16, row_layout<32, 2, 16>>();  // two units per group
}
TEST_F(RowIo, StoreRowBf16Warps) {
  every_case<bf16, row_layout<64, 2, 8>>();
  every_case<bf16, row_layout<512, 4, 8>>();
}
TEST_F(RowIo, StoreRowFp16) { every_case<fp16, row_layout<128, 2, 8>>(); }
TEST_F(RowIo, WarpBlockedLayouts) {
  every_mode<bf16, warp_blocked_row_layout<64, 2, 8>>();
  every_mode<bf16, warp_blocked_row_layout<512, 4, 8>>();
  every_mode<bf16, warp_blocked_row_layout<128, 2, 16>>();  // two units per group
  every_mode<fp16, warp_blocked_row_layout<128, 1, 8>>();
  every_mode<float, warp_blocked_row_layout<128, 2, 8>>();  // two units per group
  every_mode<float, warp_blocked_row_layout<64, 3, 4>>();
  every_mode<float, warp_blocked_row_layout<64, 2, 2>>();  // 8-byte groups: the element path
}
TEST_F(RowIo, PairsRoundRobin) {
  every_mode<bf16, row_layout<32, 4, 8>>();  // one warp: chained as well
  every_mode<bf16, row_layout<256, 2, 8>>();
  every_mode<fp16, row_layout<64, 4, 8>>();
  every_mode<float, row_layout<128, 2, 4>>();
}
TEST_F(RowIo, StoreRowFp32) {
  every_case<float, row_layout<32, 2, 8>>();   // two units per group
  every_case<float, row_layout<128, 1, 4>>();  // one unit per group
  every_case<float, row_layout<64, 2, 2>>();   // 8-byte groups: the element path
}

}  // namespace
