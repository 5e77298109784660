#pragma once
// wgmma shared-memory matrix descriptors, derived from an st<T, R, C> type.
//
// A wgmma operand in shared memory is described by a 64-bit word
// (HOPPER_NOTES 1.4, PTX "Matrix Descriptor Format"):
//
//    63 62|61  52|51 49|48 46|45        32|31 30|29        16|15 14|13         0
//   +-----+------+-----+-----+------------+-----+------------+-----+------------+
//   | swz |  0   |base |  0  | enc(SBO)   |  0  | enc(LBO)   |  0  | enc(start) |
//   +-----+------+-----+-----+------------+-----+------------+-----+------------+
//   enc(x) = (x & 0x3FFFF) >> 4   (bytes, 16-byte units, 256 KiB shared window)
//   swz: 1 = 128B, 2 = 64B, 3 = 32B swizzle (NOT the TMA enum, where 128B = 3)
//
// Which tile describes which operand ("major" = the contiguous dimension):
//
//   operand          | st type        | major | wgmma transpose immediate
//   -----------------+----------------+-------+---------------------------
//   A  (M x K)       | st<T, 64, K>   | K     | 0
//   A^T for At*      | st<T, K, 64>   | MN    | 1
//   B  (K x N)       | st<T, K, N>    | MN    | 1   (mma_AB, mma_AtB)
//   B^T for *Bt      | st<T, N, K>    | K     | 0   (mma_ABt, mma_AtBt)
//
// st stores a tile as panels of S-byte swizzled rows (st.cuh), S = 128/64/32.
// That is exactly wgmma's canonical swizzled layout (HOPPER_NOTES 1.5):
//   K-major:  rows are M/N, S bytes of K per panel row; 8 rows form one
//             8 x S-byte swizzle atom. SBO = step between 8-row groups = 8*S.
//             LBO is unused for swizzled K-major layouts (one instruction's
//             32 bytes of K never leave a panel); the field is written as 1.
//   MN-major: rows are K, S bytes of M/N per panel row. LBO = step between
//             consecutive M/N panels = the st's panel_bytes (= K_tile * S);
//             SBO = step between 8-K-row groups = 8*S.
// Tiles are aligned to their swizzle repeat (8*S bytes), so base_offset is 0
// (HOPPER_NOTES 1.7: the hardware swizzles on absolute addresses).
//
// Advancing along K (HOPPER_NOTES 1.7): every instruction consumes 32 bytes of
// K (16 bf16/fp16 or 32 fp8). Step s starts at the tile's byte offset of the
// first element of its K-slice, which st::offset gives directly:
//   K-major:  offset(0, s*k_step)  = +32 B inside a panel row, then the next panel
//   MN-major: offset(s*k_step, 0)  = +16 K-rows = 16*S bytes
// (Row 0 of a panel and rows that are multiples of 8 are never XOR-ed, so
// these offsets are plain, unswizzled byte offsets.) tests/cpu/test_wgmma_descriptor.cu
// checks every field and every step against st::offset.

#include <cstdint>
#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/tiles/st.cuh"

