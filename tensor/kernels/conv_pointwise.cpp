// conv_pointwise.cpp - the forward pass of f32 1x1 convolutions (stride 1,
// no padding, one group) of at most 64 input channels: y[n] [O, P] =
// W [O, K] x[n] [K, P], read and written in place, with the bias and the
// epilogue applied while the outputs are in cache.
//
// These are MobileNet's, EfficientNet's and ShuffleNet's expansions, where
// OpenBLAS served them badly: with few input channels a call zeroes y,
// packs x, then adds into y, and the epilogue reads y once more: several
// passes over an output of several MB at 20-35 GFLOP/s. Here each output is
// written once: a register tile of 6 outputs by two vectors of positions
// sums all K terms, the weights broadcast from their rows as they lie, x's
// rows read in place. With more input channels OpenBLAS's packed blocks
// were as fast or faster on most of MobileNetV2's and ShuffleNetV2's shapes
// at batch 1 and 8 (up to 1.7x faster with 144 channels into 24), and
// conv.cpp's products run them.
//
// Every output is one chain of fused multiply-adds over k = 0, 1, ... K-1
// from zero (in every lane of the full and the masked tiles alike), then
// the bias, then the epilogue: its bits do not depend on how the work is
// cut into tiles or threads, so eager mode, compiled plans and any thread
// count give the same values.
#include <immintrin.h>

#include <algorithm>

#include "../thread_pool.h"
#include "conv_geometry.h"

