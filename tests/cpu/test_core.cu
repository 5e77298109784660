// CPU tests: global-view stride and bounds math, argument validation, error
// formatting, dtype conversions.
#include <gtest/gtest.h>

#include <string>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/math.cuh"
#include "tilekit/ops/sync/cluster.cuh"
#include "tilekit/tiles/gl.cuh"

using namespace tilekit;

TEST(GlobalView, ContiguousShapeAndStrides) {
  static float storage[2 * 3 * 5 * 7];
  auto g = make_gl(storage, {2, 3, 5, 7});
  EXPECT_EQ(g.batch(), 2);
  EXPECT_EQ(g.depth(), 3);
  EXPECT_EQ(g.rows(), 5);
  EXPECT_EQ(g.cols(), 7);
  EXPECT_EQ(g.strides[3], 1);
  EXPECT_EQ(g.strides[2], 7);
  EXPECT_EQ(g.strides[1], 35);
  EXPECT_EQ(g.strides[0], 105);
  EXPECT_EQ(g.offset(coord{.b = 1, .d = 2, .r = 3, .c = 4}), 105 + 70 + 21 + 4);
  EXPECT_EQ(g.ptr({.b = 1}), storage + 105);
  EXPECT_EQ(&g[(coord{.r = 1, .c = 1})], storage + 8);
}

TEST(GlobalView, LowerRankIsRightAligned) {
  static float storage[5 * 7];
  auto g = make_gl(storage, {5, 7});
  EXPECT_EQ(g.batch(), 1);
  EXPECT_EQ(g.depth(), 1);
  EXPECT_EQ(g.rows(), 5);
  EXPECT_EQ(g.cols(), 7);
  auto v = make_gl(storage, {35});
  EXPECT_EQ(v.rows(), 1);
  EXPECT_EQ(v.cols(), 35);
}

struct tile16 {
  static constexpr int rows = 16, cols = 16;
};

TEST(GlobalView, StridedViewAndBounds) {
  // A (seqlen=10, heads=4, dim=64) tensor viewed as heads-major: rows = seqlen, depth = heads.
  static bf16 storage[10 * 4 * 64];
  auto g = make_gl(storage, {4, 10, 64}, {64, 4 * 64, 1});
  EXPECT_EQ(g.depth(), 4);
  EXPECT_EQ(g.rows(), 10);
  EXPECT_EQ(g.row_stride(), 256);
  EXPECT_EQ(g.offset(coord{.d = 3, .r = 2, .c = 5}), 3 * 64 + 2 * 256 + 5);
  EXPECT_TRUE(g.contains(coord{.d = 3, .r = 9, .c = 63}));
  EXPECT_FALSE(g.contains({.d = 4}));
  EXPECT_FALSE(g.contains({.r = 10}));
  EXPECT_FALSE(g.contains({.c = 64}));
  EXPECT_FALSE(g.contains({.r = -1}));
  EXPECT_EQ(g.row_tiles<tile16>(), 1);
  EXPECT_EQ(g.col_tiles<tile16>(), 4);
  auto h = make_gl(storage, {1000, 7});
  EXPECT_EQ(h.row_tiles<tile16>(), 63);  // 1000 = 62*16 + 8: a partial last tile
  EXPECT_EQ(h.col_tiles<tile16>(), 1);
}

TEST(GlobalView, ValidateRejectsBadViews) {
  alignas(16) static bf16 storage[64 * 64];
  auto ok = make_gl(storage, {64, 64});
  EXPECT_NO_THROW(validate(ok, "x", 16));

  auto null_view = make_gl<bf16>(nullptr, {4, 4});
  EXPECT_THROW(validate(null_view, "x"), invalid_argument);

  auto not_contiguous = make_gl(storage, {8, 8}, {16, 2});
  try {
    validate(not_contiguous, "weight");
    FAIL() << "expected invalid_argument";
  } catch (const invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("weight: the last dimension must be contiguous"), std::string::npos) << msg;
    EXPECT_NE(msg.find("got stride 2"), std::string::npos) << msg;
  }

  auto misaligned_stride = make_gl(storage, {8, 7}, {7, 1});  // 14-byte rows
  EXPECT_THROW(validate(misaligned_stride, "x", 16), invalid_argument);
  EXPECT_NO_THROW(validate(misaligned_stride, "x", 2));

  auto misaligned_ptr = make_gl(storage + 1, {8, 8});
  EXPECT_THROW(validate(misaligned_ptr, "x", 16), invalid_argument);

  auto empty = make_gl(storage, {0, 8});
  EXPECT_THROW(validate(empty, "x"), invalid_argument);
}

TEST(Errors, CudaErrorMessageNamesCallSiteAndCode) {
  const std::string msg = format_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)", "/a/b/bench.cu", 41);
  EXPECT_EQ(msg, "tilekit: CUDA error 2 (cudaErrorMemoryAllocation: out of memory)\n  in cudaMalloc(&p, n) at bench.cu:41");
  try {
    TILEKIT_CHECK_CUDA(cudaErrorInvalidValue);
    FAIL() << "expected cuda_error";
  } catch (const cuda_error& e) {
    EXPECT_EQ(e.code(), cudaErrorInvalidValue);
    EXPECT_GT(e.line(), 0);
    EXPECT_NE(std::string(e.what()).find("cudaErrorInvalidValue"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("test_core.cu"), std::string::npos);
  }
  EXPECT_NO_THROW(TILEKIT_CHECK_CUDA(cudaSuccess));
}

