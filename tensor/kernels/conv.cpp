// conv.cpp - convolutions of spatial rank 1 to 3 as matrix products over
// columns built a chunk at a time; the dispatch to oneDNN's kernels
// (conv_onednn.cpp), to the register tiles of narrow 1x1 windows
// (conv_pointwise.cpp) and to the direct depthwise ones (conv_depthwise.cpp).
//
// A group's columns (im2col: row (c, taps) holds input channel c shifted by
// the tap under every output position) are built for one chunk of output
// positions at a time, into a buffer of at most kScratchElements, and
// multiplied by the group's weight [O/groups, C/groups * taps] with one
// BLAS call per chunk. A chunk is several whole samples when a sample's
// output plane is small, else a run of one sample's positions, so no
// temporary grows with the input size, the dilation or the batch: the full
// column matrix (9x the input for a 3x3 kernel) is never in memory.
// A 1x1 window with stride 1 and no padding over a plane of at least
// kMinChunkColumns positions needs no columns at all: the input is the
// right-hand matrix as it lies, one product per sample. Over smaller
// planes its columns gather several samples into one product.
//
// Chunks (and groups) run in parallel, each with a single-threaded BLAS
// call; a convolution of fewer than kMinItems chunks and groups splits each
// product into bands of output rows (input channels for the input
// gradient) instead. Every BLAS call is made whole on one thread
// (float_gemm_unsplit): OpenBLAS's bits for an element can depend on the
// extent of the call computing it. The chunks and bands depend only on the
// shapes, never on the thread count; every output element is one BLAS dot
// product over the same terms, an input gradient element sums its terms in
// chunk order, and the weight gradient adds a fixed number of partial sums
// in a fixed order: the same inputs give the same bits with any number of
// threads (tests/lua/test_conv_threads.lua).
#include "conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../thread_pool.h"
#include "conv_geometry.h"
#include "matmul.h"

