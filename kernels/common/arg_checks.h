#pragma once
// Argument checks shared by the softmax and cross-entropy host APIs, and the row bound of
// every row kernel (internal header).
// Every check throws tilekit::invalid_argument whose message starts with the name of the
// offending field, so a caller (and the CPU tests) can tell which argument was wrong.

#include <cmath>
#include <cstdint>
#include <limits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"

namespace tilekit::kernels::detail {

// The most rows a launch takes: 2^27 - 1. An API bound, not a grid limit: the row kernels are
// persistent (at most 132 workers, common/row_kernel.cuh), but they count items, claims and
// posted rounds in 32 bits, and this bound (from when the grid had a CTA per row and CTA of
// a cluster: (2^31 - 1) / 16) keeps every such count below 2^31 (the paced visits of 16-CTA
// clusters: up to 2^31 - 16). Larger launches would need
// a GPU test of those counts first. The norms take it too (norms/norm_kernels.cuh, check_shape).
inline constexpr int64_t max_rows = ((int64_t(1) << 31) - 1) / 16;

inline bool is_supported_float_type(dtype type) {
  return type == dtype::bf16 || type == dtype::fp16 || type == dtype::fp32;
}

inline void check_type(dtype type, const char* name) {
  TILEKIT_CHECK_ARG(is_supported_float_type(type), name, ": element type must be bf16, fp16 or fp32, got ",
                    dtype_name(type));
}

// Non-null and aligned to `alignment` bytes (the element size: rows that are not 16-byte
// aligned are only slower, streamed shifted or accessed element by element, but a misaligned
// element is a bug).
inline void check_pointer(const void* pointer, const char* name, int alignment) {
  TILEKIT_CHECK_ARG(pointer != nullptr, name, ": must not be null");
  TILEKIT_CHECK_ARG(reinterpret_cast<uintptr_t>(pointer) % uintptr_t(alignment) == 0, name, ": must be aligned to ",
                    alignment, " bytes (its element size), got address ", pointer);
}

inline void check_rows(int64_t rows) {
  TILEKIT_CHECK_ARG(rows >= 1, "rows: must be >= 1, got ", rows);
  TILEKIT_CHECK_ARG(rows <= max_rows, "rows: must be <= ", max_rows, ", got ", rows);
}

inline void check_cols(int64_t cols, int64_t max_cols, const char* name) {
  TILEKIT_CHECK_ARG(cols >= 1 && cols <= max_cols, name, ": must be in [1, ", max_cols, "], got ", cols);
}

// A row stride in elements: >= cols, and the last row must end inside int64 element offsets.
inline void check_row_stride(int64_t stride, int64_t rows, int64_t cols, const char* name) {
  TILEKIT_CHECK_ARG(stride >= cols, name, ": row stride must be >= cols (", cols, "), got ", stride);
  TILEKIT_CHECK_ARG(stride <= std::numeric_limits<int64_t>::max() / rows, name,
                    ": rows * row stride overflows int64 (rows ", rows, ", stride ", stride, ")");
}

// In-place use is allowed only when the output IS the input with the same row stride.
inline void check_alias(const void* out, int64_t out_stride, const void* in, int64_t in_stride, const char* name) {
  TILEKIT_CHECK_ARG(out != in || out_stride == in_stride, name,
                    ": in-place use needs equal row strides of input and output, got ", out_stride, " and ", in_stride);
}

inline void check_finite(float value, const char* name) {
  TILEKIT_CHECK_ARG(std::isfinite(value), name, ": must be finite, got ", value);
}

}  // namespace tilekit::kernels::detail
