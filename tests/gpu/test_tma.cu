// TMA loads, stores and reduce-stores of shared tiles (ops/memory/tma.cuh) against a host
// reference, for every swizzle, wide (two-panel) tiles, fp8, partial tiles at the tensor
// edges, strided 4-D views and cluster multicast.
//
// Each block moves one tile of a grid of tiles covering the whole tensor, so the edge tiles
// hang over the end in rows and columns:
//   load:  TMA -> shared tile -> (threads, via ST::operator()) -> dense tile buffer.
//          Checks TMA's swizzle against st::offset() and the zero fill, bit for bit.
//   store: dense tile buffer -> (threads) -> shared tile -> TMA store into a poisoned view
//          whose padding is also poisoned. Every byte of the allocation is checked: in-tensor
//          elements equal the source, everything else (padding, clipped parts) untouched.
//   store_add: the same with a random destination that TMA adds into.
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "common/gpu_test.cuh"
#include "tilekit/ops/memory/tma.cuh"
#include "tilekit/ops/sync/cluster.cuh"
#include "tilekit/ops/sync/mbarrier.cuh"
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/st.cuh"
#include "tilekit/tiles/sv.cuh"
#include "tilekit/tiles/tma_descriptor.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

constexpr int block_threads = 128;

// The grid of tiles covering a view (tile index -> top-left coordinate).
template <class ST>
struct tile_grid {
  int batch, depth, row_tiles, col_tiles;
  template <class T>
  explicit tile_grid(const gl<T>& g)
      : batch(int(g.batch())), depth(int(g.depth())), row_tiles(int(g.template row_tiles<ST>())),
        col_tiles(int(g.template col_tiles<ST>())) {}
  TILEKIT_HOST_DEVICE int count() const { return batch * depth * row_tiles * col_tiles; }
  TILEKIT_HOST_DEVICE coord origin(int tile, int row_shift = 0, int col_shift = 0) const {
    const int ct = tile % col_tiles;
    const int rt = (tile / col_tiles) % row_tiles;
    const int d = (tile / (col_tiles * row_tiles)) % depth;
    const int b = tile / (col_tiles * row_tiles * depth);
    return coord{.b = b, .d = d, .r = rt * ST::rows + row_shift, .c = ct * ST::cols + col_shift};
  }
};

template <class ST>
struct load_storage {
  ST tile;
  mbarrier loaded;
};

template <class ST>
__global__ void __launch_bounds__(block_threads) load_tiles_kernel(const __grid_constant__ tma_map<ST> map,
                                                                   tile_grid<ST> grid, int row_shift, int col_shift,
                                                                   typename ST::element* tiles_out) {
  __shared__ load_storage<ST> s;
  if (threadIdx.x == 0) {
    tma::prefetch_map(map);
    s.loaded.init(1);
  }
  init_barriers_fence();
  __syncthreads();
  const coord origin = grid.origin(blockIdx.x, row_shift, col_shift);
  if (threadIdx.x == 0) {
    tma::prefetch_tile(map, origin);
    s.loaded.arrive_expect_tx(transaction_bytes<ST>);
    tma::load_async(s.tile, map, origin, s.loaded);
  }
  phase loaded_phase;
  s.loaded.wait(loaded_phase);
  typename ST::element* out = tiles_out + size_t(blockIdx.x) * ST::elements;
  for (int e = threadIdx.x; e < ST::elements; e += blockDim.x) out[e] = s.tile(e / ST::cols, e % ST::cols);
}

enum class store_kind { store, add };