namespace lazylua {
namespace {

using conv_detail::ceil_div;
using conv_detail::ConvGeometry;
using conv_detail::inside_range;
using conv_detail::kPartialSums;
using conv_detail::thread_scratch;

// Elements of one chunk's columns: 4 MiB of f32 per thread, kept between
// calls (thread_scratch).
constexpr int64_t kScratchElements = int64_t{1} << 20;
// Output positions per chunk. BLAS packs the whole weight again for every
// call, so a call needs enough columns to pay for that (at 49 columns, one
// sample of a 7x7 plane, the packing of ResNet-18's last weights took as
// long as the product); more than the maximum only costs cache.
constexpr int64_t kMinChunkColumns = 256;
constexpr int64_t kMaxChunkColumns = 4096;
// Positions of a part of a plane cut to give threads work, at least.
constexpr int64_t kMinPartColumns = 128;
// Work items a convolution is cut into at least: chunks and groups, and
// when those are fewer, bands of each one's product (output rows or input
// channels), whose number depends on the shapes alone. Bands of output
// rows build the same columns each, so those stop at kMinBandItems.
constexpr int64_t kMinItems = 4;
constexpr int64_t kMinBandItems = 2;
// Partial sums of a weight gradient, per group (a bound on the memory the
// gradient takes beyond the weight's size, and the work split across threads).
constexpr int64_t kWeightTasks = 8;

// Samples [first, first + count) whole, or one sample's output positions
// [begin, end) (count == 1).
struct Chunk {
  int64_t first = 0, count = 1, begin = 0, end = 0;
  int64_t span() const { return end - begin; }
  int64_t columns() const { return count * span(); }
};

// How a convolution's output positions are cut into chunks, from the shapes
// alone. Chunks of one layer are of equal size (the last may be shorter),
// so that they spread evenly over threads.
class Chunking {
 public:
  explicit Chunking(const ConvGeometry& g) : samples_(g.n), plane_(g.out_plane()) {
    // A 1x1 window over a plane of enough positions reads the input as it
    // lies, one sample per call; a small plane is gathered with other
    // samples' into one product instead (a copy, cheaper than packing the
    // weight once per sample).
    direct_ = g.pointwise() && (plane_ >= kMinChunkColumns || samples_ == 1);
    // Chunks (with the groups) enough to give the threads work.
    const int64_t wanted = ceil_div(kMinItems, std::max<int64_t>(1, g.groups));
    const int64_t columns =
        direct_ ? plane_
                : std::clamp<int64_t>(kScratchElements / std::max<int64_t>(1, g.rows()),
                                      kMinChunkColumns, kMaxChunkColumns);
    if (plane_ <= columns) {
      const int64_t most =
          direct_ ? 1 : std::max<int64_t>(1, columns / std::max<int64_t>(1, plane_));
      const int64_t chunks = std::max(ceil_div(samples_, most), std::min(samples_, wanted));
      per_chunk_ = std::max<int64_t>(1, ceil_div(samples_, chunks));
      parts_ = 1;
    } else {
      per_chunk_ = 1;
      parts_ = ceil_div(plane_, columns);
    }
    // Too few samples: each plane is cut into more parts, of at least
    // kMinPartColumns positions (fewer chunks are split by bands instead).
    if (per_chunk_ == 1 && samples_ * parts_ < wanted) {
      parts_ = std::max(parts_, std::min(ceil_div(wanted, std::max<int64_t>(1, samples_)),
                                         plane_ / kMinPartColumns));
    }
    part_size_ = ceil_div(plane_, parts_);
  }
  // The input itself is the chunk's columns (a 1x1 window, one sample per chunk).
  bool direct() const { return direct_; }
  // Chunks in order: sample-major, positions within a sample.
  int64_t count() const { return parts_ == 1 ? ceil_div(samples_, per_chunk_) : samples_ * parts_; }
  // Chunks holding one sample or one run of samples (an input gradient runs
  // one such unit per task, its chunks in order).
  int64_t units() const { return parts_ == 1 ? count() : samples_; }
  int64_t chunks_per_unit() const { return parts_; }
  Chunk chunk(int64_t index) const {
    Chunk c;
    if (parts_ == 1) {
      c.first = index * per_chunk_;
      c.count = std::min(per_chunk_, samples_ - c.first);
      c.begin = 0;
      c.end = plane_;
    } else {
      c.first = index / parts_;
      c.begin = (index % parts_) * part_size_;
      c.end = std::min(plane_, c.begin + part_size_);
    }
    return c;
  }

 private:
  int64_t samples_, plane_;
  int64_t per_chunk_ = 1, parts_ = 1, part_size_ = 0;
  bool direct_ = false;
};

// Runs body(item) for items [0, count) on the pool.
template <typename Body>
void for_each_item(int64_t count, Body&& body) {
  parallel_for(count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; item++) body(item);
  });
}

// Product rows per band at least, a multiple of the 16 floats of a vector.
constexpr int64_t kBandAlign = 16;

// How many bands each of `items` items is split into to make `wanted`,
// over an extent whose bands are multiples of `align`.
int64_t band_count(int64_t items, int64_t wanted, int64_t extent, int64_t align) {
  if (items >= wanted) return 1;
  return std::clamp<int64_t>(ceil_div(wanted, items), 1,
                             std::max<int64_t>(1, extent / (2 * align)));
}

// Band `index` of `bands` over [0, extent): [begin, end), maybe empty.
std::pair<int64_t, int64_t> band_range(int64_t extent, int64_t bands, int64_t index,
                                       int64_t align) {
  const int64_t step = ceil_div(ceil_div(extent, bands), align) * align;
  const int64_t begin = std::min(extent, index * step);
  return {begin, std::min(extent, begin + step)};
}

// One BLAS call on this thread: the convolution splits the work itself.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  float_gemm_unsplit(std::is_same_v<T, double>, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}

