#pragma once
// TMA descriptors (host side): tma_map<ST>, a CUtensorMap that moves tiles of type ST between
// a global view gl<T> and shared memory, built with make_tma_map<ST>(g).
//
//   gl<bf16> a = make_gl(ptr, {rows, cols});
//   auto map_a = make_tma_map<st_bf<64, 64>>(a);       // validates, then encodes
//   kernel<<<grid, block, smem>>>(map_a, ...);
//
//   __global__ void kernel(const __grid_constant__ tma_map<st_bf<64, 64>> map_a, ...)
//
// Why `const __grid_constant__`: the TMA unit reads the descriptor from memory by generic
// address. A by-value kernel parameter without __grid_constant__ may be copied to local
// memory, and TMA cannot read local memory: the first load fails with an illegal-address
// error (HOPPER_NOTES 3.4). __grid_constant__ keeps it in the parameter space, whose
// address is valid for TMA.
//
// How a gl maps to the tensor map (innermost dimension first, as the driver wants):
//
//   tensor dim   0: cols     1: rows        2: depth          3: batch
//   stride (B)   elem size   row_stride*e   depth_stride*e    batch_stride*e
//   box          panel_cols  ST::rows       1                 1
//
// The box is one panel of the tile: panel_cols = swizzle width / sizeof(T) (64 bf16 for a
// 128-byte swizzle), because the inner box may not exceed the swizzle span (HOPPER_NOTES 3.1).
// Tiles with ST::panels > 1 (e.g. st_bf<64, 128>) are loaded with one TMA per panel, panel p
// at column origin.c + p * panel_cols into the tile's bytes [p * panel_bytes, (p+1) * panel_bytes)
// (ops/memory/tma.cuh). Keeping the column walk in the coordinates, rather than in an extra
// tensor dimension, keeps the out-of-bounds zero fill exact for partial tiles in the column
// direction. The swizzle mode is ST::swizzle (st.cuh), so the bytes TMA writes are exactly
// the bytes ST::offset() addresses. fp8 goes as UINT8 (the copy does not look at values).
//
// Validation happens before the driver is called (so it needs no GPU and CPU tests can
// exercise it) and throws tilekit::invalid_argument naming the offending value:
//   * data pointer non-null and 16-byte aligned;
//   * every dimension in [1, 2^32]; the last stride 1;
//   * row / depth / batch strides (of dimensions larger than 1) non-negative, multiples of
//     16 bytes and below 2^40 bytes;
//   * NaN out-of-bounds fill only for floating-point element types.
// Tile-shape rules (box <= 256 rows, inner box a multiple of 16 bytes) are static_asserts.
//
// The encoder cuTensorMapEncodeTiled is a driver function; it is fetched with
// cudaGetDriverEntryPointByVersion (HOPPER_NOTES 3.2), so users do not link libcuda.
// <cuda.h> is included for the types only.

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"
#include "tilekit/core/util.cuh"
#include "tilekit/tiles/gl.cuh"
#include "tilekit/tiles/st.cuh"

