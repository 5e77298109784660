// CPU tests of the wgmma descriptor math (include/tilekit/ops/warpgroup/descriptor.cuh):
// bit fields, the K advance, and that the canonical layout the descriptor
// describes (HOPPER_NOTES 1.5) addresses exactly the bytes st::offset uses.
// Also checks the register-order assumptions mma.cuh makes about rt tiles
// (HOPPER_NOTES 1.8 / 1.9).
#include <gtest/gtest.h>

#include <cstdint>

#include "tilekit/ops/warpgroup/descriptor.cuh"
#include "tilekit/tiles/rt.cuh"
#include "tilekit/tiles/st.cuh"

using namespace tilekit;
using tilekit::warpgroup::operand_major;
using tilekit::warpgroup::smem_operand;

namespace {

// The fields of a descriptor, decoded independently of descriptor.cuh (bit
// positions from the PTX "Matrix Descriptor Format" table, HOPPER_NOTES 1.4).
struct decoded_descriptor {
  uint32_t start;  // bytes
  uint32_t leading_byte_offset;
  uint32_t stride_byte_offset;
  uint32_t base_offset;
  uint32_t layout;
};
decoded_descriptor decode(uint64_t d) {
  const auto field14 = [&](int lo) { return uint32_t((d >> lo) & 0x3FFF) << 4; };
  return {field14(0), field14(16), field14(32), uint32_t((d >> 49) & 7), uint32_t(d >> 62)};
}

// The hardware swizzle on an absolute shared address (HOPPER_NOTES 2.1).
uint32_t hardware_swizzle(int swizzle_bytes, uint32_t a) {
  const uint32_t mask = uint32_t(swizzle_bytes / 16 - 1);
  return a ^ (((a >> 7) & mask) << 4);
}

// A 1024-aligned tile address with cluster-rank bits set: the descriptor must
// mask them off (HOPPER_NOTES 1.4).
constexpr uint32_t tile_address = 0x2000;
constexpr uint32_t cluster_rank_bits = 1u << 24;

TEST(WgmmaDescriptor, WorkedExampleFromHopperNotes) {
  // 64x64 bf16, K-major, 128B swizzle at 0x2000 (HOPPER_NOTES 1.6).
  using op = smem_operand<st_bf<64, 64>, operand_major::k>;
  EXPECT_EQ(op::descriptor(tile_address, 0), 0x4000004000010200ull);
  // k-steps add 32 B = 2 units to the start field.
  EXPECT_EQ(op::descriptor(tile_address, 1), 0x4000004000010202ull);
  EXPECT_EQ(op::descriptor(tile_address, 2), 0x4000004000010204ull);
  EXPECT_EQ(op::descriptor(tile_address, 3), 0x4000004000010206ull);
  // Cluster-rank bits above the 18-bit window are dropped.
  EXPECT_EQ(op::descriptor(tile_address | cluster_rank_bits, 0), 0x4000004000010200ull);
  // K = 128: the second 64-column panel (8 KiB) starts at step 4: 0x...0400.
  using wide = smem_operand<st_bf<64, 128>, operand_major::k>;
  EXPECT_EQ(wide::k_steps, 8);
  EXPECT_EQ(wide::descriptor(tile_address, 4), 0x4000004000010400ull);
  EXPECT_EQ(wide::descriptor(tile_address, 7), 0x4000004000010406ull);
}

// Expected static fields for one operand type.
template <class Op>
void expect_fields(uint32_t lbo, uint32_t sbo, uint32_t layout_code) {
  const decoded_descriptor d = decode(Op::descriptor(tile_address, 0));
  EXPECT_EQ(d.start, tile_address);
  EXPECT_EQ(d.leading_byte_offset, lbo);
  EXPECT_EQ(d.stride_byte_offset, sbo);
  EXPECT_EQ(d.base_offset, 0u);
  EXPECT_EQ(d.layout, layout_code);
}

TEST(WgmmaDescriptor, FieldsKMajor) {
  // K-major swizzled: LBO field 1 (16 B, unused), SBO = 8 * S, code 1/2/3 for 128/64/32 B.
  expect_fields<smem_operand<st_bf<64, 64>, operand_major::k>>(16, 1024, 1);
  expect_fields<smem_operand<st_bf<64, 32>, operand_major::k>>(16, 512, 2);
  expect_fields<smem_operand<st_bf<64, 16>, operand_major::k>>(16, 256, 3);
  expect_fields<smem_operand<st_hf<256, 128>, operand_major::k>>(16, 1024, 1);
  expect_fields<smem_operand<st_bf<80, 48>, operand_major::k>>(16, 256, 3);  // 96-B rows: 3 panels of 32 B
  expect_fields<smem_operand<st<fp8e4m3, 64, 128>, operand_major::k>>(16, 1024, 1);
  expect_fields<smem_operand<st<fp8e5m2, 128, 64>, operand_major::k>>(16, 512, 2);
  expect_fields<smem_operand<st<fp8e4m3, 16, 32>, operand_major::k>>(16, 256, 3);
}

TEST(WgmmaDescriptor, FieldsMNMajor) {
  // MN-major swizzled: LBO = panel bytes (K_tile * S), SBO = 8 * S.
  expect_fields<smem_operand<st_bf<64, 64>, operand_major::mn>>(64 * 128, 1024, 1);    // A^T, K = 64
  expect_fields<smem_operand<st_bf<16, 64>, operand_major::mn>>(16 * 128, 1024, 1);    // A^T, K = 16
  expect_fields<smem_operand<st_bf<32, 256>, operand_major::mn>>(32 * 128, 1024, 1);   // B, 4 panels
  expect_fields<smem_operand<st_hf<16, 32>, operand_major::mn>>(16 * 64, 512, 2);      // 64-B rows
  expect_fields<smem_operand<st_bf<48, 48>, operand_major::mn>>(48 * 32, 256, 3);      // 96-B rows: 3 panels
  expect_fields<smem_operand<st_bf<128, 16>, operand_major::mn>>(128 * 32, 256, 3);    // N = 16
}

// The canonical swizzled layouts of HOPPER_NOTES 1.5, as the hardware reads
// them: the byte address of element (mn, k) of K-step `step`, computed from
// the descriptor's start/LBO/SBO only, then swizzled on absolute address bits.
template <class Op>
uint32_t canonical_address(uint64_t desc, int mn, int k) {
  using T = typename Op::element;
  constexpr int S = Op::swizzle_bytes;
  constexpr int e = int(sizeof(T));
  const decoded_descriptor d = decode(desc);
  uint32_t linear;
  if constexpr (Op::major == operand_major::k) {
    // ((8, m), (S/e, ...)) : ((S, SBO), (e, -)); one step never leaves the S-byte row.
    linear = d.start + uint32_t(mn / 8) * d.stride_byte_offset + uint32_t(mn % 8) * S + uint32_t(k * e);
  } else {
    // ((S/e, panels), (8, k/8)) : ((e, LBO), (S, SBO))
    constexpr int panel_elements = S / e;
    linear = d.start + uint32_t(mn / panel_elements) * d.leading_byte_offset + uint32_t(mn % panel_elements) * e +
             uint32_t(k / 8) * d.stride_byte_offset + uint32_t(k % 8) * S;
  }
  return hardware_swizzle(S, linear);
}

// For every K-step: the start address is the st::offset of the slice's first
// element, it follows the HOPPER_NOTES 1.7 table, advance() agrees with
// descriptor(), and every element the canonical layout reads is the element
// st::offset stores there.
template <class Tile, operand_major Major>
void check_k_steps() {
  using Op = smem_operand<Tile, Major>;
  using T = typename Tile::element;
  SCOPED_TRACE(testing::Message() << "st<" << dtype_traits<T>::name << ", " << Tile::rows << ", " << Tile::cols
                                  << ">, " << (Major == operand_major::k ? "K" : "MN") << "-major");
  constexpr int S = Tile::swizzle_bytes;
  constexpr int k_bytes = warpgroup::wgmma_k_bytes;
  const uint64_t first = Op::descriptor(tile_address, 0);
  for (int step = 0; step < Op::k_steps; ++step) {
    const uint64_t desc = Op::descriptor(tile_address, step);
    EXPECT_EQ(Op::advance(first, step), desc) << "step " << step;
    const uint32_t start = decode(desc).start - tile_address;
    const int k0 = step * Op::k_step;
    // The table of HOPPER_NOTES 1.7, written out independently.
    uint32_t table;
    if constexpr (Major == operand_major::k) {
      constexpr int steps_per_panel = S / k_bytes;
      table = uint32_t((step % steps_per_panel) * k_bytes + (step / steps_per_panel) * Tile::rows * S);
      EXPECT_EQ(start, Tile::offset(0, k0)) << "step " << step;
    } else {
      table = uint32_t(step * 16 * S);
      EXPECT_EQ(start, Tile::offset(k0, 0)) << "step " << step;
    }
    EXPECT_EQ(start, table) << "step " << step;
    // Every element of the step's 64-or-N x K-slice.
    for (int mn = 0; mn < Op::mn_extent; ++mn) {
      for (int k = 0; k < Op::k_step; ++k) {
        const uint32_t stored = Major == operand_major::k ? Tile::offset(mn, k0 + k) : Tile::offset(k0 + k, mn);
        ASSERT_EQ(canonical_address<Op>(desc, mn, k) - tile_address, stored)
            << "step " << step << ", mn " << mn << ", k " << k;
      }
    }
  }
}

TEST(WgmmaDescriptor, KAdvanceMatchesSharedTileLayoutKMajor) {
  check_k_steps<st_bf<64, 64>, operand_major::k>();
  check_k_steps<st_bf<64, 128>, operand_major::k>();  // panel crossing
  check_k_steps<st_bf<64, 32>, operand_major::k>();
  check_k_steps<st_bf<64, 16>, operand_major::k>();
  check_k_steps<st_hf<80, 96>, operand_major::k>();   // 192-B rows: 3 panels of 64 B
  check_k_steps<st_bf<256, 48>, operand_major::k>();  // 96-B rows: 3 panels of 32 B
  check_k_steps<st<fp8e4m3, 64, 128>, operand_major::k>();
  check_k_steps<st<fp8e5m2, 128, 256>, operand_major::k>();
  check_k_steps<st<fp8e4m3, 16, 64>, operand_major::k>();
  check_k_steps<st<fp8e4m3, 64, 32>, operand_major::k>();
}

TEST(WgmmaDescriptor, KAdvanceMatchesSharedTileLayoutMNMajor) {
  check_k_steps<st_bf<64, 64>, operand_major::mn>();
  check_k_steps<st_bf<128, 64>, operand_major::mn>();
  check_k_steps<st_hf<16, 64>, operand_major::mn>();
  check_k_steps<st_bf<32, 256>, operand_major::mn>();  // 4 panels along N
  check_k_steps<st_bf<64, 32>, operand_major::mn>();   // 64B swizzle
  check_k_steps<st_hf<32, 96>, operand_major::mn>();   // 64B swizzle, 3 panels
  check_k_steps<st_bf<48, 48>, operand_major::mn>();   // 32B swizzle, 3 panels
  check_k_steps<st_bf<16, 16>, operand_major::mn>();   // 32B swizzle, N = 16
}

// mma.cuh passes rt<float, 16, N>::data to wgmma as d[0..N/2) and
// rt<bf16, 16, K>::data[0][s][0..3] as step s's A registers. Both rely on
// rt's ownership map equalling the wgmma fragments (HOPPER_NOTES 1.8, 1.9).
TEST(WgmmaFragments, AccumulatorRegisterOrderIsRtOrder) {
  using acc = rt<float, 16, 256>;
  for (int lane = 0; lane < warp_threads; ++lane) {
    const int g = lane / 4, q = lane % 4;
    for (int i = 0; i < acc::cols / 2; ++i) {
      // d[i] lives in data[0][i / 8][(i / 2) % 4], half i % 2.
      const auto p = acc::position(lane, 0, i / 8, (i / 2) % 4, i % 2);
      EXPECT_EQ(p.row, g + 8 * ((i >> 1) & 1)) << "lane " << lane << " d[" << i << "]";
      EXPECT_EQ(p.col, 8 * (i >> 2) + 2 * q + (i & 1)) << "lane " << lane << " d[" << i << "]";
    }
  }
}

TEST(WgmmaFragments, RegisterAOperandIsRtOrder) {
  using a_tile = rt<bf16, 16, 64>;
  for (int lane = 0; lane < warp_threads; ++lane) {
    const int g = lane / 4, q = lane % 4;
    for (int step = 0; step < a_tile::width; ++step) {
      for (int i = 0; i < 8; ++i) {  // a_i: register i / 2, half i % 2
        const auto p = a_tile::position(lane, 0, step, i / 2, i % 2);
        EXPECT_EQ(p.row, g + 8 * ((i >> 1) & 1));
        EXPECT_EQ(p.col, 16 * step + 2 * q + (i & 1) + 8 * (i >> 2));
      }
    }
  }
}

}  // namespace
