// CPU tests of the TMA descriptor parameters (tiles/tma_descriptor.cuh): the mapping from a
// gl view plus a shared tile type to cuTensorMapEncodeTiled's arguments, and argument
// validation. Nothing here calls the driver (there may be none), so only tma_parameters()
// is exercised; make_tma_map() runs in the GPU tests.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tilekit/tiles/tma_descriptor.cuh"

using namespace tilekit;

namespace {

// A well-aligned fake device address (never dereferenced).
template <class T>
T* fake_pointer(uintptr_t offset = 0) {
  return reinterpret_cast<T*>(uintptr_t(1) << 20 | offset);
}

// Runs `f`, expects tilekit::invalid_argument whose message contains `needle`.
template <class F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected tilekit::invalid_argument mentioning \"" << needle << "\"";
  } catch (const tilekit::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message was: " << e.what();
  }
}

TEST(TmaDescriptor, ContiguousBf16Swizzle128) {
  const auto g = make_gl(fake_pointer<bf16>(), {150, 200});
  const auto p = tma_parameters<st_bf<64, 64>>(g);
  EXPECT_EQ(p.data_type, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(p.rank, 4u);
  EXPECT_EQ(p.global_dim[0], 200u);  // cols innermost
  EXPECT_EQ(p.global_dim[1], 150u);
  EXPECT_EQ(p.global_dim[2], 1u);
  EXPECT_EQ(p.global_dim[3], 1u);
  EXPECT_EQ(p.global_strides[0], 400u);  // row stride in bytes
  EXPECT_EQ(p.box_dim[0], 64u);
  EXPECT_EQ(p.box_dim[1], 64u);
  EXPECT_EQ(p.box_dim[2], 1u);
  EXPECT_EQ(p.box_dim[3], 1u);
  EXPECT_EQ(p.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(p.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
  EXPECT_EQ(p.oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  // Size-1 outer dimensions get dense, 16-B aligned strides the driver accepts.
  EXPECT_EQ(p.global_strides[1] % 16, 0u);
  EXPECT_EQ(p.global_strides[2] % 16, 0u);
  for (auto s : p.element_strides) EXPECT_EQ(s, 1u);
}

TEST(TmaDescriptor, SwizzleAndBoxFollowTheTile) {
  const auto g16 = make_gl(fake_pointer<bf16>(), {256, 256});
  using tile_64b = st_bf<64, 32>;
  using tile_32b = st_bf<64, 16>;
  using tile_none = st_bf<64, 8>;
  EXPECT_EQ(tma_parameters<tile_64b>(g16).swizzle, CU_TENSOR_MAP_SWIZZLE_64B);
  EXPECT_EQ(tma_parameters<tile_32b>(g16).swizzle, CU_TENSOR_MAP_SWIZZLE_32B);
  EXPECT_EQ(tma_parameters<tile_none>(g16).swizzle, CU_TENSOR_MAP_SWIZZLE_NONE);
  EXPECT_EQ(tma_parameters<tile_none>(g16).box_dim[0], 8u);
  // Two 128-B panels: the box is one panel wide.
  const auto wide = tma_parameters<st_bf<64, 128>>(g16);
  EXPECT_EQ(wide.box_dim[0], 64u);
  EXPECT_EQ(wide.box_dim[1], 64u);
  EXPECT_EQ(wide.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);

  const auto g32 = make_gl(fake_pointer<float>(), {64, 64});
  const auto f = tma_parameters<st_fl<32, 32>>(g32);
  EXPECT_EQ(f.data_type, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(f.box_dim[0], 32u);
  EXPECT_EQ(f.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);

  const auto g8 = make_gl(fake_pointer<fp8e4m3>(), {64, 256});
  const auto e = tma_parameters<st_fp8e4m3<64, 128>>(g8);
  EXPECT_EQ(e.data_type, CU_TENSOR_MAP_DATA_TYPE_UINT8);  // fp8 travels as bytes
  EXPECT_EQ(e.box_dim[0], 128u);
  EXPECT_EQ(e.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
}

TEST(TmaDescriptor, StridedFourDimensionalView) {
  // batch 2, depth 3, rows 100, cols 77; padded rows (88), depth (8808) and batch strides.
  const auto g = make_gl(fake_pointer<bf16>(), {2, 3, 100, 77}, {3 * 8808 + 64, 8808, 88, 1});
  const auto p = tma_parameters<st_bf<64, 32>>(g, {tma_l2_promotion::bytes_256, tma_oob_fill::nan});
  EXPECT_EQ(p.global_dim[0], 77u);
  EXPECT_EQ(p.global_dim[1], 100u);
  EXPECT_EQ(p.global_dim[2], 3u);
  EXPECT_EQ(p.global_dim[3], 2u);
  EXPECT_EQ(p.global_strides[0], 88u * 2);
  EXPECT_EQ(p.global_strides[1], 8808u * 2);
  EXPECT_EQ(p.global_strides[2], (3u * 8808 + 64) * 2);
  EXPECT_EQ(p.l2_promotion, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  EXPECT_EQ(p.oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
}

TEST(TmaDescriptor, SizeOneDimensionsMayHaveAnyStride) {
  // A single row whose "row stride" is meaningless (0), as strided make_gl leaves it.
  const auto g = make_gl(fake_pointer<bf16>(), {1, 24}, {0, 1});
  const auto p = tma_parameters<st_bf<64, 8>>(g);
  EXPECT_EQ(p.global_strides[0], 48u);  // 24 * 2 B, already 16-B aligned
}

TEST(TmaDescriptor, RejectsMisalignedPointer) {
  const auto g = make_gl(fake_pointer<bf16>(8), {64, 64});
  expect_invalid([&] { (void)tma_parameters<st_bf<64, 64>>(g); }, "16-byte aligned");
  expect_invalid([&] { (void)make_tma_map<st_bf<64, 64>>(g); }, "16-byte aligned");  // before any driver call
}

TEST(TmaDescriptor, RejectsRowStrideNotMultipleOf16Bytes) {
  const auto g = make_gl(fake_pointer<bf16>(), {64, 100}, {100, 1});  // 200 B rows
  expect_invalid([&] { (void)tma_parameters<st_bf<64, 64>>(g); }, "rows stride (100 elements = 200 bytes)");
  expect_invalid([&] { (void)make_tma_map<st_bf<64, 64>>(g); }, "multiple of 16 bytes");
}

TEST(TmaDescriptor, RejectsBadDepthAndBatchStrides) {
  const auto depth = make_gl(fake_pointer<float>(), {4, 32, 32}, {32 * 32 + 1, 32, 1});
  expect_invalid([&] { (void)tma_parameters<st_fl<32, 32>>(depth); }, "depth stride");
  const auto batch = make_gl(fake_pointer<float>(), {2, 1, 32, 32}, {-1024, 0, 32, 1});
  expect_invalid([&] { (void)tma_parameters<st_fl<32, 32>>(batch); }, "must not be negative");
}

TEST(TmaDescriptor, RejectsBadShapesAndPointers) {
  auto g = make_gl(fake_pointer<bf16>(), {64, 64});
  g.shape[2] = 0;
  expect_invalid([&] { (void)tma_parameters<st_bf<64, 64>>(g); }, "rows = 0");
  auto null_view = make_gl(static_cast<bf16*>(nullptr), {64, 64});
  expect_invalid([&] { (void)tma_parameters<st_bf<64, 64>>(null_view); }, "null");
  auto non_contiguous = make_gl(fake_pointer<bf16>(), {64, 64});
  non_contiguous.strides[3] = 2;
  expect_invalid([&] { (void)tma_parameters<st_bf<64, 64>>(non_contiguous); }, "contiguous");
  const auto fp8_view = make_gl(fake_pointer<fp8e4m3>(), {64, 128});
  expect_invalid([&] { (void)tma_parameters<st_fp8e4m3<64, 128>>(fp8_view, {.oob_fill = tma_oob_fill::nan}); },
                 "NaN out-of-bounds fill");
}

TEST(TmaDescriptor, ErrorsAreReadable) {
  const auto g = make_gl(fake_pointer<bf16>(4), {64, 64});
  try {
    (void)tma_parameters<st_bf<64, 64>>(g);
    FAIL() << "no exception";
  } catch (const tilekit::error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("tilekit: invalid argument: tma map:", 0), 0u) << m;
    EXPECT_NE(m.find("off by 4 bytes"), std::string::npos) << m;
  }
}

}  // namespace