// Calls line(od, oh, ow0, ow1, at) for the runs of output positions
// [begin, end) of a plane that lie on one output line (od, oh): outputs
// ow0..ow1-1, the first of them position begin + at.
template <typename Line>
void for_each_line(const ConvGeometry& g, int64_t begin, int64_t end, Line&& line) {
  for (int64_t p = begin; p < end;) {
    const int64_t row = p / g.out[2], ow0 = p % g.out[2];
    const int64_t ow1 = std::min(g.out[2], ow0 + (end - p));
    line(row / g.out[1], row % g.out[1], ow0, ow1, p - begin);
    p += ow1 - ow0;
  }
}

// Calls tap(row, c, i, j, l) for every column row of `channels` channels:
// (channel c, tap (i, j, l)) in order.
template <typename Tap>
void for_each_row(const ConvGeometry& g, int64_t channels, Tap&& tap) {
  int64_t row = 0;
  for (int64_t c = 0; c < channels; c++) {
    for (int64_t i = 0; i < g.kernel[0]; i++) {
      for (int64_t j = 0; j < g.kernel[1]; j++) {
        for (int64_t l = 0; l < g.kernel[2]; l++) tap(row++, c, i, j, l);
      }
    }
  }
}

// The input line read by output line (od, oh) under tap (i, j), or -1
// when it is padding.
inline int64_t input_line(const ConvGeometry& g, int64_t od, int64_t oh, int64_t i, int64_t j) {
  const int64_t id = od * g.stride[0] - g.pad_before[0] + i * g.dilation[0];
  const int64_t ih = oh * g.stride[1] - g.pad_before[1] + j * g.dilation[1];
  if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) return -1;
  return id * g.in[1] + ih;
}

// dest[ow] = source[ow * stride + offset] for ow in [a, e): a loop, not a
// memcpy call, since most lines are a few dozen elements.
template <typename T>
inline void copy_line(T* __restrict dest, const T* __restrict source, int64_t stride,
                      int64_t offset, int64_t a, int64_t e) {
  if (stride == 1) {
    const T* __restrict shifted = source + offset;
#pragma GCC unroll 1
    for (int64_t ow = a; ow < e; ow++) dest[ow] = shifted[ow];
  } else {
    for (int64_t ow = a; ow < e; ow++) dest[ow] = source[ow * stride + offset];
  }
}

// The columns [rows, chunk.columns()] of the chunk for the group whose
// first input channel is channel0: zero where the window reads padding.
template <typename T>
void im2col(const T* x, const ConvGeometry& g, int64_t channel0, const Chunk& chunk, T* cols) {
  const int64_t width = chunk.columns(), span = chunk.span(), in_plane = g.in_plane();
  const int64_t stride = g.stride[2];
  for_each_row(
      g, g.channels_per_group, [&](int64_t row, int64_t c, int64_t i, int64_t j, int64_t l) {
        const int64_t offset = l * g.dilation[2] - g.pad_before[2];
        int64_t lo, hi;
        inside_range(g.in[2], g.out[2], stride, offset, &lo, &hi);
        for (int64_t b = 0; b < chunk.count; b++) {
          const T* image = x + ((chunk.first + b) * g.c + channel0 + c) * in_plane;
          T* out = cols + row * width + b * span;
          for_each_line(g, chunk.begin, chunk.end,
                        [&](int64_t od, int64_t oh, int64_t ow0, int64_t ow1, int64_t at) {
                          T* dest = out + at - ow0;  // dest[ow]
                          const int64_t line = input_line(g, od, oh, i, j);
                          if (line < 0) {
                            std::fill(dest + ow0, dest + ow1, T(0));
                            return;
                          }
                          const int64_t a = std::clamp(lo, ow0, ow1), e = std::clamp(hi, a, ow1);
                          std::fill(dest + ow0, dest + a, T(0));
                          copy_line(dest, image + line * g.in[2], stride, offset, a, e);
                          std::fill(dest + e, dest + ow1, T(0));
                        });
        }
      });
}

