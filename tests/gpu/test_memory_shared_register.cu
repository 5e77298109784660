// Shared <-> register moves (ldmatrix / stmatrix for 16-bit tiles, 8- and
// 4-byte shared accesses for fp32) checked against the reference per-element
// register I/O of tests/common/register_io.cuh, which follows rt::position()
// one element at a time:
//
//   load:  st filled element by element -> warp::load(rt, st, row0, col0)
//          -> reference_store  == the sub-tile at (row0, col0)
//   store: reference_load -> warp::store(st, rt, row0, col0) -> st read element
//          by element == the input inside the sub-tile, the sentinel elsewhere
//
// Both directions are bit-exact. Also sv <-> rv, and a CPU check of the
// fragment row-step identity that the ldmatrix addressing relies on.
#include <gtest/gtest.h>

#include <random>

#include "common/gpu_test.cuh"
#include "common/register_io.cuh"
#include "test_memory_common.cuh"
#include "tilekit/ops/memory/shared_register.cuh"
#include "tilekit/tiles/shared.cuh"

using namespace tilekit;
using namespace tilekit::testing;

namespace {

// in: Shared::rows x Shared::cols row-major; out: Reg::rows x Reg::cols row-major.
template <class Shared, class Reg>
__global__ void load_from_shared_kernel(const typename Shared::element* in, typename Reg::element* out, int row0,
                                        int col0) {
  Shared& tile = shared_storage<Shared>();
  for (int i = laneid(); i < Shared::rows * Shared::cols; i += warp_threads)
    tile(i / Shared::cols, i % Shared::cols) = in[i];
  __syncwarp();
  Reg reg;
  warp::load(reg, tile, row0, col0);
  reference_store(out, Reg::cols, reg);
}

// in: Reg::rows x Reg::cols; sentinel fills the shared tile first; out: the whole shared tile.
template <class Shared, class Reg>
__global__ void store_to_shared_kernel(const typename Reg::element* in, typename Shared::element sentinel,
                                       typename Shared::element* out, int row0, int col0) {
  Shared& tile = shared_storage<Shared>();
  for (int i = laneid(); i < Shared::rows * Shared::cols; i += warp_threads)
    tile(i / Shared::cols, i % Shared::cols) = sentinel;
  __syncwarp();
  Reg reg;
  reference_load(reg, in, Reg::cols);
  warp::store(tile, reg, row0, col0);
  __syncwarp();
  for (int i = laneid(); i < Shared::rows * Shared::cols; i += warp_threads)
    out[i] = tile(i / Shared::cols, i % Shared::cols);
}

template <class Shared, class Reg>
void run_shared_register(int row0, int col0) {
  using S = typename Shared::element;
  using R = typename Reg::element;
  SCOPED_TRACE(::testing::Message() << "st<" << dtype_traits<S>::name << ", " << Shared::rows << ", " << Shared::cols
                                    << "> (swizzle " << Shared::swizzle_bytes << ") <-> rt<" << dtype_traits<R>::name
                                    << ", " << Reg::rows << ", " << Reg::cols << ", "
                                    << (Reg::tile_layout == layout::row ? "row" : "col") << "> at (" << row0 << ", "
                                    << col0 << ")");
  std::mt19937_64 rng(test_seed());
  const size_t bytes = shared_storage_bytes<Shared>;

  {  // shared -> registers
    const std::vector<S> shared_in = random_vector<S>(Shared::rows * Shared::cols, rng);
    device_buffer<S> in(shared_in);
    device_buffer<R> out(Reg::rows * Reg::cols);
    load_from_shared_kernel<Shared, Reg><<<1, warp_threads, bytes>>>(in.get(), out.get(), row0, col0);
    sync_and_check("load_from_shared_kernel");
    std::vector<R> expected(Reg::rows * Reg::cols);
    for (int r = 0; r < Reg::rows; ++r)
      for (int c = 0; c < Reg::cols; ++c)
        expected[r * Reg::cols + c] = convert<R>(shared_in[(row0 + r) * Shared::cols + col0 + c]);
    expect_same_bits(out.download(), expected, "registers loaded from shared");
  }
  {  // registers -> shared
    const std::vector<R> reg_in = random_vector<R>(Reg::rows * Reg::cols, rng);
    device_buffer<R> in(reg_in);
    device_buffer<S> out(Shared::rows * Shared::cols);
    const S sentinel = convert<S>(1000.0f);  // outside the random range
    store_to_shared_kernel<Shared, Reg><<<1, warp_threads, bytes>>>(in.get(), sentinel, out.get(), row0, col0);
    sync_and_check("store_to_shared_kernel");
    std::vector<S> expected(Shared::rows * Shared::cols, sentinel);
    for (int r = 0; r < Reg::rows; ++r)
      for (int c = 0; c < Reg::cols; ++c)
        expected[(row0 + r) * Shared::cols + col0 + c] = convert<S>(reg_in[r * Reg::cols + c]);
    expect_same_bits(out.download(), expected, "shared tile after the register store");
  }
}

template <class Shared, int RegRows, int RegCols, class R = typename Shared::element>
void run_both_layouts(int row0, int col0) {
  run_shared_register<Shared, rt<R, RegRows, RegCols, layout::row>>(row0, col0);
  run_shared_register<Shared, rt<R, RegRows, RegCols, layout::col>>(row0, col0);
}

class MemorySharedRegister : public GpuTest {};

TEST_F(MemorySharedRegister, Bf16Swizzle128) {
  run_both_layouts<st_bf<64, 64>, 16, 64>(0, 0);
  run_both_layouts<st_bf<64, 64>, 16, 64>(48, 0);
  run_both_layouts<st_bf<64, 64>, 32, 32>(32, 24);  // col0 a multiple of 8, not of 16
}
TEST_F(MemorySharedRegister, Bf16TwoPanels) { run_both_layouts<st_bf<32, 128>, 16, 128>(16, 0); }
TEST_F(MemorySharedRegister, Bf16Swizzle32And64) {
  run_both_layouts<st_bf<16, 16>, 16, 16>(0, 0);         // 32-byte rows
  run_both_layouts<st_bf<32, 48>, 16, 32>(16, 16);       // 96-byte rows: three 32-byte panels
  run_both_layouts<st_hf<64, 32>, 32, 32>(32, 0);        // 64-byte rows
}
TEST_F(MemorySharedRegister, Fp32) {
  run_both_layouts<st_fl<16, 32>, 16, 32>(0, 0);   // 128-byte swizzle
  run_both_layouts<st_fl<64, 32>, 32, 16>(32, 16);
  run_both_layouts<st_fl<16, 16>, 16, 16>(0, 0);   // 64-byte swizzle
}
TEST_F(MemorySharedRegister, ConvertingTypes) {
  // bf16 shared -> fp32 registers (ldmatrix + widen) and back (exact both ways
  // only for the load; the store rounds fp32 -> bf16, which the expected value
  // reproduces with the same round-to-nearest-even).
  run_both_layouts<st_bf<64, 64>, 16, 64, float>(16, 0);
}

// ---------------------------------------------------------------- vectors

template <class T, int N, vec_layout VL>
__global__ void shared_vector_register_kernel(const T* in, T sentinel, T* loaded, T* stored) {
  __shared__ sv<T, N> vec;
  for (int i = laneid(); i < N; i += warp_threads) vec[i] = in[i];
  __syncwarp();
  rv<T, N, VL> reg;
  warp::load(reg, vec);
  reference_store(loaded, reg);
  __syncwarp();
  for (int i = laneid(); i < N; i += warp_threads) vec[i] = sentinel;
  __syncwarp();
  reference_load(reg, in);
  warp::store(vec, reg);
  __syncwarp();
  for (int i = laneid(); i < N; i += warp_threads) stored[i] = vec[i];
}

template <class T, int N, vec_layout VL>
void run_shared_vector_register() {
  std::mt19937_64 rng(test_seed());
  const std::vector<T> host = random_vector<T>(N, rng);
  device_buffer<T> in(host), loaded(N), stored(N);
  const T sentinel = convert<T>(1000.f);
  shared_vector_register_kernel<T, N, VL><<<1, warp_threads>>>(in.get(), sentinel, loaded.get(), stored.get());
  sync_and_check("shared_vector_register_kernel");
  expect_same_bits(loaded.download(), host, "rv loaded from sv");
  expect_same_bits(stored.download(), host, "sv stored from rv");
}

TEST_F(MemorySharedRegister, Vectors) {
  run_shared_vector_register<float, 64, vec_layout::grouped>();
  run_shared_vector_register<float, 64, vec_layout::paired>();
  run_shared_vector_register<bf16, 32, vec_layout::paired>();
}

// ---------------------------------------------------------------- CPU

// The ldmatrix addressing computes st::offset once per fragment column and
// adds a constant per 16 rows; that is only valid if the swizzle pattern
// repeats every 16 rows, for every swizzle mode. Checked here exhaustively.
template <class Shared>
void check_fragment_row_step() {
  constexpr uint32_t step = detail::fragment_row_step_bytes<Shared>;
  for (int r = 0; r + fragment_dim < Shared::rows; ++r)
    for (int c = 0; c < Shared::cols; ++c)
      ASSERT_EQ(Shared::offset(r + fragment_dim, c), Shared::offset(r, c) + step)
          << "swizzle " << Shared::swizzle_bytes << " r=" << r << " c=" << c;
}

TEST(MemorySharedRegisterLayout, FragmentRowStepMatchesOffset) {
  check_fragment_row_step<st_bf<64, 64>>();
  check_fragment_row_step<st_bf<32, 128>>();
  check_fragment_row_step<st_bf<64, 32>>();
  check_fragment_row_step<st_bf<64, 16>>();
  check_fragment_row_step<st_bf<64, 8>>();
  check_fragment_row_step<st_bf<32, 48>>();
  check_fragment_row_step<st_fl<64, 32>>();
}

// Simulates ldmatrix.x4 from its PTX definition (HOPPER_NOTES 8.1) on the
// lane addresses the library computes, and checks that every lane receives
// exactly the elements rt::position() says it owns, for both layouts. Matrix
// k's row i is the 8 elements at the address of lane 8k + i; without .trans
// register k of lane l gets row l/4, columns 2(l%4) + h; with .trans it gets
// column l/4 of rows 2(l%4) + h. (stmatrix is the same map in reverse.)
template <layout L>
void check_ldmatrix_addressing() {
  using tile = rt<bf16, 16, 16, L>;
  for (int lane = 0; lane < warp_threads; ++lane)
    for (int k = 0; k < fragment_pairs; ++k)
      for (int h = 0; h < 2; ++h) {
        const int matrix_row = L == layout::row ? lane / 4 : 2 * (lane % 4) + h;
        const int matrix_col = L == layout::row ? 2 * (lane % 4) + h : lane / 4;
        const fragment_position segment = detail::ldmatrix_lane_position<L>(8 * k + matrix_row);
        const fragment_position expected = tile::position(lane, 0, 0, k, h);
        ASSERT_EQ(segment.row, expected.row) << "lane " << lane << " k " << k << " h " << h;
        ASSERT_EQ(segment.col + matrix_col, expected.col) << "lane " << lane << " k " << k << " h " << h;
        ASSERT_EQ(segment.col % detail::ldmatrix_segment_elements, 0) << "segments start on 16-byte chunks";
      }
}

TEST(MemorySharedRegisterLayout, LdmatrixAddressingMatchesFragmentMap) {
  check_ldmatrix_addressing<layout::row>();
  check_ldmatrix_addressing<layout::col>();
}

}  // namespace
