#pragma once
// Element-wise maps over register tiles and register vectors.
//
// Generic forms (f is any device callable; elements are passed as float and
// the result is rounded to dst's element type, see common.cuh):
//   map(dst, src, f)            dst[x] = f(src[x])
//   map(dst, a, b, f)           dst[x] = f(a[x], b[x])
//   map_indexed(dst, src, f)    tiles:   dst(r, c) = f(r, c, src(r, c))   (tile-local row/col)
//                               vectors: dst[n]    = f(n, src[n])
// Named forms, destination first; the second operand of a binary op is a
// tile/vector of the same shape or a scalar:
//   add, sub, mul, div, max, min          e.g. add(dst, a, b), mul(dst, a, 0.5f)
//   exp2, exp, log2, log, abs, neg        e.g. exp2(dst, src)
//   copy                                  (conversions.cuh: also converts element types)
// exp2/exp/log2/log use the hardware approximations of core/math.cuh
// (ex2.approx / lg2.approx, relative error ~2^-22, flush-to-zero).
// dst may alias a source: each register is read before it is written.

#include "tilekit/core/math.cuh"
#include "tilekit/ops/warp/common.cuh"
#include "tilekit/ops/warp/conversions.cuh"

#if defined(__CUDACC__)
namespace tilekit::warp {

// ---------------------------------------------------------------------------
// Generic maps on tiles.
// ---------------------------------------------------------------------------
template <register_tile Dst, register_tile Src, class F>
TILEKIT_DEVICE TILEKIT_INLINE void map(Dst& dst, const Src& src, F f) {
  static_assert(same_tile_shape<Dst, Src>, "map: dst and src must have the same rows, cols and layout");
#pragma unroll
  for (int i = 0; i < Dst::height; ++i)
#pragma unroll
    for (int j = 0; j < Dst::width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k) {
        const float2 x = detail::pair_to_float2(src.data[i][j][k]);
        dst.data[i][j][k] = detail::float2_to_pair<typename Dst::packed>(make_float2(f(x.x), f(x.y)));
      }
}

template <register_tile Dst, register_tile A, register_tile B, class F>
TILEKIT_DEVICE TILEKIT_INLINE void map(Dst& dst, const A& a, const B& b, F f) {
  static_assert(same_tile_shape<Dst, A> && same_tile_shape<Dst, B>,
                "map: dst, a and b must have the same rows, cols and layout");
#pragma unroll
  for (int i = 0; i < Dst::height; ++i)
#pragma unroll
    for (int j = 0; j < Dst::width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k) {
        const float2 x = detail::pair_to_float2(a.data[i][j][k]);
        const float2 y = detail::pair_to_float2(b.data[i][j][k]);
        dst.data[i][j][k] = detail::float2_to_pair<typename Dst::packed>(make_float2(f(x.x, y.x), f(x.y, y.y)));
      }
}

template <register_tile Dst, register_tile Src, class F>
TILEKIT_DEVICE TILEKIT_INLINE void map_indexed(Dst& dst, const Src& src, F f) {
  static_assert(same_tile_shape<Dst, Src>, "map_indexed: dst and src must have the same rows, cols and layout");
  const int lane = laneid();
#pragma unroll
  for (int i = 0; i < Dst::height; ++i)
#pragma unroll
    for (int j = 0; j < Dst::width; ++j)
#pragma unroll
      for (int k = 0; k < fragment_pairs; ++k) {
        const float2 x = detail::pair_to_float2(src.data[i][j][k]);
        const fragment_position p0 = Dst::position(lane, i, j, k, 0);
        const fragment_position p1 = Dst::position(lane, i, j, k, 1);
        dst.data[i][j][k] =
            detail::float2_to_pair<typename Dst::packed>(make_float2(f(p0.row, p0.col, x.x), f(p1.row, p1.col, x.y)));
      }
}

// ---------------------------------------------------------------------------
// Generic maps on vectors.
// ---------------------------------------------------------------------------
template <register_vector Dst, register_vector Src, class F>
TILEKIT_DEVICE TILEKIT_INLINE void map(Dst& dst, const Src& src, F f) {
  static_assert(same_vector_shape<Dst, Src>, "map: dst and src vectors must have the same length and vec_layout");
#pragma unroll
  for (int i = 0; i < Dst::fragments; ++i)
#pragma unroll
    for (int e = 0; e < Dst::per_fragment; ++e)
      dst.data[i][e] = convert<typename Dst::element>(f(convert<float>(src.data[i][e])));
}

template <register_vector Dst, register_vector A, register_vector B, class F>
TILEKIT_DEVICE TILEKIT_INLINE void map(Dst& dst, const A& a, const B& b, F f) {
  static_assert(same_vector_shape<Dst, A> && same_vector_shape<Dst, B>,
                "map: dst, a and b vectors must have the same length and vec_layout");
#pragma unroll
  for (int i = 0; i < Dst::fragments; ++i)
#pragma unroll
    for (int e = 0; e < Dst::per_fragment; ++e)
      dst.data[i][e] =
          convert<typename Dst::element>(f(convert<float>(a.data[i][e]), convert<float>(b.data[i][e])));
}

template <register_vector Dst, register_vector Src, class F>
TILEKIT_DEVICE TILEKIT_INLINE void map_indexed(Dst& dst, const Src& src, F f) {
  static_assert(same_vector_shape<Dst, Src>,
                "map_indexed: dst and src vectors must have the same length and vec_layout");
  const int lane = laneid();
#pragma unroll
  for (int i = 0; i < Dst::fragments; ++i)
#pragma unroll
    for (int e = 0; e < Dst::per_fragment; ++e)
      dst.data[i][e] = convert<typename Dst::element>(f(Dst::index(lane, i, e), convert<float>(src.data[i][e])));
}

// ---------------------------------------------------------------------------
// Named element-wise operations.
// ---------------------------------------------------------------------------
namespace detail {
// Operands of a named op: all tiles or all vectors.
template <class Dst, class Src>
concept unary_map_operands = (register_tile<Dst> && register_tile<Src>) || (register_vector<Dst> && register_vector<Src>);
template <class Dst, class A, class B>
concept binary_map_operands = unary_map_operands<Dst, A> && unary_map_operands<Dst, B>;

// dst[x] = op(a[x], s). The scalar is taken by value everywhere, so a
// namespace-scope constexpr scalar can be passed from device code.
template <class Dst, class A, class S, class Op>
TILEKIT_DEVICE TILEKIT_INLINE void map_with_scalar(Dst& dst, const A& a, S scalar, Op op) {
  const float s = scalar_to_float(scalar);
  map(dst, a, [s, op](float x) { return op(x, s); });
}

struct add_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x, float y) const { return x + y; } };
struct sub_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x, float y) const { return x - y; } };
struct mul_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x, float y) const { return x * y; } };
struct div_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x, float y) const { return x / y; } };
struct max_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x, float y) const { return fmaxf(x, y); } };
struct min_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x, float y) const { return fminf(x, y); } };