namespace lazylua::conv_detail {
namespace {

// The tiles need FMA and AVX2 or AVX-512; a build without them keeps
// OpenBLAS's products (conv.cpp).
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define LAZYLUA_POINTWISE_TILES 1
#endif

#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
using Vec = __m512;
inline Vec load(const float* p) {
  return _mm512_loadu_ps(p);
}
inline void store(float* p, Vec v) {
  _mm512_storeu_ps(p, v);
}
inline Vec broadcast(float v) {
  return _mm512_set1_ps(v);
}
inline Vec zero() {
  return _mm512_setzero_ps();
}
inline Vec fused(Vec a, Vec b, Vec c) {
  return _mm512_fmadd_ps(a, b, c);
}
// The first n lanes (n < kLanes); the others read as zero and are not written.
using Mask = __mmask16;
inline Mask first_lanes(int64_t n) {
  return static_cast<Mask>((1u << n) - 1);
}
inline Vec load(const float* p, Mask m) {
  return _mm512_maskz_loadu_ps(m, p);
}
inline void store(float* p, Vec v, Mask m) {
  _mm512_mask_storeu_ps(p, m, v);
}
#elif defined(LAZYLUA_POINTWISE_TILES)
constexpr int64_t kLanes = 8;
using Vec = __m256;
inline Vec load(const float* p) {
  return _mm256_loadu_ps(p);
}
inline void store(float* p, Vec v) {
  _mm256_storeu_ps(p, v);
}
inline Vec broadcast(float v) {
  return _mm256_set1_ps(v);
}
inline Vec zero() {
  return _mm256_setzero_ps();
}
inline Vec fused(Vec a, Vec b, Vec c) {
  return _mm256_fmadd_ps(a, b, c);
}
using Mask = __m256i;
inline Mask first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline Vec load(const float* p, Mask m) {
  return _mm256_maskload_ps(p, m);
}
inline void store(float* p, Vec v, Mask m) {
  _mm256_maskstore_ps(p, m, v);
}
#endif

#ifdef LAZYLUA_POINTWISE_TILES
// Output rows per register tile, and its positions (two vectors): 12
// accumulators, 2 loads of x and 6 broadcasts for 12 multiply-adds.
constexpr int kRows = 6;
constexpr int64_t kTile = 2 * kLanes;
// Input channels at most (one pass over the terms).
constexpr int64_t kMaxDepth = 64;
// Positions per work item at most, and items wanted at least (bands of
// output rows make up the rest); the bytes of output one item writes
// between two epilogue passes (they stay in L2 until it runs).
constexpr int64_t kItemColumns = 1024;
constexpr int64_t kMinItems = 8;
constexpr int64_t kChunkBytes = 128 << 10;

// y rows [R, Vectors * kLanes] = w rows [R, depth] (rows depth apart) x
// [depth, same].
template <int R, int Vectors>
[[gnu::always_inline]] inline void tile(const float* w, const float* x, int64_t ldx, int64_t depth,
                                        float* y, int64_t ldy) {
  Vec sum[R][Vectors];
  for (int r = 0; r < R; r++) {
    for (int v = 0; v < Vectors; v++) sum[r][v] = zero();
  }
  for (int64_t k = 0; k < depth; k++) {
    Vec column[Vectors];
    for (int v = 0; v < Vectors; v++) column[v] = load(x + k * ldx + v * kLanes);
    for (int r = 0; r < R; r++) {
      const Vec weight = broadcast(w[r * depth + k]);
      for (int v = 0; v < Vectors; v++) sum[r][v] = fused(weight, column[v], sum[r][v]);
    }
  }
  for (int r = 0; r < R; r++) {
    for (int v = 0; v < Vectors; v++) store(y + r * ldy + v * kLanes, sum[r][v]);
  }
}

// The last positions of a run, fewer than a vector: the same lanes, masked
// (the multiply-adds of a lane do not depend on the others).
template <int R>
[[gnu::always_inline]] inline void masked_tile(const float* w, const float* x, int64_t ldx,
                                               int64_t depth, float* y, int64_t ldy, Mask mask) {
  Vec sum[R];
  for (int r = 0; r < R; r++) sum[r] = zero();
  for (int64_t k = 0; k < depth; k++) {
    const Vec column = load(x + k * ldx, mask);
    for (int r = 0; r < R; r++) sum[r] = fused(broadcast(w[r * depth + k]), column, sum[r]);
  }
  for (int r = 0; r < R; r++) store(y + r * ldy, sum[r], mask);
}

// R rows of y over `columns` positions.
template <int R>
void rows_of_tiles(const float* w, const float* x, int64_t ldx, int64_t depth, float* y,
                   int64_t ldy, int64_t columns) {
  int64_t p = 0;
  for (; p + kTile <= columns; p += kTile) tile<R, 2>(w, x + p, ldx, depth, y + p, ldy);
  for (; p + kLanes <= columns; p += kLanes) tile<R, 1>(w, x + p, ldx, depth, y + p, ldy);
  if (p < columns) {
    masked_tile<R>(w, x + p, ldx, depth, y + p, ldy, first_lanes(columns - p));
  }
}

using RowsFunction = void (*)(const float*, const float*, int64_t, int64_t, float*, int64_t,
                              int64_t);
constexpr RowsFunction kRowsOf[kRows + 1] = {nullptr,          rows_of_tiles<1>, rows_of_tiles<2>,
                                             rows_of_tiles<3>, rows_of_tiles<4>, rows_of_tiles<5>,
                                             rows_of_tiles<6>};
#endif

}  // namespace

bool pointwise_forward(const ConvGeometry& g, const Array& x_array, const Array& weight,
                       const Array& bias, const Array& y_array, const ConvEpilogue& epilogue) {
#ifdef LAZYLUA_POINTWISE_TILES
  if (y_array.dtype != DType::f32 || g.groups != 1 || !g.pointwise() || g.c > kMaxDepth) {
    return false;
  }
  const int64_t depth = g.c, outputs = g.o, plane = g.out_plane();
  const float* x = x_array.data<float>();
  const float* w = weight.data<float>();
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  float* y = y_array.data<float>();
  // Items: samples x runs of positions (whole tiles, the tail in the last)
  // x bands of output rows (whole register tiles) when those are too few.
  const int64_t runs = std::max<int64_t>(1, plane / kItemColumns);
  const int64_t run_size = (plane / runs + kTile - 1) / kTile * kTile;
  const int64_t row_tiles = (outputs + kRows - 1) / kRows;
  const int64_t bands =
      std::clamp<int64_t>((kMinItems + g.n * runs - 1) / (g.n * runs), 1, row_tiles);
  const int64_t band_size = (row_tiles + bands - 1) / bands * kRows;
  const int64_t chunk = std::clamp<int64_t>(
      kChunkBytes / (band_size * int64_t{sizeof(float)}) / kTile * kTile, kTile, kItemColumns);
  parallel_for(g.n * runs * bands, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; item++) {
      const int64_t sample = item / (runs * bands), run = item / bands % runs;
      const int64_t r0 = item % bands * band_size, r1 = std::min(outputs, r0 + band_size);
      const int64_t p0 = run * run_size, p1 = run + 1 == runs ? plane : p0 + run_size;
      if (r0 >= r1 || p0 >= p1) continue;
      const float* xs = x + sample * depth * plane;
      float* ys = y + sample * outputs * plane;
      for (int64_t c0 = p0; c0 < p1; c0 += chunk) {
        const int64_t columns = std::min(chunk, p1 - c0);
        for (int64_t r = r0; r < r1; r += kRows) {
          const int rows = static_cast<int>(std::min<int64_t>(kRows, r1 - r));
          kRowsOf[rows](w + r * depth, xs + c0, plane, depth, ys + r * plane + c0, plane, columns);
        }
        for (int64_t r = r0; r < r1; r++) {  // the rows just written, while in cache
          float* at = ys + r * plane + c0;
          if (b) {
            epilogue.apply_after_adding(at, columns, b[r]);
          } else {
            epilogue.apply(at, columns);
          }
        }
      }
    }
  });
  return true;
#else
  (void)g, (void)x_array, (void)weight, (void)bias, (void)y_array, (void)epilogue;
  return false;
#endif
}

}  // namespace lazylua::conv_detail
