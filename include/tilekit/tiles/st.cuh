#pragma once
// Shared tiles: st<T, Rows, Cols>, a row-major tile in shared memory whose
// 16-byte chunks are swizzled the way TMA writes them and wgmma reads them.
//
// Swizzle, derived from the row width in bytes (row_bytes = Cols * sizeof(T)):
//   row_bytes a multiple of 128  -> 128-byte swizzle, stored as panels of 128-B rows
//   row_bytes = 64 (or 64*odd)   -> 64-byte swizzle, panels of 64-B rows
//   row_bytes = 32 (or 32*odd)   -> 32-byte swizzle, panels of 32-B rows
//   row_bytes = 16               -> no swizzle (each 8 rows form one 128-B core matrix)
// A panel is Rows x S bytes (S = swizzle width); panel p holds columns
// [p*S/sizeof(T), (p+1)*S/sizeof(T)). Panels are stacked one after another,
// exactly as wgmma's K-major canonical layout and TMA's box (inner box = S) want.
//
// Inside a panel, row r, byte b of the row (0 <= b < S):
//   linear = r*S + b
//   offset = linear ^ (((linear >> 7) & (S/16 - 1)) << 4)
// i.e. the 16-B chunk index is XORed with the 128-byte line index (bits 7..9 for
// 128B, 7..8 for 64B, bit 7 for 32B). For a 128-B swizzle, 8 rows of 8 chunks:
//   r0: 0 1 2 3 4 5 6 7      r4: 4 5 6 7 0 1 2 3
//   r1: 1 0 3 2 5 4 7 6      r5: 5 4 7 6 1 0 3 2
//   r2: 2 3 0 1 6 7 4 5      r6: 6 7 4 5 2 3 0 1
//   r3: 3 2 1 0 7 6 5 4      r7: 7 6 5 4 3 2 1 0   (slot s of row r holds chunk s^r)
// The hardware swizzles on absolute shared addresses, so the tile is aligned to
// the swizzle repeat (8*S bytes: 1024/512/256) and panels are multiples of it.
// Besides matching the hardware, the swizzle makes the 8 rows of an 8x16-B
// ldmatrix/stmatrix access fall in 8 different bank groups (conflict-free).

#include <cstdint>
#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/util.cuh"

namespace tilekit {

enum class swizzle_mode : int { none = 0, b32 = 32, b64 = 64, b128 = 128 };

namespace detail {
template <class T, int Cols>
constexpr int swizzle_bytes_for() {
  constexpr int row_bytes = Cols * int(sizeof(T));
  if constexpr (row_bytes % 128 == 0) return 128;
  else if constexpr (row_bytes % 64 == 0) return 64;
  else if constexpr (row_bytes % 32 == 0) return 32;
  else return 0;
}
}  // namespace detail

// Byte offset of (row, byte-in-row) in a swizzled panel of `panel_rows` rows of
// `swizzle_bytes` bytes (0 = unswizzled rows of `row_bytes`).
TILEKIT_HOST_DEVICE constexpr uint32_t swizzled_offset(int swizzle_bytes, int row, int byte_in_row) {
  const uint32_t linear = uint32_t(row) * uint32_t(swizzle_bytes) + uint32_t(byte_in_row);
  const uint32_t mask = uint32_t(swizzle_bytes / 16 - 1);  // 7, 3, 1
  return linear ^ (((linear >> 7) & mask) << 4);
}

template <class T, int Rows, int Cols>
struct st {
  using element = T;
  static constexpr int rows = Rows;
  static constexpr int cols = Cols;
  static constexpr int row_bytes = Cols * int(sizeof(T));
  static constexpr int swizzle_bytes = detail::swizzle_bytes_for<T, Cols>();
  static constexpr swizzle_mode swizzle = static_cast<swizzle_mode>(swizzle_bytes);
  static_assert(Rows > 0 && Cols > 0, "shared tile must not be empty");
  static_assert(row_bytes == 16 || swizzle_bytes != 0,
                "shared tile rows must be 16 bytes or a multiple of 32 bytes wide; pad Cols");
  static_assert(Rows % 8 == 0, "shared tile rows must be a multiple of 8 (one swizzle atom)");
  // Columns per panel and number of panels.
  static constexpr int panel_cols = swizzle_bytes ? swizzle_bytes / int(sizeof(T)) : Cols;
  static constexpr int panels = Cols / panel_cols;
  static constexpr int panel_bytes = Rows * (swizzle_bytes ? swizzle_bytes : row_bytes);
  static constexpr int bytes = Rows * row_bytes;
  // Alignment: the swizzle repeat (8 rows of S bytes); at least 128 B (TMA destinations).
  static constexpr int alignment = swizzle_bytes ? 8 * swizzle_bytes : 128;
  static constexpr int elements = Rows * Cols;

