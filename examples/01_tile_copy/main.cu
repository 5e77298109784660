// 01_tile_copy: the memory hierarchy in tilekit, one step at a time.
//
//   y = 2 * x + 1      for a bf16 matrix x of 1000 x 296 elements
//
// Each thread block owns one 64 x 64 tile of x and moves it through the three
// levels of memory a Hopper kernel uses:
//
//   global --cp.async--> shared --ldmatrix--> registers --(math)--> global
//
// The matrix is deliberately NOT a multiple of the tile (1000 = 15*64 + 40,
// 296 = 4*64 + 40): the tiles on the bottom and right edges hang over the
// tensor, and tilekit's loads fill the missing elements with zeros while its
// stores drop them. No special edge code is needed in the kernel.
//
// Build and run: `cmake --build --preset main` builds every example and runs
// it; this one prints PASS or FAIL (and exits non-zero on FAIL). Without an
// sm_90 GPU it explains why and exits 0.

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tilekit/core/device.cuh"
#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/ops/group_memory.cuh"  // global <-> shared: warpgroup::load_async, async_commit, async_wait
#include "tilekit/ops/warp/maps.cuh"     // register math: warp::mul, warp::add
#include "tilekit/ops/warp/memory.cuh"   // shared -> registers (ldmatrix), registers -> global
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/shared.cuh"
#include "tilekit/tiles/st.cuh"

using namespace tilekit;

// ---------------------------------------------------------------------------
// The tile configuration: one table, everything else is derived from it.
// ---------------------------------------------------------------------------
constexpr int tile_rows = 64;
constexpr int tile_cols = 64;
constexpr int block_warps = warpgroup_warps;         // 4 warps = one warpgroup = 128 threads
constexpr int rows_per_warp = tile_rows / block_warps;  // each warp owns a 16-row slice

// The shared tile: 64 rows of 64 bf16 = 128 bytes, so tilekit picks the
// 128-byte swizzle (the layout TMA writes and wgmma reads; it also makes the
// ldmatrix reads below bank-conflict free).
using shared_tile = st_bf<tile_rows, tile_cols>;
// Each warp's registers: a 16 x 64 slice, held in fp32 for the math.
using register_slice = rt_fl<rows_per_warp, tile_cols>;

constexpr float scale = 2.0f;
constexpr float shift = 1.0f;

__global__ void __launch_bounds__(block_warps * warp_threads) scale_shift_kernel(gl<bf16> x, gl<bf16> y) {
  // Dynamic shared memory, viewed as one shared_tile aligned for its swizzle
  // (the host passes shared_storage_bytes<shared_tile> at launch).
  shared_tile& tile = shared_storage<shared_tile>();

  // The element coordinate of this block's tile (b and d stay 0 for a matrix).
  const coord origin{.r = int(blockIdx.y) * tile_rows, .c = int(blockIdx.x) * tile_cols};

  // 1. global -> shared. All 128 threads cooperate: each issues 16-byte
  //    cp.async copies (4 per thread here). Rows past the end of x, and columns
  //    past its right edge, arrive as zeros.
  warpgroup::load_async(tile, x, origin);
  warpgroup::async_commit();  // close this thread's batch of copies ...
  warpgroup::async_wait<0>();  // ... and wait until it has landed
  // async_wait only covers the copies THIS thread issued; the barrier makes
  // every thread's copies visible to every warp.
  __syncthreads();

  // 2. shared -> registers. Warp w takes rows [16w, 16w + 16) of the tile with
  //    ldmatrix; the bf16 values are widened to fp32 on the way.
  const int slice_row = warpid() * rows_per_warp;
  register_slice values;
  warp::load(values, tile, slice_row, 0);

  // 3. compute in registers: y = 2 * x + 1 (fp32, rounded once on the store).
  warp::mul(values, values, scale);
  warp::add(values, values, shift);

  // 4. registers -> global, straight from the warp's fragments. Elements of
  //    the slice that fall outside y are not written.
  warp::store(y, values, {.r = origin.r + slice_row, .c = origin.c});
}

