#pragma once
// Argument checks shared by the softmax and cross-entropy host APIs (internal header).
// Every check throws tilekit::invalid_argument whose message starts with the name of the
// offending field, so a caller (and the CPU tests) can tell which argument was wrong.

#include <cmath>
#include <cstdint>
#include <limits>

#include "tilekit/core/dtypes.cuh"
#include "tilekit/core/error.cuh"

namespace tilekit::kernels::detail {

// The row kernels launch (clusters of) CTAs along grid x; at most 16 CTAs per row (the
// widest cluster) and 2^31 - 1 CTAs in x bound the number of rows.
inline constexpr int64_t max_grid_x = (int64_t(1) << 31) - 1;
inline constexpr int64_t max_ctas_per_row = 16;
inline constexpr int64_t max_rows = max_grid_x / max_ctas_per_row;

inline bool is_supported_float_type(dtype type) {
  return type == dtype::bf16 || type == dtype::fp16 || type == dtype::fp32;
}

inline void check_type(dtype type, const char* name) {
  TILEKIT_CHECK_ARG(is_supported_float_type(type), name, ": element type must be bf16, fp16 or fp32, got ",
                    dtype_name(type));
}

// Non-null and aligned to `alignment` bytes (the element size: vector loads fall back to
// scalar ones for rows that are not 16-byte aligned, but a misaligned element is a bug).
inline void check_pointer(const void* pointer, const char* name, int alignment) {
  TILEKIT_CHECK_ARG(pointer != nullptr, name, ": must not be null");
  TILEKIT_CHECK_ARG(reinterpret_cast<uintptr_t>(pointer) % uintptr_t(alignment) == 0, name, ": must be aligned to ",
                    alignment, " bytes (its element size), got address ", pointer);
}

inline void check_rows(int64_t rows) {
  TILEKIT_CHECK_ARG(rows >= 1, "rows: must be >= 1, got ", rows);
  TILEKIT_CHECK_ARG(rows <= max_rows, "rows: must be <= ", max_rows, " (grid limit), got ", rows);
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