// The inverse: adds the columns of `channels` channels into grad_x's,
// from channel0 on.
template <typename T>
void col2im(const T* cols, const ConvGeometry& g, int64_t channel0, int64_t channels,
            const Chunk& chunk, T* grad_x) {
  const int64_t width = chunk.columns(), span = chunk.span(), in_plane = g.in_plane();
  const int64_t stride = g.stride[2];
  for_each_row(g, channels, [&](int64_t row, int64_t c, int64_t i, int64_t j, int64_t l) {
    const int64_t offset = l * g.dilation[2] - g.pad_before[2];
    int64_t lo, hi;
    inside_range(g.in[2], g.out[2], stride, offset, &lo, &hi);
    for (int64_t b = 0; b < chunk.count; b++) {
      T* image = grad_x + ((chunk.first + b) * g.c + channel0 + c) * in_plane;
      const T* in = cols + row * width + b * span;
      for_each_line(g, chunk.begin, chunk.end,
                    [&](int64_t od, int64_t oh, int64_t ow0, int64_t ow1, int64_t at) {
                      const int64_t line = input_line(g, od, oh, i, j);
                      if (line < 0) return;
                      T* __restrict target = image + line * g.in[2];
                      const T* __restrict source = in + at - ow0;  // source[ow]
                      const int64_t a = std::clamp(lo, ow0, ow1), e = std::clamp(hi, a, ow1);
                      if (stride == 1) {
                        T* __restrict shifted = target + offset;
                        for (int64_t ow = a; ow < e; ow++) shifted[ow] += source[ow];
                      } else {
                        for (int64_t ow = a; ow < e; ow++) {
                          target[ow * stride + offset] += source[ow];
                        }
                      }
                    });
    }
  });
}

// A group's rows of grad_y (or y) for a chunk: a matrix [O/groups,
// chunk.columns()] and its leading dimension; gathered into `buffer` (of
// that size) when the chunk spans several samples.
template <typename T>
std::pair<const T*, int64_t> output_rows(const T* y, const ConvGeometry& g, int64_t group,
                                         const Chunk& chunk, T* buffer) {
  const int64_t plane = g.out_plane(), og = g.outputs_per_group, span = chunk.span();
  const T* rows = y + (chunk.first * g.o + group * og) * plane + chunk.begin;
  if (chunk.count == 1) return {rows, plane};
  for (int64_t r = 0; r < og; r++) {
    for (int64_t b = 0; b < chunk.count; b++) {
      std::copy_n(rows + b * g.o * plane + r * plane, span, buffer + (r * chunk.count + b) * span);
    }
  }
  return {buffer, chunk.columns()};
}

// A group's columns for a chunk: the input itself when direct, else built
// into `buffer` (of g.rows() * chunk.columns()).
template <typename T>
std::pair<const T*, int64_t> input_columns(const T* x, const ConvGeometry& g,
                                           const Chunking& chunking, int64_t group,
                                           const Chunk& chunk, T* buffer) {
  const int64_t channel0 = group * g.channels_per_group;
  if (chunking.direct()) {
    return {x + (chunk.first * g.c + channel0) * g.in_plane() + chunk.begin, g.in_plane()};
  }
  if (g.pointwise() && chunk.span() == g.in_plane()) {
    // Small planes of a 1x1 window gathered side by side: one copy per plane
    // (im2col's line-by-line walk took longer than the product here).
    const int64_t plane = g.in_plane(), width = chunk.columns();
    for (int64_t c = 0; c < g.channels_per_group; c++) {
      for (int64_t b = 0; b < chunk.count; b++) {
        std::copy_n(x + ((chunk.first + b) * g.c + channel0 + c) * plane, plane,
                    buffer + c * width + b * plane);
      }
    }
    return {buffer, width};
  }
  im2col(x, g, channel0, chunk, buffer);
  return {buffer, chunk.columns()};
}