struct exp2_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x) const { return exp2_fast(x); } };
struct exp_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x) const { return exp_fast(x); } };
struct log2_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x) const { return log2_fast(x); } };
struct log_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x) const { return log_fast(x); } };
struct abs_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x) const { return fabsf(x); } };
struct neg_op { TILEKIT_DEVICE TILEKIT_INLINE float operator()(float x) const { return -x; } };
}  // namespace detail

// dst = a + b, a - b, a * b, a / b (IEEE division), max(a, b), min(a, b)
// (fmaxf/fminf: a NaN operand loses); b is a tile/vector or a scalar.
template <class Dst, class A, class B>
  requires detail::binary_map_operands<Dst, A, B>
TILEKIT_DEVICE TILEKIT_INLINE void add(Dst& dst, const A& a, const B& b) {
  map(dst, a, b, detail::add_op{});
}
template <class Dst, class A, scalar_value S>
  requires detail::unary_map_operands<Dst, A>
TILEKIT_DEVICE TILEKIT_INLINE void add(Dst& dst, const A& a, S b) {
  detail::map_with_scalar(dst, a, b, detail::add_op{});
}
template <class Dst, class A, class B>
  requires detail::binary_map_operands<Dst, A, B>
TILEKIT_DEVICE TILEKIT_INLINE void sub(Dst& dst, const A& a, const B& b) {
  map(dst, a, b, detail::sub_op{});
}
template <class Dst, class A, scalar_value S>
  requires detail::unary_map_operands<Dst, A>