int main() {
  // 296 bf16 = 592 bytes per row, a multiple of 16: every row starts 16-byte
  // aligned, which the 16-byte cp.async copies need. (Other widths work too,
  // through a slower element-by-element path.)
  constexpr int64_t rows = 1000, cols = 296;

  if (const std::string reason = hopper_unavailable_reason(0); !reason.empty()) {
    std::printf("01_tile_copy: SKIPPED - needs an sm_90 (Hopper) GPU: %s\n", reason.c_str());
    return gpu_required_by_environment() ? 1 : 0;  // TILEKIT_REQUIRE_GPU=1: a missing GPU is an error
  }

  // Random input in [-1, 1), rounded to bf16.
  std::vector<bf16> x_host(rows * cols);
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  for (auto& v : x_host) v = convert<bf16>(uniform(rng));

  bf16 *x_device = nullptr, *y_device = nullptr;
  const size_t bytes = x_host.size() * sizeof(bf16);
  TILEKIT_CHECK_CUDA(cudaMalloc(&x_device, bytes));
  TILEKIT_CHECK_CUDA(cudaMalloc(&y_device, bytes));
  TILEKIT_CHECK_CUDA(cudaMemcpy(x_device, x_host.data(), bytes, cudaMemcpyHostToDevice));
  TILEKIT_CHECK_CUDA(cudaMemset(y_device, 0xFF, bytes));  // NaN everywhere: unwritten outputs show up

  // Global views: pointer + runtime shape (and strides, contiguous here).
  const gl<bf16> x = make_gl(x_device, {rows, cols});
  const gl<bf16> y = make_gl(y_device, {rows, cols});
  validate(x, "x", 16);  // 16-byte aligned rows: the cp.async fast path applies
  validate(y, "y");

  // One block per tile, rounding up so the edge tiles are covered.
  const dim3 grid(unsigned(x.col_tiles<shared_tile>()), unsigned(x.row_tiles<shared_tile>()));
  constexpr size_t shared_bytes = shared_storage_bytes<shared_tile>;  // the tile + alignment slack
  scale_shift_kernel<<<grid, block_warps * warp_threads, shared_bytes>>>(x, y);
  TILEKIT_CHECK_LAUNCH("scale_shift_kernel");

  std::vector<bf16> y_host(x_host.size());
  TILEKIT_CHECK_CUDA(cudaMemcpy(y_host.data(), y_device, bytes, cudaMemcpyDeviceToHost));
  TILEKIT_CHECK_CUDA(cudaFree(x_device));
  TILEKIT_CHECK_CUDA(cudaFree(y_device));

  // CPU reference in double. The kernel computes in fp32 and rounds once to
  // bf16, so each output is within half a bf16 ulp (2^-9 relative) of the
  // exact value; allow one full ulp (2^-8) for the fp32 rounding on top.
  const double tolerance = 1.0 / 256;
  int64_t bad = 0;
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double expected = scale * double(convert<float>(x_host[i])) + shift;
    const double got = double(convert<float>(y_host[i]));
    const bool ok = std::abs(got - expected) <= tolerance * std::abs(expected) + 1e-6;  // NaN fails too
    if (!ok && bad++ < 5)
      std::printf("  mismatch at (%lld, %lld): got %f, expected %f\n", static_cast<long long>(i / cols),
                  static_cast<long long>(i % cols), got, expected);
  }
  if (bad) {
    std::printf("01_tile_copy: FAIL (%lld of %lld elements wrong)\n", static_cast<long long>(bad),
                static_cast<long long>(rows * cols));
    return 1;
  }
  std::printf("01_tile_copy: PASS (%lld x %lld bf16, %u x %u tiles of %d x %d)\n", static_cast<long long>(rows),
              static_cast<long long>(cols), grid.y, grid.x, tile_rows, tile_cols);
  return 0;
}