// Elements of a chunk's columns in scratch (none when direct).
int64_t columns_size(const ConvGeometry& g, const Chunking& chunking, const Chunk& chunk) {
  return chunking.direct() ? 0 : g.rows() * chunk.columns();
}

// Elements of a chunk's gathered output rows in scratch (none for one sample).
int64_t gathered_size(const ConvGeometry& g, const Chunk& chunk) {
  return chunk.count == 1 ? 0 : g.outputs_per_group * chunk.columns();
}

template <typename T>
void forward(const ConvGeometry& g, const Array& x_array, const Array& weight, const Array& bias,
             const Array& y_array, const ConvEpilogue& epilogue) {
  const Chunking chunking(g);
  const int64_t rows = g.rows(), plane = g.out_plane(), og = g.outputs_per_group;
  const int64_t bands = band_count(chunking.count() * g.groups, kMinBandItems, og, kBandAlign);
  const T* x = x_array.data<T>();
  const T* w = weight.data<T>();
  const T* b = bias.defined() ? bias.data<T>() : nullptr;
  T* y = y_array.data<T>();
  for_each_item(chunking.count() * g.groups * bands, [&](int64_t item) {
    const Chunk chunk = chunking.chunk(item / (g.groups * bands));
    const int64_t group = item / bands % g.groups;
    const auto [r0, r1] = band_range(og, bands, item % bands, kBandAlign);
    if (r0 == r1) return;
    const int64_t cols_size = columns_size(g, chunking, chunk);
    T* scratch = thread_scratch<T>(cols_size + gathered_size(g, chunk));
    const auto [columns, ld] = input_columns(x, g, chunking, group, chunk, scratch);
    const T* band_weight = w + (group * og + r0) * rows;
    const int64_t width = chunk.columns(), span = chunk.span();
    if (chunk.count == 1) {  // straight into y[n] [O, plane]
      T* target = y + (chunk.first * g.o + group * og + r0) * plane + chunk.begin;
      gemm<T>(false, false, r1 - r0, span, rows, band_weight, rows, columns, ld, target, plane);
      for (int64_t r = r0; r < r1; r++) {  // the rows just written, while in cache
        T* at = target + (r - r0) * plane;
        if (!b) {
          epilogue.apply(at, span);
        } else if (epilogue.count > 0) {
          epilogue.apply_after_adding(at, span, b[group * og + r]);
        } else {
          const T add = b[group * og + r];
          for (int64_t p = 0; p < span; p++) at[p] += add;
        }
      }
      return;
    }
    T* product = scratch + cols_size;
    gemm<T>(false, false, r1 - r0, width, rows, band_weight, rows, columns, ld, product, width);
    for (int64_t r = r0; r < r1; r++) {
      const T add = b ? b[group * og + r] : T(0);
      for (int64_t s = 0; s < chunk.count; s++) {
        const T* __restrict from = product + (r - r0) * width + s * span;
        T* __restrict to = y + ((chunk.first + s) * g.o + group * og + r) * plane;
        for (int64_t p = 0; p < span; p++) to[p] = from[p] + add;
        epilogue.apply(to, span);
      }
    }
  });
}

// Adds bias[c] to every position of channels [c0, c0 + count) of samples
// [first, first + samples).
template <typename T>
void add_channel_bias(T* x, const T* bias, const ConvGeometry& g, int64_t first, int64_t samples,
                      int64_t c0, int64_t count) {
  const int64_t plane = g.in_plane();
  for (int64_t s = first; s < first + samples; s++) {
    for (int64_t c = c0; c < c0 + count; c++) {
      T* at = x + (s * g.c + c) * plane;
      const T add = bias[c];
      for (int64_t p = 0; p < plane; p++) at[p] += add;
    }
  }
}