  alignas(alignment) T data[Rows * Cols];

  // Byte offset of element (r, c) from the start of the tile.
  TILEKIT_HOST_DEVICE static constexpr uint32_t offset(int r, int c) {
    if constexpr (swizzle_bytes == 0) {
      return uint32_t(r * row_bytes + c * int(sizeof(T)));
    } else {
      const int panel = c / panel_cols;
      const int byte_in_row = (c % panel_cols) * int(sizeof(T));
      return uint32_t(panel * panel_bytes) + swizzled_offset(swizzle_bytes, r, byte_in_row);
    }
  }

  TILEKIT_HOST_DEVICE T& operator()(int r, int c) {
    return *reinterpret_cast<T*>(reinterpret_cast<char*>(data) + offset(r, c));
  }
  TILEKIT_HOST_DEVICE const T& operator()(int r, int c) const {
    return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(data) + offset(r, c));
  }
#if defined(__CUDACC__)
  // 32-bit shared-window address of the first byte (what PTX shared operands take).
  TILEKIT_DEVICE TILEKIT_INLINE uint32_t address() const {
    return static_cast<uint32_t>(__cvta_generic_to_shared(data));
  }
#endif
};

// Rows [i*SubRows, (i+1)*SubRows) of a single-panel shared tile, as a tile of its own: the
// rows of one panel are contiguous and every SubRows-row block starts on the swizzle
// repeat, so the block is itself a valid st (for TMA boxes and wgmma operands, e.g. one
// consumer warpgroup's 64 rows of a 128-row A tile, or half of a multicast B tile).
template <int SubRows, class T, int Rows, int Cols>
TILEKIT_HOST_DEVICE st<T, SubRows, Cols>& row_block(st<T, Rows, Cols>& tile, int i) {
  using block = st<T, SubRows, Cols>;
  static_assert(st<T, Rows, Cols>::panels == 1, "row_block needs a single-panel tile (rows <= swizzle width)");
  static_assert(Rows % SubRows == 0, "SubRows must divide the tile's rows");
  static_assert((SubRows * st<T, Rows, Cols>::row_bytes) % block::alignment == 0,
                "row blocks must start on the swizzle repeat (SubRows a multiple of 8)");
  return *reinterpret_cast<block*>(reinterpret_cast<char*>(tile.data) + size_t(i) * SubRows * block::row_bytes);
}
template <int SubRows, class T, int Rows, int Cols>
TILEKIT_HOST_DEVICE const st<T, SubRows, Cols>& row_block(const st<T, Rows, Cols>& tile, int i) {
  return row_block<SubRows>(const_cast<st<T, Rows, Cols>&>(tile), i);
}

template <class T>
inline constexpr bool is_st = false;
template <class T, int R, int C>
inline constexpr bool is_st<st<T, R, C>> = true;

template <int R, int C> using st_bf = st<bf16, R, C>;
template <int R, int C> using st_hf = st<fp16, R, C>;
template <int R, int C> using st_fl = st<float, R, C>;
template <int R, int C> using st_fp8e4m3 = st<fp8e4m3, R, C>;

}  // namespace tilekit