template <class ST, store_kind Kind>
__global__ void __launch_bounds__(block_threads) store_tiles_kernel(const __grid_constant__ tma_map<ST> map,
                                                                    tile_grid<ST> grid,
                                                                    const typename ST::element* tiles_in) {
  __shared__ ST tile;
  const typename ST::element* in = tiles_in + size_t(blockIdx.x) * ST::elements;
  for (int e = threadIdx.x; e < ST::elements; e += blockDim.x) tile(e / ST::cols, e % ST::cols) = in[e];
  tma::fence_shared_for_async();  // generic-proxy writes -> async-proxy (TMA) reads
  __syncthreads();
  if (threadIdx.x == 0) {
    if constexpr (Kind == store_kind::store) tma::store_async(map, tile, grid.origin(blockIdx.x));
    else tma::store_add_async(map, tile, grid.origin(blockIdx.x));
    tma::store_commit();
    tma::store_wait_read<0>();  // exercised: the tile could be reused from here on
    tma::store_wait<0>();
  }
}

// A view over an allocation: shape (b, d, r, c), strides in elements (>= dense).
struct view_spec {
  int64_t shape[4];
  int64_t strides[4];
  int64_t allocation() const { return (shape[0] - 1) * strides[0] + (shape[1] - 1) * strides[1] + (shape[2] - 1) * strides[2] + shape[3]; }
};

view_spec dense(int64_t b, int64_t d, int64_t r, int64_t c) {
  return view_spec{{b, d, r, c}, {d * r * c, r * c, c, 1}};
}

template <class T>
gl<T> make_view(T* data, const view_spec& v) {
  return make_gl(data, {v.shape[0], v.shape[1], v.shape[2], v.shape[3]},
                 {v.strides[0], v.strides[1], v.strides[2], v.strides[3]});
}

class Tma : public GpuTest {};