namespace tilekit {

// L2 fill granularity when TMA misses in L2 (bigger = fewer, larger DRAM requests).
enum class tma_l2_promotion : int { none = 0, bytes_64 = 64, bytes_128 = 128, bytes_256 = 256 };
// What TMA loads for elements outside the tensor.
enum class tma_oob_fill : int {
  zero,  // zeros (all element types)
  nan,   // a quiet NaN that FMA treats as zero ("NAN_REQUEST_ZERO_FMA"); float types only
};

// What the map will be used for. TMA stores clip at the tensor edge only to 16-byte
// granularity along the contiguous dimension: on an H200 a store whose row ends inside a
// 16-byte chunk (e.g. 77 bf16 columns) wrote the whole chunk, i.e. 3 elements past the end
// of every row (tests/gpu/test_tma.cu, 2026-11-29). Loads clip exactly. So a map used for
// stores must have rows that end on a 16-byte boundary, which make_tma_map checks.
enum class tma_access : int { load, load_and_store };

struct tma_options {
  tma_l2_promotion l2_promotion = tma_l2_promotion::bytes_128;
  tma_oob_fill oob_fill = tma_oob_fill::zero;
  tma_access access = tma_access::load;
};

// A TMA descriptor for moving ST tiles. The tile type is part of the descriptor's type, so
// device code can only load / store the tile the map was encoded for.
template <class ST>
struct tma_map {
  static_assert(is_st<ST>, "tma_map<ST>: ST must be a shared tile type st<T, Rows, Cols>");
  using tile = ST;
  static_assert(alignof(CUtensorMap) >= 64, "TMA descriptors must be 64-byte aligned");
  CUtensorMap map;  // carries its own alignas (128 in CUDA 13 headers; the driver needs >= 64)
};

// The number of tensor-map dimensions tilekit uses: gl's (b, d, r, c).
inline constexpr int tma_rank = 4;
// Driver limits (cuda.h, cuTensorMapEncodeTiled).
inline constexpr int tma_max_box = 256;
inline constexpr int tma_address_alignment = 16;
inline constexpr int tma_stride_alignment = 16;
inline constexpr uint64_t tma_max_dim = uint64_t(1) << 32;
inline constexpr uint64_t tma_max_stride_bytes = uint64_t(1) << 40;
// First CUDA version whose cuTensorMapEncodeTiled signature we call (PFN_..._v12000).
inline constexpr unsigned tma_encoder_cuda_version = 12000;

// Everything cuTensorMapEncodeTiled receives, as plain values (innermost dimension first).
struct tma_encode_parameters {
  CUtensorMapDataType data_type;
  cuuint32_t rank = tma_rank;
  void* global_address = nullptr;
  cuuint64_t global_dim[tma_rank];
  cuuint64_t global_strides[tma_rank - 1];  // bytes, for dims 1..rank-1
  cuuint32_t box_dim[tma_rank];
  cuuint32_t element_strides[tma_rank];
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2_promotion;
  CUtensorMapFloatOOBfill oob_fill;
};

namespace detail {

template <class T>
constexpr CUtensorMapDataType tma_data_type() {
  if constexpr (std::is_same_v<T, bf16>) return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  else if constexpr (std::is_same_v<T, fp16>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else if constexpr (std::is_same_v<T, float>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else if constexpr (is_fp8<T>) return CU_TENSOR_MAP_DATA_TYPE_UINT8;  // TMA copies bytes; no fp8 type
  else static_assert(dependent_false<T>, "TMA maps support bf16, fp16, fp32, fp8 e4m3 / e5m2 tensors");
}

constexpr CUtensorMapSwizzle tma_swizzle(swizzle_mode s) {
  switch (s) {
    case swizzle_mode::b32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case swizzle_mode::b64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case swizzle_mode::b128: return CU_TENSOR_MAP_SWIZZLE_128B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

constexpr CUtensorMapL2promotion tma_l2(tma_l2_promotion p) {
  switch (p) {
    case tma_l2_promotion::bytes_64: return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
    case tma_l2_promotion::bytes_128: return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    case tma_l2_promotion::bytes_256: return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    default: return CU_TENSOR_MAP_L2_PROMOTION_NONE;
  }
}

inline const char* tma_dim_name(int gl_dim) {
  static const char* const names[tma_rank] = {"batch", "depth", "rows", "cols"};
  return names[gl_dim];
}

}  // namespace detail

// Validates `g` for TMA with tile type ST and computes the encoder's parameters. Host only,
// never calls the driver; throws tilekit::invalid_argument.
template <class ST, class T>
tma_encode_parameters tma_parameters(const gl<T>& g, const tma_options& options = {}) {
  static_assert(std::is_same_v<typename ST::element, T>,
                "make_tma_map<ST>(gl<T>): the tile's element type must be the tensor's element type");
  static_assert(ST::rows <= tma_max_box, "a TMA box has at most 256 rows: split the tile into shorter tiles");
  static_assert(ST::panel_cols <= tma_max_box, "a TMA box has at most 256 columns per panel");
  static_assert((ST::panel_cols * int(sizeof(T))) % tma_stride_alignment == 0,
                "the TMA inner box must be a multiple of 16 bytes (shared tile rows of 16 B or 32*k B)");
  static_assert(ST::panel_cols * int(sizeof(T)) == (ST::swizzle_bytes ? ST::swizzle_bytes : ST::row_bytes),
                "one TMA box is one panel of the swizzled tile");

  const auto address = reinterpret_cast<uintptr_t>(g.data);
  TILEKIT_CHECK_ARG(g.data != nullptr, "tma map: the tensor's data pointer is null");
  TILEKIT_CHECK_ARG(address % tma_address_alignment == 0, "tma map: the data pointer (0x", std::hex, address,
                    std::dec, ") must be ", tma_address_alignment, "-byte aligned, it is off by ",
                    address % tma_address_alignment, " bytes");
  for (int i = 0; i < tma_rank; ++i)
    TILEKIT_CHECK_ARG(g.shape[i] >= 1 && uint64_t(g.shape[i]) <= tma_max_dim, "tma map: ",
                      detail::tma_dim_name(i), " = ", g.shape[i], " must be in [1, 2^32]");
  TILEKIT_CHECK_ARG(g.strides[3] == 1, "tma map: the cols dimension must be contiguous (stride 1), got stride ",
                    g.strides[3]);

  constexpr int64_t element_bytes = int64_t(sizeof(T));
  TILEKIT_CHECK_ARG(options.access == tma_access::load || (g.shape[3] * element_bytes) % tma_stride_alignment == 0,
                    "tma map for stores: rows of ", g.shape[3], " elements (", g.shape[3] * element_bytes,
                    " bytes) do not end on a 16-byte boundary, and TMA stores would overwrite the rest of the "
                    "last 16-byte chunk of every row; store such tensors with warp::store / group::store");
  tma_encode_parameters p{};
  p.data_type = detail::tma_data_type<T>();
  p.rank = tma_rank;
  p.global_address = const_cast<void*>(static_cast<const void*>(g.data));
  // gl dims are (b, d, r, c) outermost first; the tensor map wants innermost first.
  for (int i = 0; i < tma_rank; ++i) p.global_dim[i] = cuuint64_t(g.shape[tma_rank - 1 - i]);
  // Strides of dims 1..3 = rows, depth, batch. A dimension of extent 1 is never stepped, so
  // its stride does not matter to the data; we give the driver the dense value (inner
  // stride x inner extent, 16-B rounded) so that views built with stride 0 for size-1 dims
  // are accepted.
  int64_t dense_stride_bytes = round_up<int64_t>(g.shape[3] * element_bytes, tma_stride_alignment);
  for (int i = 1; i < tma_rank; ++i) {
    const int gl_dim = tma_rank - 1 - i;  // 2 (rows), 1 (depth), 0 (batch)
    int64_t stride_bytes = dense_stride_bytes;
    if (g.shape[gl_dim] > 1) {
      stride_bytes = g.strides[gl_dim] * element_bytes;
      TILEKIT_CHECK_ARG(g.strides[gl_dim] >= 0, "tma map: the ", detail::tma_dim_name(gl_dim),
                        " stride must not be negative, got ", g.strides[gl_dim], " elements");
      TILEKIT_CHECK_ARG(stride_bytes % tma_stride_alignment == 0, "tma map: the ", detail::tma_dim_name(gl_dim),
                        " stride (", g.strides[gl_dim], " elements = ", stride_bytes,
                        " bytes) must be a multiple of ", tma_stride_alignment, " bytes");
      TILEKIT_CHECK_ARG(uint64_t(stride_bytes) < tma_max_stride_bytes, "tma map: the ",
                        detail::tma_dim_name(gl_dim), " stride (", stride_bytes, " bytes) must be below 2^40");
    }
    p.global_strides[i - 1] = cuuint64_t(stride_bytes);
    dense_stride_bytes = stride_bytes * g.shape[gl_dim];
  }
  p.box_dim[0] = cuuint32_t(ST::panel_cols);
  p.box_dim[1] = cuuint32_t(ST::rows);
  p.box_dim[2] = 1;
  p.box_dim[3] = 1;
  for (auto& s : p.element_strides) s = 1;
  p.interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  p.swizzle = detail::tma_swizzle(ST::swizzle);
  p.l2_promotion = detail::tma_l2(options.l2_promotion);
  constexpr bool is_float_type = is_16bit_float<T> || std::is_same_v<T, float>;
  if (options.oob_fill == tma_oob_fill::nan)
    TILEKIT_CHECK_ARG(is_float_type,
                      "tma map: NaN out-of-bounds fill needs a floating-point tensor (bf16, fp16, fp32), got ",
                      dtype_traits<T>::name);
  p.oob_fill = options.oob_fill == tma_oob_fill::nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                                     : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
  return p;
}

namespace detail {
// cuTensorMapEncodeTiled from the driver, looked up once per process.
inline PFN_cuTensorMapEncodeTiled_v12000 tma_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    TILEKIT_CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, tma_encoder_cuda_version,
                                                        cudaEnableDefault, &status));
    if (status != cudaDriverEntryPointSuccess || fn == nullptr)
      throw error(concat("tilekit: the CUDA driver does not provide cuTensorMapEncodeTiled (query status ",
                         int(status), "); TMA needs a driver for CUDA 12.0 or newer"),
                  __FILE__, __LINE__);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encoder;
}
}  // namespace detail

// Encodes already-validated parameters into `map`. Throws tilekit::invalid_argument when the
// driver still rejects them (it should not: tma_parameters checks the documented rules).
inline void encode_tma_map(CUtensorMap& map, const tma_encode_parameters& p) {
  const CUresult result =
      detail::tma_encoder()(&map, p.data_type, p.rank, p.global_address, p.global_dim, p.global_strides, p.box_dim,
                            p.element_strides, p.interleave, p.swizzle, p.l2_promotion, p.oob_fill);
  TILEKIT_CHECK_ARG(result == CUDA_SUCCESS, "tma map: cuTensorMapEncodeTiled failed with CUresult ", int(result),
                    " (dims ", p.global_dim[0], "x", p.global_dim[1], "x", p.global_dim[2], "x", p.global_dim[3],
                    ", strides ", p.global_strides[0], "/", p.global_strides[1], "/", p.global_strides[2],
                    " B, box ", p.box_dim[0], "x", p.box_dim[1], ", swizzle ", int(p.swizzle), ")");
}

// A TMA descriptor that moves ST tiles between `g` and shared memory. Host only; does not
// synchronize (safe under graph capture). Throws tilekit::invalid_argument on a view TMA
// cannot address.
template <class ST, class T>
tma_map<ST> make_tma_map(const gl<T>& g, const tma_options& options = {}) {
  const tma_encode_parameters p = tma_parameters<ST>(g, options);
  tma_map<ST> m{};
  encode_tma_map(m.map, p);
  return m;
}

}  // namespace tilekit