namespace tilekit::warpgroup {

// Which dimension of a wgmma operand is contiguous in shared memory.
enum class operand_major { k, mn };

// wgmma consumes this many bytes of K per instruction, whatever the type (HOPPER_NOTES 1.2).
inline constexpr int wgmma_k_bytes = 32;
// wgmma's M (rows of A and of the accumulator) is always 64.
inline constexpr int wgmma_m = 64;
// Elements of K per instruction for input type T: 16 for bf16/fp16, 32 for fp8.
template <class T>
inline constexpr int wgmma_k_step = wgmma_k_bytes / int(sizeof(T));

namespace descriptor_bits {
inline constexpr uint32_t address_mask = 0x3FFFF;  // 18-bit shared window (drops cluster rank bits)
inline constexpr int encode_shift = 4;              // fields count 16-byte units
inline constexpr int start_shift = 0;
inline constexpr int leading_offset_shift = 16;
inline constexpr int stride_offset_shift = 32;
inline constexpr int base_offset_shift = 49;
inline constexpr int swizzle_shift = 62;
// "Assumed 1" LBO of swizzled K-major layouts (HOPPER_NOTES 1.5), in bytes.
inline constexpr uint32_t unused_leading_offset = 16;
}  // namespace descriptor_bits

// The 14-bit field value of a byte quantity (address or offset).
TILEKIT_HOST_DEVICE constexpr uint64_t descriptor_field(uint32_t bytes) {
  return uint64_t((bytes & descriptor_bits::address_mask) >> descriptor_bits::encode_shift);
}

// The descriptor's 2-bit layout code for a swizzle width in bytes.
TILEKIT_HOST_DEVICE constexpr uint64_t descriptor_swizzle_code(int swizzle_bytes) {
  return swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
}

TILEKIT_HOST_DEVICE constexpr uint64_t make_descriptor(uint32_t start_address, uint32_t leading_byte_offset,
                                                       uint32_t stride_byte_offset, int swizzle_bytes) {
  using namespace descriptor_bits;
  return (descriptor_field(start_address) << start_shift) |
         (descriptor_field(leading_byte_offset) << leading_offset_shift) |
         (descriptor_field(stride_byte_offset) << stride_offset_shift) |
         (uint64_t(0) << base_offset_shift) |  // tiles are aligned to the swizzle repeat
         (descriptor_swizzle_code(swizzle_bytes) << swizzle_shift);
}

// How an st<T, R, C> is read as a wgmma operand of the given major-ness.
// `mn_extent` and `k_extent` are the operand's M-or-N and K sizes.
template <class Tile, operand_major Major>
struct smem_operand {
  static_assert(is_st<Tile>, "wgmma shared operands are st<T, Rows, Cols> tiles");
  using element = typename Tile::element;
  static_assert(is_16bit_float<element> || is_fp8<element>,
                "wgmma shared operands hold bf16, fp16, fp8 e4m3 or fp8 e5m2");
  static_assert(Major == operand_major::k || is_16bit_float<element>,
                "fp8 wgmma operands must be K-major (no transpose for 8-bit types): store B as st<T, N, K>");

  static constexpr operand_major major = Major;
  static constexpr int k_step = wgmma_k_step<element>;
  // K-major: rows are M/N, columns are K. MN-major: rows are K, columns are M/N.
  static constexpr int mn_extent = Major == operand_major::k ? Tile::rows : Tile::cols;
  static constexpr int k_extent = Major == operand_major::k ? Tile::cols : Tile::rows;
  static constexpr int k_steps = k_extent / k_step;
  static_assert(k_extent % k_step == 0,
                "the K extent of a wgmma operand tile must be a multiple of 16 (bf16/fp16) or 32 (fp8)");

  static constexpr int swizzle_bytes = Tile::swizzle_bytes;
  // MN-major tiles of 16-byte rows would need the unswizzled ("interleave")
  // canonical layout, whose LBO/SBO roles are not verified on hardware
  // (HOPPER_NOTES 1.5); with 16-bit data they only arise for N = 8, which no
  // register accumulator can hold.
  static_assert(swizzle_bytes != 0,
                "wgmma operand tiles must be swizzled: make the contiguous dimension at least 32 bytes "
                "(16 bf16/fp16 or 32 fp8 elements)");

  static constexpr uint32_t swizzle_atom_bytes = 8u * uint32_t(swizzle_bytes);  // 8 rows of S bytes
  static constexpr uint32_t leading_byte_offset =
      Major == operand_major::k ? descriptor_bits::unused_leading_offset : uint32_t(Tile::panel_bytes);
  static constexpr uint32_t stride_byte_offset = swizzle_atom_bytes;

  // Byte offset, from the tile start, of the first element of K-step `step`.
  TILEKIT_HOST_DEVICE static constexpr uint32_t k_step_offset(int step) {
    return Major == operand_major::k ? Tile::offset(0, step * k_step) : Tile::offset(step * k_step, 0);
  }

  // The descriptor of K-step `step` for a tile at shared address `tile_address`.
  TILEKIT_HOST_DEVICE static constexpr uint64_t descriptor(uint32_t tile_address, int step = 0) {
    return make_descriptor(tile_address + k_step_offset(step), leading_byte_offset, stride_byte_offset,
                           swizzle_bytes);
  }
  // Step s's descriptor from step 0's: only the start field changes (it never
  // carries into LBO: operand tiles are far below the 256 KiB window).
  TILEKIT_HOST_DEVICE static constexpr uint64_t advance(uint64_t first_step_descriptor, int step) {
    return first_step_descriptor + descriptor_field(k_step_offset(step));
  }
};

#if defined(__CUDACC__)
// Descriptor of K-step `step` of a tile in shared memory (device side).
template <operand_major Major, class Tile>
TILEKIT_DEVICE TILEKIT_INLINE uint64_t descriptor_of(const Tile& tile, int step = 0) {
  return smem_operand<Tile, Major>::descriptor(tile.address(), step);
}
#endif

}  // namespace tilekit::warpgroup