template <typename T>
void backward_input(const ConvGeometry& g, const Array& grad_y, const Array& weight,
                    const Array& bias, const Array& grad_x) {
  const Chunking chunking(g);
  const int64_t rows = g.rows(), og = g.outputs_per_group, cg = g.channels_per_group;
  const int64_t in_plane = g.in_plane(), taps = g.taps();
  const T* gy = grad_y.data<T>();
  const T* w = weight.data<T>();
  const T* b = bias.defined() ? bias.data<T>() : nullptr;
  T* gx = grad_x.data<T>();
  // One task per unit (a sample, or a run of small samples), group and band
  // of input channels: the unit's chunks add into overlapping inputs, so
  // they run in order.
  const int64_t parts = chunking.chunks_per_unit();
  const int64_t bands = band_count(chunking.units() * g.groups, kMinItems, cg, 1);
  for_each_item(chunking.units() * g.groups * bands, [&](int64_t item) {
    const int64_t unit = item / (g.groups * bands), group = item / bands % g.groups;
    const auto [c0, c1] = band_range(cg, bands, item % bands, 1);
    if (c0 == c1) return;
    const Chunk whole = chunking.chunk(unit * parts);
    const int64_t channel0 = group * cg + c0, channels = c1 - c0;
    // Rows [c0 * taps, c1 * taps) of W^T: columns of the group's W.
    const T* band_weight = w + group * og * rows + c0 * taps;
    for (int64_t part = 0; part < parts; part++) {
      const Chunk chunk = chunking.chunk(unit * parts + part);
      const int64_t gathered = gathered_size(g, chunk);
      const int64_t cols_size = chunking.direct() ? 0 : channels * taps * chunk.columns();
      T* scratch = thread_scratch<T>(gathered + cols_size);
      const auto [rows_of_g, ld] = output_rows(gy, g, group, chunk, scratch);
      if (chunking.direct()) {  // grad_x[n] rows = W^T g, no columns
        T* target = gx + (chunk.first * g.c + channel0) * in_plane + chunk.begin;
        gemm<T>(true, false, channels, chunk.span(), og, band_weight, rows, rows_of_g, ld, target,
                in_plane);
        continue;
      }
      if (part == 0) {
        for (int64_t s = whole.first; s < whole.first + whole.count; s++) {
          T* at = gx + (s * g.c + channel0) * in_plane;
          std::fill(at, at + channels * in_plane, T(0));
        }
      }
      T* cols = scratch + gathered;
      // cols [band rows, columns] = W^T [band rows, O/groups] @ g [O/groups, columns]
      gemm<T>(true, false, channels * taps, chunk.columns(), og, band_weight, rows, rows_of_g, ld,
              cols, chunk.columns());
      col2im(cols, g, channel0, channels, chunk, gx);
    }
    if (b) add_channel_bias(gx, b, g, whole.first, whole.count, channel0, channels);
  });
}