TILEKIT_DEVICE TILEKIT_INLINE void sub(Dst& dst, const A& a, S b) {
  detail::map_with_scalar(dst, a, b, detail::sub_op{});
}
template <class Dst, class A, class B>
  requires detail::binary_map_operands<Dst, A, B>
TILEKIT_DEVICE TILEKIT_INLINE void mul(Dst& dst, const A& a, const B& b) {
  map(dst, a, b, detail::mul_op{});
}
template <class Dst, class A, scalar_value S>
  requires detail::unary_map_operands<Dst, A>
TILEKIT_DEVICE TILEKIT_INLINE void mul(Dst& dst, const A& a, S b) {
  detail::map_with_scalar(dst, a, b, detail::mul_op{});
}
template <class Dst, class A, class B>
  requires detail::binary_map_operands<Dst, A, B>
TILEKIT_DEVICE TILEKIT_INLINE void div(Dst& dst, const A& a, const B& b) {
  map(dst, a, b, detail::div_op{});
}
template <class Dst, class A, scalar_value S>
  requires detail::unary_map_operands<Dst, A>
TILEKIT_DEVICE TILEKIT_INLINE void div(Dst& dst, const A& a, S b) {
  detail::map_with_scalar(dst, a, b, detail::div_op{});
}
template <class Dst, class A, class B>
  requires detail::binary_map_operands<Dst, A, B>
TILEKIT_DEVICE TILEKIT_INLINE void max(Dst& dst, const A& a, const B& b) {
  map(dst, a, b, detail::max_op{});
}
template <class Dst, class A, scalar_value S>
  requires detail::unary_map_operands<Dst, A>
TILEKIT_DEVICE TILEKIT_INLINE void max(Dst& dst, const A& a, S b) {
  detail::map_with_scalar(dst, a, b, detail::max_op{});
}
template <class Dst, class A, class B>
  requires detail::binary_map_operands<Dst, A, B>
TILEKIT_DEVICE TILEKIT_INLINE void min(Dst& dst, const A& a, const B& b) {
  map(dst, a, b, detail::min_op{});
}
template <class Dst, class A, scalar_value S>
  requires detail::unary_map_operands<Dst, A>
TILEKIT_DEVICE TILEKIT_INLINE void min(Dst& dst, const A& a, S b) {
  detail::map_with_scalar(dst, a, b, detail::min_op{});
}

// dst = 2^src, e^src, log2(src), ln(src) (fast hardware paths), |src|, -src.
template <class Dst, class Src>
  requires detail::unary_map_operands<Dst, Src>
TILEKIT_DEVICE TILEKIT_INLINE void exp2(Dst& dst, const Src& src) {
  map(dst, src, detail::exp2_op{});
}
template <class Dst, class Src>
  requires detail::unary_map_operands<Dst, Src>
TILEKIT_DEVICE TILEKIT_INLINE void exp(Dst& dst, const Src& src) {
  map(dst, src, detail::exp_op{});
}
template <class Dst, class Src>
  requires detail::unary_map_operands<Dst, Src>
TILEKIT_DEVICE TILEKIT_INLINE void log2(Dst& dst, const Src& src) {
  map(dst, src, detail::log2_op{});
}
template <class Dst, class Src>
  requires detail::unary_map_operands<Dst, Src>
TILEKIT_DEVICE TILEKIT_INLINE void log(Dst& dst, const Src& src) {
  map(dst, src, detail::log_op{});
}
template <class Dst, class Src>
  requires detail::unary_map_operands<Dst, Src>
TILEKIT_DEVICE TILEKIT_INLINE void abs(Dst& dst, const Src& src) {
  map(dst, src, detail::abs_op{});
}
template <class Dst, class Src>
  requires detail::unary_map_operands<Dst, Src>
TILEKIT_DEVICE TILEKIT_INLINE void neg(Dst& dst, const Src& src) {
  map(dst, src, detail::neg_op{});
}

}  // namespace tilekit::warp
#endif  // __CUDACC__