template <class ST>
void check_load(const view_spec& v, int row_shift = 0, int col_shift = 0) {
  using T = typename ST::element;
  SCOPED_TRACE(::testing::Message() << "load st<" << dtype_traits<T>::name << ", " << ST::rows << ", " << ST::cols
                                    << "> view " << v.shape[0] << "x" << v.shape[1] << "x" << v.shape[2] << "x"
                                    << v.shape[3] << " shift " << row_shift << "," << col_shift);
  std::mt19937_64 rng(test_seed());
  const auto host = random_vector<T>(size_t(v.allocation()), rng);
  device_buffer<T> src(host);
  const gl<T> g = make_view(src.get(), v);
  const auto map = make_tma_map<ST>(g);
  const tile_grid<ST> grid(g);
  device_buffer<T> tiles(size_t(grid.count()) * ST::elements);
  load_tiles_kernel<ST><<<grid.count(), block_threads>>>(map, grid, row_shift, col_shift, tiles.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto out = tiles.download();
  size_t wrong = 0, out_of_bounds = 0;
  for (int t = 0; t < grid.count(); ++t) {
    const coord o = grid.origin(t, row_shift, col_shift);
    for (int r = 0; r < ST::rows; ++r)
      for (int c = 0; c < ST::cols; ++c) {
        const coord x{o.b, o.d, o.r + r, o.c + c};
        const bool inside = g.contains(x);
        out_of_bounds += !inside;
        const uint32_t expected = inside ? raw_bits(host[size_t(g.offset(x))]) : 0u;  // zero fill
        const uint32_t got = raw_bits(out[size_t(t) * ST::elements + r * ST::cols + c]);
        if (got != expected && wrong++ < 5)
          ADD_FAILURE() << "tile " << t << " (" << r << ", " << c << "): got 0x" << std::hex << got << " expected 0x"
                        << expected << std::dec << (inside ? "" : " (zero fill)");
      }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(out_of_bounds, 0u) << "test setup: some tiles must hang over the tensor edge";
}

template <class ST, store_kind Kind = store_kind::store>
void check_store(const view_spec& v) {
  using T = typename ST::element;
  SCOPED_TRACE(::testing::Message() << (Kind == store_kind::store ? "store" : "store_add") << " st<"
                                    << dtype_traits<T>::name << ", " << ST::rows << ", " << ST::cols << "> view "
                                    << v.shape[0] << "x" << v.shape[1] << "x" << v.shape[2] << "x" << v.shape[3]);
  std::mt19937_64 rng(test_seed());
  device_buffer<T> dst(size_t(v.allocation()));  // poisoned
  std::vector<T> before;
  if constexpr (Kind == store_kind::add) {
    before = random_vector<T>(dst.size(), rng);
    dst.upload(before);
  } else {
    before = dst.download();
  }
  const gl<T> g = make_view(dst.get(), v);
  const auto map = make_tma_map<ST>(g, {.access = tma_access::load_and_store});
  const tile_grid<ST> grid(g);
  const auto tiles_host = random_vector<T>(size_t(grid.count()) * ST::elements, rng);
  device_buffer<T> tiles(tiles_host);
  store_tiles_kernel<ST, Kind><<<grid.count(), block_threads>>>(map, grid, tiles.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto out = dst.download();

  // Expected allocation: untouched except the tensor's elements.
  std::vector<double> expected(before.size());
  std::vector<bool> in_tensor(before.size(), false);
  for (size_t i = 0; i < before.size(); ++i) expected[i] = to_double(before[i]);
  for (int t = 0; t < grid.count(); ++t) {
    const coord o = grid.origin(t);
    for (int r = 0; r < ST::rows; ++r)
      for (int c = 0; c < ST::cols; ++c) {
        const coord x{o.b, o.d, o.r + r, o.c + c};
        if (!g.contains(x)) continue;
        const size_t i = size_t(g.offset(x));
        const double value = to_double(tiles_host[size_t(t) * ST::elements + r * ST::cols + c]);
        expected[i] = Kind == store_kind::store ? value : double(float(expected[i]) + float(value));
        in_tensor[i] = true;
      }
  }
  size_t wrong = 0, untouched = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    bool ok;
    if (!in_tensor[i]) {
      ok = raw_bits(out[i]) == raw_bits(before[i]);  // padding / clipped: not written
      untouched += ok;
    } else if constexpr (Kind == store_kind::store) {
      ok = to_double(out[i]) == expected[i];
    } else {
      ok = std::abs(to_double(out[i]) - expected[i]) <= 1e-6 * std::abs(expected[i]) + 1e-7;  // one fp32 rounding
    }
    if (!ok && wrong++ < 5)
      ADD_FAILURE() << "element " << i << (in_tensor[i] ? " (in tensor)" : " (outside the tensor)") << ": got "
                    << to_double(out[i]) << " expected " << (in_tensor[i] ? expected[i] : to_double(before[i]));
  }
  EXPECT_EQ(wrong, 0u);
  if (Kind == store_kind::store) EXPECT_EQ(raw_bits(before[0]), poison_bits<T>());
}

// 150 x 200: 3 x 4 tiles of 64 x 64, last row tile 22 rows, last column tile 8 columns.
TEST_F(Tma, LoadBf16Swizzle128) { check_load<st_bf<64, 64>>(dense(1, 1, 150, 200)); }
TEST_F(Tma, LoadBf16Swizzle64StridedFourDimensional) {
  // rows padded to 88 elements, depth and batch padded too.
  check_load<st_bf<64, 32>>(view_spec{{2, 3, 100, 77}, {3 * 8808 + 64, 8808, 88, 1}});
}
TEST_F(Tma, LoadBf16Swizzle32) { check_load<st_bf<64, 16>>(dense(1, 2, 70, 40)); }
TEST_F(Tma, LoadBf16NoSwizzle) { check_load<st_bf<64, 8>>(dense(2, 1, 65, 24)); }
TEST_F(Tma, LoadFp32Swizzle128) { check_load<st_fl<32, 32>>(dense(1, 1, 45, 52)); }
TEST_F(Tma, LoadBf16TwoPanelsPartialColumns) {
  // 200 columns: the second 128-wide tile column has panel 0 = cols 128..191 in bounds and
  // panel 1 = cols 192..255 only 8 columns in bounds.
  check_load<st_bf<64, 128>>(dense(1, 1, 100, 200));
}
TEST_F(Tma, LoadFp8TwoByteRowsOfOnePanel) { check_load<st_fp8e4m3<64, 128>>(dense(1, 1, 90, 176)); }
TEST_F(Tma, LoadNegativeAndShiftedOrigins) {
  // Tiles start 3 rows and 8 columns before their grid position: the first row / column of
  // tiles reads before the tensor start (zero filled).
  check_load<st_bf<64, 64>>(dense(1, 1, 130, 136), -3, -8);
}

TEST_F(Tma, StoreBf16Swizzle128) { check_store<st_bf<64, 64>>(dense(1, 1, 150, 200)); }
TEST_F(Tma, StoreBf16Swizzle64StridedFourDimensional) {
  check_store<st_bf<64, 32>>(view_spec{{2, 3, 100, 72}, {3 * 8808 + 64, 8808, 88, 1}});
}
TEST_F(Tma, StoreMapRejectsRowsNotEndingOnSixteenBytes) {
  // 77 bf16 columns: TMA stores would write the 3 padding elements after every row
  // (observed on an H200), so a store map for this view is refused on the host.
  device_buffer<bf16> dst(size_t(100) * 88);
  const auto g = make_gl(dst.get(), {100, 77}, {88, 1});
  EXPECT_NO_THROW((make_tma_map<st_bf<64, 32>>(g)));
  EXPECT_THROW((make_tma_map<st_bf<64, 32>>(g, {.access = tma_access::load_and_store})), invalid_argument);
}
TEST_F(Tma, StoreBf16Swizzle32) { check_store<st_bf<64, 16>>(view_spec{{1, 2, 70, 40}, {0, 75 * 48, 48, 1}}); }
TEST_F(Tma, StoreBf16NoSwizzle) { check_store<st_bf<64, 8>>(dense(2, 1, 65, 24)); }
TEST_F(Tma, StoreFp32Swizzle128) { check_store<st_fl<32, 32>>(view_spec{{1, 1, 45, 52}, {0, 0, 60, 1}}); }
TEST_F(Tma, StoreBf16TwoPanelsPartialColumns) {
  check_store<st_bf<64, 128>>(view_spec{{1, 1, 100, 200}, {0, 0, 264, 1}});
}
TEST_F(Tma, StoreFp8) { check_store<st_fp8e4m3<64, 128>>(view_spec{{1, 1, 90, 176}, {0, 0, 208, 1}}); }
TEST_F(Tma, StoreAddFp32) {
  check_store<st_fl<32, 32>, store_kind::add>(view_spec{{2, 1, 45, 52}, {45 * 64 + 16, 0, 64, 1}});
}

// ---------------------------------------------------------------------------------------------
// Multicast: in a cluster of 2, CTA rank k loads tile k of its cluster's pair with mask 0b11,
// so both CTAs receive both tiles; each CTA's barrier expects both tiles' bytes.
constexpr int multicast_cluster = 2;

template <class ST>
struct multicast_storage {
  ST tiles[multicast_cluster];
  mbarrier loaded;
};

template <class ST>
__global__ void __cluster_dims__(multicast_cluster, 1, 1) __launch_bounds__(block_threads)
    multicast_kernel(const __grid_constant__ tma_map<ST> map, typename ST::element* out) {
  __shared__ multicast_storage<ST> s;
  const uint32_t rank = cluster::rank();
  if (threadIdx.x == 0) s.loaded.init(1);
  init_barriers_fence();
  cluster::sync();  // the peer's barrier must be initialised before our multicast completes on it
  if (threadIdx.x == 0) {
    s.loaded.arrive_expect_tx(transaction_bytes<ST> * multicast_cluster);
    const int pair_tile = int(cluster::id_x()) * multicast_cluster + int(rank);
    const uint16_t all_ctas = (1u << multicast_cluster) - 1;
    tma::load_async_multicast(s.tiles[rank], map, coord{.r = pair_tile * ST::rows}, s.loaded, all_ctas);
  }
  s.loaded.wait(phase{});
  for (int k = 0; k < multicast_cluster; ++k) {
    typename ST::element* o = out + (size_t(blockIdx.x) * multicast_cluster + k) * ST::elements;
    for (int e = threadIdx.x; e < ST::elements; e += blockDim.x) o[e] = s.tiles[k](e / ST::cols, e % ST::cols);
  }
  cluster::sync();  // no CTA exits while its peer's multicast may still target it
}

template <class ST>
void check_multicast() {
  using T = typename ST::element;
  constexpr int clusters = 3;
  constexpr int ctas = clusters * multicast_cluster;
  std::mt19937_64 rng(test_seed());
  const int rows = ctas * ST::rows, cols = ST::cols;
  const auto host = random_vector<T>(size_t(rows) * cols, rng);
  device_buffer<T> src(host);
  const auto map = make_tma_map<ST>(make_gl(src.get(), {int64_t(rows), int64_t(cols)}));
  device_buffer<T> out(size_t(ctas) * multicast_cluster * ST::elements);
  multicast_kernel<ST><<<ctas, block_threads>>>(map, out.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  const auto got = out.download();
  size_t wrong = 0;
  for (int cta = 0; cta < ctas; ++cta)
    for (int k = 0; k < multicast_cluster; ++k) {
      const int tile = (cta / multicast_cluster) * multicast_cluster + k;
      for (int e = 0; e < ST::elements; ++e) {
        const uint32_t expected = raw_bits(host[(size_t(tile) * ST::rows + e / ST::cols) * cols + e % ST::cols]);
        const uint32_t value = raw_bits(got[(size_t(cta) * multicast_cluster + k) * ST::elements + e]);
        if (value != expected && wrong++ < 5)
          ADD_FAILURE() << "cta " << cta << " tile slot " << k << " element " << e << ": got 0x" << std::hex << value
                        << " expected 0x" << expected;
      }
    }
  EXPECT_EQ(wrong, 0u);
}

TEST_F(Tma, MulticastClusterOf2) { check_multicast<st_bf<64, 64>>(); }
TEST_F(Tma, MulticastClusterOf2TwoPanels) { check_multicast<st_bf<64, 128>>(); }

// ---------------------------------------------------------------------------------------------
// Shared vectors: bulk copy in (completing an mbarrier) and bulk copy out; each block moves
// its own vector, and the threads also read it to check the landed bytes.
using bulk_vector = sv<float, 1000>;  // 4000 bytes, a multiple of 16

__global__ void __launch_bounds__(block_threads) bulk_vector_kernel(const float* in, float* copied, float* read) {
  __shared__ bulk_vector v;
  __shared__ mbarrier loaded;
  if (threadIdx.x == 0) loaded.init(1);
  init_barriers_fence();
  __syncthreads();
  if (threadIdx.x == 0) {
    loaded.arrive_expect_tx(transaction_bytes<bulk_vector>);
    tma::load_async(v, in + size_t(blockIdx.x) * bulk_vector::length, loaded);
  }
  loaded.wait(phase{});
  for (int i = threadIdx.x; i < bulk_vector::length; i += blockDim.x)
    read[size_t(blockIdx.x) * bulk_vector::length + i] = v[i];
  if (threadIdx.x == 0) {
    tma::store_async(copied + size_t(blockIdx.x) * bulk_vector::length, v);
    tma::store_commit();
    tma::store_wait<0>();
  }
}

TEST_F(Tma, BulkCopySharedVector) {
  constexpr int blocks = 5;
  std::mt19937_64 rng(test_seed());
  const auto host = random_vector<float>(size_t(blocks) * bulk_vector::length, rng);
  device_buffer<float> in(host);
  device_buffer<float> copied{host.size()}, read{host.size()};
  bulk_vector_kernel<<<blocks, block_threads>>>(in.get(), copied.get(), read.get());
  TILEKIT_CHECK_CUDA(cudaGetLastError());
  TILEKIT_CHECK_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(copied.download(), host);
  EXPECT_EQ(read.download(), host);
}

}  // namespace