// The weight gradient's partial sums: task 0 of each group sums straight
// into grad_weight, tasks 1.. into a buffer of the calling thread's, added
// after in task order. A task of few may be split into bands of the
// weight's output rows.
template <typename T>
void backward_weight(const ConvGeometry& g, const Array& grad_y, const Array& x_array,
                     const Array& grad_weight) {
  const Chunking chunking(g);
  const int64_t rows = g.rows(), og = g.outputs_per_group;
  const int64_t chunks = chunking.count(), tasks = std::min(chunks, kWeightTasks);
  const int64_t bands = band_count(g.groups * tasks, kMinBandItems, og, kBandAlign);
  const int64_t size = og * rows;  // one group's weight
  const T* gy = grad_y.data<T>();
  const T* x = x_array.data<T>();
  T* out = grad_weight.data<T>();
  T* partial = thread_scratch<T, kPartialSums>(g.groups * (tasks - 1) * size);
  for_each_item(g.groups * tasks * bands, [&](int64_t item) {
    const int64_t group = item / (tasks * bands), task = item / bands % tasks;
    const auto [r0, r1] = band_range(og, bands, item % bands, kBandAlign);
    if (r0 == r1) return;
    const int64_t first = task * chunks / tasks, last = (task + 1) * chunks / tasks;
    T* sum = (task == 0 ? out + group * size : partial + (group * (tasks - 1) + task - 1) * size) +
             r0 * rows;
    const int64_t band_size = (r1 - r0) * rows;
    for (int64_t index = first; index < last; index++) {
      const Chunk chunk = chunking.chunk(index);
      // The gathered rows, the columns, then the product of a later chunk.
      const int64_t gathered = gathered_size(g, chunk);
      const int64_t cols_size = columns_size(g, chunking, chunk);
      T* scratch = thread_scratch<T>(gathered + cols_size + (index > first ? band_size : 0));
      const auto [rows_of_g, ld_g] = output_rows(gy, g, group, chunk, scratch);
      const auto [cols, ld_cols] = input_columns(x, g, chunking, group, chunk, scratch + gathered);
      T* product = scratch + gathered + cols_size;
      // [band rows, rows] = g [band rows, columns] @ cols^T [columns, rows]
      gemm<T>(false, true, r1 - r0, rows, chunk.columns(), rows_of_g + r0 * ld_g, ld_g, cols,
              ld_cols, index > first ? product : sum, rows);
      if (index > first) {
        for (int64_t e = 0; e < band_size; e++) sum[e] += product[e];
      }
    }
  });
  for (int64_t group = 0; group < g.groups; group++) {
    T* target = out + group * size;
    for (int64_t task = 1; task < tasks; task++) {
      const T* add = partial + (group * (tasks - 1) + task - 1) * size;
      for (int64_t e = 0; e < size; e++) target[e] += add[e];
    }
  }
}

// Copies the taps [first, first + count) of each spatial dim of `weight`
// into `kept`; false when a tap left out is not finite.
template <typename T>
bool copy_kept_taps(const Array& weight, int rank, const int64_t* first, const int64_t* count,
                    const Array& kept) {
  int64_t extent[3] = {1, 1, 1}, from[3] = {0, 0, 0}, size[3] = {1, 1, 1};
  for (int d = 0; d < rank; d++) {
    extent[3 - rank + d] = weight.shape[2 + d];
    from[3 - rank + d] = first[d];
    size[3 - rank + d] = count[d];
  }
  const T* source = weight.data<T>();
  T* target = kept.data<T>();
  const int64_t filters = weight.shape[0] * weight.shape[1];
  for (int64_t f = 0; f < filters; f++) {
    for (int64_t a = 0; a < extent[0]; a++) {
      for (int64_t b = 0; b < extent[1]; b++) {
        const bool row_kept =
            a >= from[0] && a < from[0] + size[0] && b >= from[1] && b < from[1] + size[1];
        for (int64_t c = 0; c < extent[2]; c++) {
          const T value = *source++;
          if (row_kept && c >= from[2] && c < from[2] + size[2]) {
            *target++ = value;
          } else if (!std::isfinite(value)) {
            return false;
          }
        }
      }
    }
  }
  return true;
}