TEST(Errors, InvalidArgumentMessage) {
  try {
    const int n = 12;
    TILEKIT_CHECK_ARG(n % 8 == 0, "n must be a multiple of 8, got ", n);
    FAIL() << "expected invalid_argument";
  } catch (const invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("tilekit: invalid argument: n must be a multiple of 8, got 12\n  (check `n % 8 == 0` at test_core.cu:", 0), 0u) << msg;
  }
}

TEST(Dtypes, ConversionsRoundToNearestEven) {
  EXPECT_EQ(convert<float>(convert<bf16>(1.0f)), 1.0f);
  // 1 + 2^-8 is halfway between two bf16 values (1 and 1 + 2^-7): ties go to even (1).
  EXPECT_EQ(convert<float>(convert<bf16>(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(convert<float>(convert<bf16>(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_EQ(convert<float>(convert<fp16>(0.1f)), 0.0999755859375f);
  EXPECT_EQ(convert<float>(convert<fp8e4m3>(1.0f)), 1.0f);
  EXPECT_EQ(convert<float>(convert<fp8e4m3>(448.0f)), 448.0f);   // e4m3 max
  EXPECT_EQ(convert<float>(convert<fp8e5m2>(-3.0f)), -3.0f);
  const float2 f = convert<float2>(make_pair(convert<bf16>(2.0f), convert<bf16>(-0.5f)));
  EXPECT_EQ(f.x, 2.0f);
  EXPECT_EQ(f.y, -0.5f);
  const fp16_2 h = convert<fp16_2>(make_float2(0.25f, 8.0f));
  EXPECT_EQ(convert<float>(low(h)), 0.25f);
  EXPECT_EQ(convert<float>(high(h)), 8.0f);
  const fp8e4m3_2 e = convert<fp8e4m3_2>(make_float2(1.5f, -2.0f));
  EXPECT_EQ(convert<float>(low(e)), 1.5f);
  EXPECT_EQ(convert<float>(high(e)), -2.0f);
  EXPECT_EQ(convert<float2>(e).y, -2.0f);
  EXPECT_EQ(dtype_traits<bf16>::tag, dtype::bf16);
  EXPECT_EQ(dtype_bytes(dtype::fp32), 4);
  EXPECT_STREQ(dtype_name(dtype::fp8_e5m2), "fp8_e5m2");
}

TEST(Math, Constants) {
  EXPECT_FLOAT_EQ(log2e * ln2, 1.0f);
  EXPECT_EQ(ceil_div(1000, 16), 63);
  EXPECT_EQ(round_up(1000, 16), 1008);
  EXPECT_TRUE(is_pow2(64));
  EXPECT_FALSE(is_pow2(96));
}

// cluster::launch_config (host side, no launch): the grid, block, shared memory and stream as
// given; a cluster dimension along x only for clusters of 2 or more CTAs; and the attribute a
// configuration points at is its own, also after a copy (get() re-points it).
TEST(ClusterLaunch, ConfigurationOfClustersAndOfPlainLaunches) {
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(0x1234);
  tilekit::cluster::launch_config clustered{64, 512, 16, 4096, stream};
  const cudaLaunchConfig_t* c = clustered.get();
  EXPECT_EQ(c->gridDim.x, 64u);
  EXPECT_EQ(c->gridDim.y, 1u);
  EXPECT_EQ(c->blockDim.x, 512u);
  EXPECT_EQ(c->dynamicSmemBytes, 4096u);
  EXPECT_EQ(c->stream, stream);
  ASSERT_EQ(c->numAttrs, 1u);
  ASSERT_NE(c->attrs, nullptr);
  EXPECT_EQ(c->attrs[0].id, cudaLaunchAttributeClusterDimension);
  EXPECT_EQ(c->attrs[0].val.clusterDim.x, 16u);
  EXPECT_EQ(c->attrs[0].val.clusterDim.y, 1u);
  EXPECT_EQ(c->attrs[0].val.clusterDim.z, 1u);

  const tilekit::cluster::launch_config original{8, 128, 4};
  tilekit::cluster::launch_config copy = original;
  const cudaLaunchConfig_t* k = copy.get();
  ASSERT_EQ(k->numAttrs, 1u);
  EXPECT_EQ(k->attrs[0].val.clusterDim.x, 4u);
  EXPECT_GE(reinterpret_cast<const char*>(k->attrs), reinterpret_cast<const char*>(&copy));
  EXPECT_LT(reinterpret_cast<const char*>(k->attrs), reinterpret_cast<const char*>(&copy) + sizeof(copy));

  tilekit::cluster::launch_config plain{100, 256, 1};
  const cudaLaunchConfig_t* q = plain.get();
  EXPECT_EQ(q->gridDim.x, 100u);
  EXPECT_EQ(q->numAttrs, 0u);
  EXPECT_EQ(q->attrs, nullptr);
  EXPECT_EQ(q->dynamicSmemBytes, 0u);
  EXPECT_EQ(q->stream, nullptr);
}