// The taps of a window that read only padding, at every output position,
// add nothing but zeros: DeepLabV3's ASPP (dilation 36 and padding 36 over
// a 32x32 map) reads the input through its centre tap alone. The window
// without those taps (and with that much less padding) gives the same
// outputs for 1/9 of the work, here as a 1x1 window. False when no tap can
// go, or a tap that would go holds a weight that is not finite (zero times
// it is NaN, which the outputs must keep).
bool trim_window(const Array& x, const Array& weight, const Array& y, const ConvWindow& window,
                 ConvWindow* trimmed, Array* kept) {
  if (window.groups != 1) return false;
  int64_t first[ConvWindow::kMaxRank], count[ConvWindow::kMaxRank];
  bool any = false;
  *trimmed = window;
  for (int d = 0; d < window.rank; d++) {
    const int64_t in = x.shape[2 + d], out = y.shape[2 + d], taps = weight.shape[2 + d];
    int64_t low = taps, high = 0;
    for (int64_t i = 0; i < taps; i++) {
      int64_t lo, hi;
      conv_detail::inside_range(in, out, window.stride[d],
                                i * window.dilation[d] - window.pad_before[d], &lo, &hi);
      if (lo < hi) low = std::min(low, i), high = i + 1;
    }
    if (low >= high) return false;  // no tap reads the input
    trimmed->kernel[d] = high - low;
    trimmed->pad_before[d] = window.pad_before[d] - low * window.dilation[d];
    trimmed->pad_after[d] = window.pad_after[d] - (taps - high) * window.dilation[d];
    if (trimmed->pad_before[d] < 0 || trimmed->pad_after[d] < 0 ||
        trimmed->out_extent(d, in) != out) {
      return false;
    }
    first[d] = low;
    count[d] = high - low;
    any |= count[d] < taps;
  }
  if (!any) return false;
  Shape shape = weight.shape;
  for (int d = 0; d < window.rank; d++) shape[2 + d] = count[d];
  *kept = Array::empty(shape, weight.dtype, "conv");
  return weight.dtype == DType::f64
             ? copy_kept_taps<double>(weight, window.rank, first, count, *kept)
             : copy_kept_taps<float>(weight, window.rank, first, count, *kept);
}

}  // namespace

void conv_kernel(const Array& x, const Array& weight, const Array& bias, const ConvWindow& window,
                 const Array& y, const ConvEpilogue& epilogue) {
  ConvWindow trimmed;
  Array kept;
  if (trim_window(x, weight, y, window, &trimmed, &kept)) {
    return conv_kernel(x, kept, bias, trimmed, y, epilogue);
  }
  const ConvGeometry g = conv_detail::conv_geometry(x.shape, weight.shape, y.shape, window);
  if (conv_detail::onednn_forward(g, window.rank, x, weight, bias, y, epilogue)) return;
  if (conv_detail::pointwise_forward(g, x, weight, bias, y, epilogue)) return;
  if (g.depthwise()) return conv_detail::depthwise_forward(g, x, weight, bias, y, epilogue);
  if (y.dtype == DType::f64) return forward<double>(g, x, weight, bias, y, epilogue);
  forward<float>(g, x, weight, bias, y, epilogue);
}

void conv_grad_input_kernel(const Array& grad_y, const Array& weight, const Array& bias,
                            const ConvWindow& window, const Array& grad_x) {
  const ConvGeometry g =
      conv_detail::conv_geometry(grad_x.shape, weight.shape, grad_y.shape, window);
  if (g.depthwise()) return conv_detail::depthwise_grad_input(g, grad_y, weight, bias, grad_x);
  if (conv_detail::onednn_grad_input(g, window.rank, grad_y, weight, bias, grad_x)) return;
  if (grad_x.dtype == DType::f64) return backward_input<double>(g, grad_y, weight, bias, grad_x);
  backward_input<float>(g, grad_y, weight, bias, grad_x);
}

void conv_grad_weight_kernel(const Array& grad_y, const Array& x, const ConvWindow& window,
                             const Array& grad_weight) {
  const ConvGeometry g =
      conv_detail::conv_geometry(x.shape, grad_weight.shape, grad_y.shape, window);
  // A one-channel input's (the first layer of an image model, groups 1)
  // weight gradient is one product over all positions: columns do it in
  // 1.2 ms where the depthwise lines take 2-3 ms and oneDNN 1.5 ms (the CNN
  // of bench/bench_training.lua, batch 64 of 28x28).
  if (g.depthwise() && g.groups > 1) {
    return conv_detail::depthwise_grad_weight(g, grad_y, x, grad_weight);
  }
  if (conv_detail::onednn_grad_weight(g, window.rank, grad_y, x, grad_weight)) return;
  if (grad_weight.dtype == DType::f64) return backward_weight<double>(g, grad_y, x, grad_weight);
  backward_weight<float>(g, grad_y, x, grad_weight);
}

}  // namespace lazylua
