// reduce.cpp - reference kernels for sum/prod/mean/max/min/any/all and for
// max/min with positions.
//
// Every reduction is one of three shapes once the reduced dim is pulled out:
//  - lines: the reduced elements of one output are adjacent (or at least
//    closer together than neighbouring outputs): each output folds a line,
//    vectorized when the line is contiguous (sum of a whole tensor, sums of
//    rows);
//  - columns: neighbouring outputs are adjacent in the input (reducing an
//    outer dim): whole input rows are folded into a row of accumulators,
//    vectorized along the row, never a strided walk per output;
//  - anything else is one of the two with strided loads.
// Float reductions fold in the one order of reduce_order.h, which the
// generated C follows too (every tier gives the same bits): the values of
// an output in logical order, whatever the layout and whichever of the
// shapes above folds them. Long lines are cut into chunks of 2^k blocks,
// complete subtrees of that order, so results never depend on the thread
// count or on timing.
#include "reduce.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "../thread_pool.h"
#include "loops.h"
#include "reduce_order.h"
#include "simd.h"

namespace lazylua {

namespace {

// Lines longer than this are folded in chunks of exactly this many elements
// (the unit of parallel work; a power-of-two number of order::kBlock, so a
// chunk is a complete subtree of the float order).
constexpr int64_t kChunk = 32768;
static_assert(kChunk % order::kBlock == 0 &&
              ((kChunk / order::kBlock) & (kChunk / order::kBlock - 1)) == 0);
// Column reductions fold rows this many elements wide at a time, so the
// accumulators (and the pairwise scratch rows) stay in L2. Wide blocks
// matter: reading whole input rows one after the other is a sequential
// stream, while short row pieces with jumps between them stall the
// prefetchers at every 4 KiB page (2.5x slower at 4096 x 4096).
constexpr int64_t kColumnWidth = 8192;
// Float sums and products keep order::kLanes rows of accumulators per
// block of columns (the lanes of the float order): narrower blocks keep
// those (256 KiB) in L2.
constexpr int64_t kOrderedColumnWidth = 2048;
// With few column blocks, rows are split into blocks of about this many
// elements so the threads share the work.
constexpr int64_t kColumnRowBlock = 262144;
// The fewest rows per row block of a split column reduction.
constexpr int64_t kColumnLeaf = 16;

// What a reduction does with each element, per op and input type T.
template <ReduceOp kOp, typename T>
struct Reducer {
  static constexpr ReduceOp kOperation = kOp;
  static constexpr bool kFloat = std::is_floating_point_v<T>;
  static constexpr bool kArithmetic =
      kOp == ReduceOp::sum || kOp == ReduceOp::prod || kOp == ReduceOp::mean;
  static constexpr bool kLogical = kOp == ReduceOp::any || kOp == ReduceOp::all;
  // Float sums and products round at every step: they follow the float
  // order (reduce_order.h) in every shape, columns included.
  static constexpr bool kOrdered = kFloat && kArithmetic;
  // Integer sums and products wrap: they run in uint64_t, where overflow is
  // defined, and are read back as int64_t.
  using Acc = std::conditional_t<kArithmetic, std::conditional_t<kFloat, T, uint64_t>,
                                 std::conditional_t<kLogical, bool, T>>;
  using Out = std::conditional_t<kArithmetic, std::conditional_t<kFloat, T, int64_t>,
                                 std::conditional_t<kLogical, bool, T>>;
  // True when a block can be folded in simd::Vec lanes of T.
  static constexpr bool kVectorLanes = kFloat && !kLogical;

  static Acc identity() {
    if constexpr (kOp == ReduceOp::sum || kOp == ReduceOp::mean) return Acc(0);
    if constexpr (kOp == ReduceOp::prod) return Acc(1);
    if constexpr (kOp == ReduceOp::any) return false;
    if constexpr (kOp == ReduceOp::all) return true;
    if constexpr (kOp == ReduceOp::max) {
      return kFloat ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    }
    if constexpr (kOp == ReduceOp::min) {
      return kFloat ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
    }
  }
  static Acc load(T x) {
    if constexpr (kLogical) {
      return x != T(0);  // NaN counts as nonzero, as in C and PyTorch
    } else if constexpr (kArithmetic && !kFloat) {
      return static_cast<uint64_t>(static_cast<int64_t>(x));
    } else {
      return x;
    }
  }
  // Works on Acc and on simd::Vec<T> (for kVectorLanes).
  template <typename V>
  static V merge(V a, V b) {
    if constexpr (kOp == ReduceOp::sum || kOp == ReduceOp::mean) return a + b;
    if constexpr (kOp == ReduceOp::prod) return a * b;
    if constexpr (kOp == ReduceOp::any) return a || b;
    if constexpr (kOp == ReduceOp::all) return a && b;
    if constexpr (kOp == ReduceOp::max) {
      if constexpr (kFloat)
        return simd::max_nan(a, b);
      else
        return b > a ? b : a;
    }
    if constexpr (kOp == ReduceOp::min) {
      if constexpr (kFloat)
        return simd::min_nan(a, b);
      else
        return b < a ? b : a;
    }
  }
  static Out finish(Acc acc, int64_t count) {
    if constexpr (kOp == ReduceOp::mean) {
      if (count == 0) return std::numeric_limits<T>::quiet_NaN();
      return static_cast<T>(static_cast<double>(acc) / static_cast<double>(count));
    } else {
      return static_cast<Out>(acc);
    }
  }
};

template <typename Acc>
std::unique_ptr<Acc[]> make_buffer(int64_t count) {
  return std::make_unique_for_overwrite<Acc[]>(static_cast<size_t>(count));
}

// Merges partial results pairwise (for float sums this keeps the error of
// combining many chunk partials ~log n too).
template <class R>
typename R::Acc merge_pairwise(const typename R::Acc* partials, int64_t count) {
  if (count <= 4) {
    typename R::Acc acc = partials[0];
    for (int64_t i = 1; i < count; ++i) acc = R::template merge<typename R::Acc>(acc, partials[i]);
    return acc;
  }
  int64_t half = count / 2;
  return R::template merge<typename R::Acc>(merge_pairwise<R>(partials, half),
                                            merge_pairwise<R>(partials + half, count - half));
}

// Folds a block of n elements with any stride.
// Integers and truth values only: floats fold in the float order.
template <class R, typename T>
typename R::Acc fold_block(const T* p, int64_t n, int64_t stride) {
  using Acc = typename R::Acc;
  if constexpr (R::kLogical) {
    // Count nonzeros: an integer reduction the compiler vectorizes, where
    // an early-exit loop would not be.
    int64_t nonzero = 0;
    if (stride == 1) {
      for (int64_t i = 0; i < n; ++i) nonzero += p[i] != T(0);
    } else {
      for (int64_t i = 0; i < n; ++i) nonzero += p[i * stride] != T(0);
    }
    if constexpr (R::kOperation == ReduceOp::any) {
      return nonzero > 0;
    } else {
      return nonzero == n;
    }
  } else {
    // Integer (and bool) reductions are associative: plain loops vectorize.
    Acc acc = R::identity();
    if (stride == 1) {
      for (int64_t i = 0; i < n; ++i) acc = R::merge(acc, R::load(p[i]));
    } else {
      for (int64_t i = 0; i < n; ++i) acc = R::merge(acc, R::load(p[i * stride]));
    }
    return acc;
  }
}

// R::merge as a function object for the order:: templates.
template <class R>
constexpr auto merger() {
  return [](auto a, auto b) { return R::merge(a, b); };
}

// Folds n elements: floats in the float order, others in one block.
template <class R, typename T>
typename R::Acc fold_piece(const T* p, int64_t n, int64_t stride) {
  if constexpr (R::kVectorLanes) {
    return order::fold_line<T>(p, n, stride, R::identity(), merger<R>());
  } else {
    return fold_block<R>(p, n, stride);
  }
}

// Merges chunk partials: floats by the counter of the float order (the
// chunks are complete subtrees of it), others pairwise (exact anyway).
template <class R>
typename R::Acc merge_chunks(const typename R::Acc* partials, int64_t count) {
  if constexpr (R::kVectorLanes) {
    order::Pairs<typename R::Acc> pairs;
    for (int64_t c = 0; c < count; ++c) pairs.push(partials[c], merger<R>());
    return pairs.total(R::identity(), merger<R>());
  } else {
    return merge_pairwise<R>(partials, count);
  }
}

// Folds a whole line of n >= 0 elements. The chunking is the same whether
// or not `parallel` lets the chunks run on the pool.
template <class R, typename T>
typename R::Acc fold_line(const T* p, int64_t n, int64_t stride, bool parallel) {
  if (n <= kChunk) return n == 0 ? R::identity() : fold_piece<R>(p, n, stride);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  auto partials = make_buffer<typename R::Acc>(chunks);
  auto fold_chunks = [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      partials[c] =
          fold_piece<R>(p + c * kChunk * stride, std::min(kChunk, n - c * kChunk), stride);
    }
  };
  if (parallel) {
    parallel_for(chunks, 1, [&](int64_t begin, int64_t end) { fold_chunks(begin, end); });
  } else {
    fold_chunks(0, chunks);
  }
  return merge_chunks<R>(partials.get(), chunks);
}

// Floats of a whole tensor that is not one line, in row-major order: each
// chunk of kChunk positions gathers its blocks line piece by line piece.
template <class R, typename T>
typename R::Acc fold_all_ordered(const T* base, const loops::Walk& walk) {
  using Acc = typename R::Acc;
  const int last = walk.rank - 1;
  const int64_t length = walk.extent[last], stride = walk.stride_a[last];
  const int64_t count = walk.numel();
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  auto partials = make_buffer<Acc>(chunks);
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    auto gathered = make_buffer<T>(order::kBlock);
    for (int64_t c = begin; c < end; ++c) {
      const int64_t start = c * kChunk, stop = std::min(count, start + kChunk);
      loops::Odometer lines(walk, last, start / length);
      int64_t position = start % length;
      order::Pairs<Acc> pairs;
      for (int64_t b0 = start; b0 < stop; b0 += order::kBlock) {
        const int64_t size = std::min(order::kBlock, stop - b0);
        for (int64_t filled = 0; filled < size;) {
          const int64_t take = std::min(size - filled, length - position);
          const T* q = base + lines.a() + position * stride;
          for (int64_t j = 0; j < take; ++j) gathered[filled + j] = q[j * stride];
          filled += take;
          position += take;
          if (position == length) {
            position = 0;
            lines.next();
          }
        }
        pairs.push(order::fold_block<T>(gathered.get(), size, R::identity(), merger<R>()),
                   merger<R>());
      }
      partials[c] = pairs.total(R::identity(), merger<R>());
    }
  });
  return merge_chunks<R>(partials.get(), chunks);
}

// Everything into out[0].
template <class R, typename T>
void reduce_all(const Array& in, typename R::Out* out) {
  using Acc = typename R::Acc;
  const T* base = in.data<T>();
  loops::Walk walk = loops::make_walk(in.shape, in.strides);
  const int64_t count = walk.numel();
  if (walk.rank == 0) {
    out[0] = R::finish(R::merge(R::identity(), R::load(base[0])), 1);
    return;
  }
  if constexpr (R::kVectorLanes) {
    // Floats: row-major order, one line when the dims merged into one.
    if (walk.rank == 1 || count == 0) {
      out[0] = R::finish(fold_line<R>(base, count, walk.stride_a[0], true), count);
    } else {
      out[0] = R::finish(fold_all_ordered<R, T>(base, walk), count);
    }
    return;
  }
  // Loop along the dim with the smallest stride; the order in which the
  // other dims are visited does not change the result of any of these ops.
  int inner = 0;
  for (int d = 1; d < walk.rank; ++d) {
    if (std::llabs(walk.stride_a[d]) <= std::llabs(walk.stride_a[inner])) inner = d;
  }
  const int64_t length = walk.extent[inner];
  const int64_t stride = walk.stride_a[inner];
  walk.erase(inner);
  if (walk.rank == 0 || count == 0) {
    out[0] = R::finish(fold_line<R>(base, count == 0 ? 0 : length, stride, true), count);
    return;
  }
  // Lines are folded in fixed groups (~kChunk elements each); group
  // partials and then the groups merge pairwise.
  const int64_t lines = walk.numel();
  const int64_t lines_per_group = std::max<int64_t>(1, kChunk / length);
  const int64_t groups = (lines + lines_per_group - 1) / lines_per_group;
  auto group_partials = make_buffer<Acc>(groups);
  parallel_for(groups, 1, [&](int64_t begin, int64_t end) {
    auto line_partials = make_buffer<Acc>(lines_per_group);
    loops::Odometer odometer(walk, walk.rank, begin * lines_per_group);
    for (int64_t g = begin; g < end; ++g) {
      const int64_t in_group = std::min(lines_per_group, lines - g * lines_per_group);
      for (int64_t k = 0; k < in_group; ++k, odometer.next()) {
        line_partials[k] = fold_line<R>(base + odometer.a(), length, stride, false);
      }
      group_partials[g] = merge_pairwise<R>(line_partials.get(), in_group);
    }
  });
  out[0] = R::finish(merge_pairwise<R>(group_partials.get(), groups), count);
}

// acc[j] = merge(acc[j], row[j * stride]) for j < width.
template <class R, typename T>
void merge_row(typename R::Acc* acc, const T* row, int64_t width, int64_t stride) {
  int64_t j = 0;
  if constexpr (R::kVectorLanes) {
    if (stride == 1) {
      constexpr int kWidth = simd::kLanes<T>;
      for (; j + kWidth <= width; j += kWidth) {
        simd::store(acc + j, R::merge(simd::load(acc + j), simd::load(row + j)));
      }
    }
  }
  for (; j < width; ++j) acc[j] = R::merge(acc[j], R::load(row[j * stride]));
}

// acc[j] = merge(acc[j], other[j]) for partial results (no load: they are
// accumulators already, e.g. 64-bit sums of 32-bit integers).
template <class R>
void merge_partial_row(typename R::Acc* acc, const typename R::Acc* other, int64_t width) {
  using Acc = typename R::Acc;
  int64_t j = 0;
  if constexpr (R::kVectorLanes) {
    constexpr int kWidth = simd::kLanes<Acc>;
    for (; j + kWidth <= width; j += kWidth) {
      simd::store(acc + j, R::merge(simd::load(acc + j), simd::load(other + j)));
    }
  }
  for (; j < width; ++j) acc[j] = R::merge(acc[j], other[j]);
}

// Merges rows of `width` partial results (row r at rows + r * stride) by
// the counter of the float order; the total lands in row 0.
template <class R>
void merge_rows_ordered(typename R::Acc* rows, int64_t count, int64_t width, int64_t stride) {
  int64_t level[64];
  int depth = 0;
  for (int64_t b = 0; b < count; ++b) {
    int64_t part = b;
    for (int64_t c = b; c & 1; c >>= 1) {
      --depth;
      merge_partial_row<R>(rows + level[depth] * stride, rows + part * stride, width);
      part = level[depth];
    }
    level[depth++] = part;
  }
  for (int d = depth - 2; d >= 0; --d) {
    merge_partial_row<R>(rows + level[d] * stride, rows + level[d + 1] * stride, width);
  }
}

// Rows of scratch fold_columns needs for `rows` rows.
template <class R, typename T>
int64_t scratch_rows(int64_t rows) {
  if constexpr (!R::kOrdered) {
    return 0;
  } else {
    const auto blocks = static_cast<uint64_t>((rows + order::kBlock - 1) / order::kBlock);
    return order::kLanes<T> + std::bit_width(blocks) + 1;
  }
}

// Folds `rows` rows of `width` elements (row stride row_stride, element
// stride column_stride) into acc. Float sums and products take each column
// in the float order with whole rows at a time: row r of a block goes into
// lane row r % kLanes, the lane rows then merge as order::fold_block's
// lanes do (empty lanes skipped: exact) and the block rows merge by the
// counter. `scratch` holds scratch_rows(rows) rows.
template <class R, typename T>
void fold_columns(const T* p, int64_t rows, int64_t row_stride, int64_t width,
                  int64_t column_stride, typename R::Acc* acc, typename R::Acc* scratch) {
  using Acc = typename R::Acc;
  if constexpr (!R::kOrdered) {
    for (int64_t j = 0; j < width; ++j) acc[j] = R::identity();
    for (int64_t r = 0; r < rows; ++r) merge_row<R>(acc, p + r * row_stride, width, column_stride);
  } else {
    constexpr int kLanes = order::kLanes<T>, kWidth = simd::kLanes<T>;
    Acc* lanes = scratch;
    Acc* levels = scratch + kLanes * width;
    auto lane = [&](int l) { return lanes + l * width; };
    int depth = 0;
    for (int64_t b = 0; b * order::kBlock < rows; ++b) {
      const int64_t first = b * order::kBlock, count = std::min(order::kBlock, rows - first);
      const int used = static_cast<int>(std::min<int64_t>(kLanes, count));
      for (int l = 0; l < used; ++l) std::fill_n(lane(l), width, R::identity());
      for (int64_t r = 0; r < count; ++r) {
        merge_row<R>(lane(static_cast<int>(r % kLanes)), p + (first + r) * row_stride, width,
                     column_stride);
      }
      // v[e] = (lane e + lane W+e) + (lane 2W+e + lane 3W+e), folded left
      // to right into lane 0.
      for (int e = 0; e < kWidth && e < used; ++e) {
        if (kWidth + e < used) merge_partial_row<R>(lane(e), lane(kWidth + e), width);
        if (2 * kWidth + e < used) {
          if (3 * kWidth + e < used) {
            merge_partial_row<R>(lane(2 * kWidth + e), lane(3 * kWidth + e), width);
          }
          merge_partial_row<R>(lane(e), lane(2 * kWidth + e), width);
        }
        if (e > 0) merge_partial_row<R>(lane(0), lane(e), width);
      }
      Acc* part = lane(0);
      for (int64_t c = b; c & 1; c >>= 1) {
        --depth;
        merge_partial_row<R>(levels + depth * width, part, width);
        part = levels + depth * width;
      }
      if (part != levels + depth * width) std::copy_n(part, width, levels + depth * width);
      ++depth;
    }
    if (depth == 0) {
      std::fill_n(acc, width, R::identity());
      return;
    }
    for (int d = depth - 2; d >= 0; --d) {
      merge_partial_row<R>(levels + d * width, levels + (d + 1) * width, width);
    }
    std::copy_n(levels, width, acc);
  }
}

// Reduces `size` elements (stride `stride`) for every position of `kept`
// (the input's other dims); out is contiguous over kept.
template <class R, typename T>
void reduce_dim(const T* base, int64_t size, int64_t stride, const loops::Walk& kept,
                typename R::Out* out) {
  using Acc = typename R::Acc;
  const int64_t outputs = kept.numel();
  if (kept.rank == 0) {
    out[0] = R::finish(fold_line<R>(base, size, stride, true), size);
    return;
  }
  const int last = kept.rank - 1;
  const int64_t width = kept.extent[last];
  const int64_t column_stride = kept.stride_a[last];
  const bool lines =
      stride == 1 || (column_stride != 1 && std::llabs(stride) <= std::llabs(column_stride));
  if (lines) {
    auto fold_outputs = [&](int64_t begin, int64_t end, bool parallel_lines) {
      loops::Odometer odometer(kept, kept.rank, begin);
      for (int64_t o = begin; o < end; ++o, odometer.next()) {
        out[o] = R::finish(fold_line<R>(base + odometer.a(), size, stride, parallel_lines), size);
      }
    };
    if (outputs >= thread_count()) {
      parallel_for(outputs, std::max<int64_t>(1, kChunk / size),
                   [&](int64_t begin, int64_t end) { fold_outputs(begin, end, false); });
    } else {
      fold_outputs(0, outputs, true);  // few long lines: split each line
    }
    return;
  }

  // Columns: task t folds a block of up to kColumnWidth columns of one
  // outer position over a block of rows.
  loops::Walk outer_dims = kept;  // copied only here: a Walk is ~200 bytes
  outer_dims.erase(last);
  const int64_t column_width = R::kOrdered ? kOrderedColumnWidth : kColumnWidth;
  const int64_t column_blocks = (width + column_width - 1) / column_width;
  const int64_t tasks = outer_dims.numel() * column_blocks;
  const int64_t block_width = std::min(width, column_width);
  // With few tasks, also split the rows so the threads share the work; the
  // choice depends on the shape only, never on the thread count. The
  // partial rows take at most 1/32 of the input's size.
  int64_t rows_per_block = size;
  if (tasks < 16 && size * block_width > 2 * kColumnRowBlock) {
    rows_per_block = std::max<int64_t>(kColumnLeaf, kColumnRowBlock / block_width);
    // Float row blocks must be complete subtrees of the float order.
    if (R::kOrdered) {
      rows_per_block = static_cast<int64_t>(
          std::bit_ceil(static_cast<uint64_t>(std::max(order::kBlock, rows_per_block))));
    }
  }
  const int64_t row_blocks = (size + rows_per_block - 1) / rows_per_block;
  auto partials = make_buffer<Acc>(row_blocks > 1 ? tasks * row_blocks * block_width : 0);

  parallel_for(tasks * row_blocks, std::max<int64_t>(1, kChunk / (rows_per_block * block_width)),
               [&](int64_t begin, int64_t end) {
                 auto acc = make_buffer<Acc>(block_width);
                 auto scratch = make_buffer<Acc>(block_width * scratch_rows<R, T>(rows_per_block));
                 for (int64_t item = begin; item < end; ++item) {
                   const int64_t task = item / row_blocks, row_block = item % row_blocks;
                   const int64_t outer = task / column_blocks, column_block = task % column_blocks;
                   const int64_t first_column = column_block * column_width;
                   const int64_t columns = std::min(column_width, width - first_column);
                   const int64_t first_row = row_block * rows_per_block;
                   const int64_t rows = std::min(rows_per_block, size - first_row);
                   loops::Odometer position(outer_dims, outer_dims.rank, outer);
                   const T* p =
                       base + position.a() + first_column * column_stride + first_row * stride;
                   Acc* target = row_blocks > 1 ? partials.get() + item * block_width : acc.get();
                   fold_columns<R>(p, rows, stride, columns, column_stride, target, scratch.get());
                   if (row_blocks == 1) {
                     for (int64_t j = 0; j < columns; ++j) {
                       out[outer * width + first_column + j] = R::finish(acc[j], size);
                     }
                   }
                 }
               });
  if (row_blocks == 1) return;
  // Merge the row blocks of each task in a fixed order.
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t outer = task / column_blocks, column_block = task % column_blocks;
    const int64_t first_column = column_block * column_width;
    const int64_t columns = std::min(column_width, width - first_column);
    Acc* rows = partials.get() + task * row_blocks * block_width;
    if constexpr (R::kOrdered) merge_rows_ordered<R>(rows, row_blocks, columns, block_width);
    for (int64_t span = 1; !R::kOrdered && span < row_blocks; span *= 2) {
      for (int64_t r = 0; r + span < row_blocks; r += 2 * span) {
        merge_partial_row<R>(rows + r * block_width, rows + (r + span) * block_width, columns);
      }
    }
    for (int64_t j = 0; j < columns; ++j) {
      out[outer * width + first_column + j] = R::finish(rows[j], size);
    }
  }
}

template <ReduceOp kOp, typename T>
void run_reduce(const Array& in, int dim, const Array& out) {
  using R = Reducer<kOp, T>;
  using Out = typename R::Out;
  LAZYLUA_ASSERT(out.dtype == dtype_of<Out>() && out.is_contiguous());
  Out* result = out.data<Out>();
  const bool has_identity = kOp != ReduceOp::max && kOp != ReduceOp::min;
  if (dim < 0) {
    LAZYLUA_ASSERT(out.numel() == 1);
    if (in.numel() == 0 && !has_identity) {
      fail("{}: cannot reduce an empty tensor (shape {}): the result has no identity",
           reduce_op_name(kOp), shape_string(in.shape));
    }
    reduce_all<R, T>(in, result);
    return;
  }
  const int rank = in.rank();
  const int64_t size = rank == 0 ? 1 : in.shape[dim];
  const int64_t stride = rank == 0 ? 0 : in.strides[dim];
  Shape kept_shape = in.shape;
  Strides kept_strides = in.strides;
  if (rank > 0) {
    kept_shape.erase(dim);
    kept_strides.erase(dim);
  }
  LAZYLUA_ASSERT(out.numel() == numel(kept_shape));
  if (numel(kept_shape) == 0) return;
  if (size == 0) {
    if (!has_identity) {
      fail("{}: cannot reduce dimension {} of size 0 (shape {}): the result has no identity",
           reduce_op_name(kOp), dim + 1, shape_string(in.shape));
    }
    const Out empty = R::finish(R::identity(), 0);
    for (int64_t i = 0; i < out.numel(); ++i) result[i] = empty;
    return;
  }
  reduce_dim<R, T>(in.data<T>(), size, stride, loops::make_walk(kept_shape, kept_strides), result);
}

template <ReduceOp kOp>
void dispatch_reduce(const Array& in, int dim, const Array& out) {
  visit_dtype(in.dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (kOp == ReduceOp::mean && !std::is_floating_point_v<T>) {
      fail("mean: expected a floating point tensor, got {}", dtype_name(in.dtype));
    } else {
      run_reduce<kOp, T>(in, dim, out);
    }
  });
}

// ---------------------------------------------------------------------------
// max/min with positions.

// True when x should replace best: strictly better (so ties keep the first
// position), and NaN beats everything but an earlier NaN.
template <typename T>
bool beats(bool is_max, T x, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (best != best) return false;
    if (x != x) return true;
  }
  return is_max ? x > best : x < best;
}

template <typename T>
struct Best {
  T value;
  int64_t position;  // 0-based
};

// The best of n >= 1 elements. Contiguous lines find the value with the
// vectorized fold first, then its first position.
template <typename T>
Best<T> arg_line(bool is_max, const T* p, int64_t n, int64_t stride, bool parallel) {
  if (stride == 1 && n >= 64) {
    const T value = is_max ? fold_line<Reducer<ReduceOp::max, T>>(p, n, 1, parallel)
                           : fold_line<Reducer<ReduceOp::min, T>>(p, n, 1, parallel);
    if constexpr (std::is_floating_point_v<T>) {
      if (value != value) {
        for (int64_t i = 0;; ++i) {
          if (p[i] != p[i]) return {p[i], i};
        }
      }
    }
    for (int64_t i = 0;; ++i) {
      if (p[i] == value) return {p[i], i};  // p[i], not value: -0.0 == 0.0
    }
  }
  Best<T> best{p[0], 0};
  for (int64_t i = 1; i < n; ++i) {
    const T x = p[i * stride];
    if (beats(is_max, x, best.value)) best = {x, i};
  }
  return best;
}

template <typename T>
void run_arg_reduce(bool is_max, const Array& in, int dim, const Array& values,
                    const Array& indices) {
  const char* name = is_max ? "max" : "min";
  T* value_out = values.defined() ? values.data<T>() : nullptr;
  int64_t* index_out = indices.defined() ? indices.data<int64_t>() : nullptr;
  auto write = [&](int64_t o, Best<T> best) {
    if (value_out) value_out[o] = best.value;
    if (index_out) index_out[o] = best.position + 1;
  };
  const T* base = in.data<T>();
  if (dim < 0) {
    if (in.numel() == 0) {
      fail("{}: cannot reduce an empty tensor (shape {})", name, shape_string(in.shape));
    }
    loops::Walk walk = loops::make_walk(in.shape, in.strides);
    if (walk.rank <= 1) {
      write(0, arg_line(is_max, base, in.numel(), walk.rank == 0 ? 1 : walk.stride_a[0], true));
      return;
    }
    // Row-major order: merging dims in make_walk keeps it.
    const int last = walk.rank - 1;
    const int64_t length = walk.extent[last];
    Best<T> best{base[0], 0};
    loops::Odometer odometer(walk, last, 0);
    const int64_t lines = walk.numel() / length;
    for (int64_t line = 0; line < lines; ++line, odometer.next()) {
      Best<T> found = arg_line(is_max, base + odometer.a(), length, walk.stride_a[last], false);
      if (line == 0 || beats(is_max, found.value, best.value)) {
        best = {found.value, line * length + found.position};
      }
    }
    write(0, best);
    return;
  }

  const int rank = in.rank();
  const int64_t size = rank == 0 ? 1 : in.shape[dim];
  const int64_t stride = rank == 0 ? 0 : in.strides[dim];
  Shape kept_shape = in.shape;
  Strides kept_strides = in.strides;
  if (rank > 0) {
    kept_shape.erase(dim);
    kept_strides.erase(dim);
  }
  if (size == 0) {
    fail("{}: cannot reduce dimension {} of size 0 (shape {})", name, dim + 1,
         shape_string(in.shape));
  }
  loops::Walk kept = loops::make_walk(kept_shape, kept_strides);
  const int64_t outputs = kept.numel();
  if (outputs == 0) return;
  const int last = kept.rank - 1;
  const int64_t column_stride = kept.rank == 0 ? 0 : kept.stride_a[last];
  if (kept.rank == 0 || stride == 1 ||
      (column_stride != 1 && std::llabs(stride) <= std::llabs(column_stride))) {
    parallel_for(outputs, std::max<int64_t>(1, kChunk / size), [&](int64_t begin, int64_t end) {
      loops::Odometer odometer(kept, kept.rank, begin);
      for (int64_t o = begin; o < end; ++o, odometer.next()) {
        write(o, arg_line(is_max, base + odometer.a(), size, stride, false));
      }
    });
    return;
  }
  // Columns: track the best of each column while walking whole rows.
  const int64_t width = kept.extent[last];
  kept.erase(last);
  const int64_t outer_count = kept.numel();
  parallel_for(outer_count, std::max<int64_t>(1, kChunk / (size * width)),
               [&](int64_t begin, int64_t end) {
                 auto best = make_buffer<Best<T>>(width);
                 loops::Odometer odometer(kept, kept.rank, begin);
                 for (int64_t outer = begin; outer < end; ++outer, odometer.next()) {
                   const T* p = base + odometer.a();
                   for (int64_t j = 0; j < width; ++j) best[j] = {p[j * column_stride], 0};
                   for (int64_t r = 1; r < size; ++r) {
                     const T* row = p + r * stride;
                     for (int64_t j = 0; j < width; ++j) {
                       const T x = row[j * column_stride];
                       if (beats(is_max, x, best[j].value)) best[j] = {x, r};
                     }
                   }
                   for (int64_t j = 0; j < width; ++j) write(outer * width + j, best[j]);
                 }
               });
}

}  // namespace

void reduce_kernel(ReduceOp op, const Array& in, int dim, const Array& out) {
  switch (op) {
    case ReduceOp::sum:
      return dispatch_reduce<ReduceOp::sum>(in, dim, out);
    case ReduceOp::prod:
      return dispatch_reduce<ReduceOp::prod>(in, dim, out);
    case ReduceOp::mean:
      return dispatch_reduce<ReduceOp::mean>(in, dim, out);
    case ReduceOp::max:
      return dispatch_reduce<ReduceOp::max>(in, dim, out);
    case ReduceOp::min:
      return dispatch_reduce<ReduceOp::min>(in, dim, out);
    case ReduceOp::any:
      return dispatch_reduce<ReduceOp::any>(in, dim, out);
    case ReduceOp::all:
      return dispatch_reduce<ReduceOp::all>(in, dim, out);
  }
}

void arg_reduce_kernel(bool is_max, const Array& in, int dim, const Array& values,
                       const Array& indices) {
  LAZYLUA_ASSERT(!values.defined() || (values.dtype == in.dtype && values.is_contiguous()));
  LAZYLUA_ASSERT(!indices.defined() || (indices.dtype == DType::i64 && indices.is_contiguous()));
  visit_dtype(in.dtype,
              [&](auto zero) { run_arg_reduce<decltype(zero)>(is_max, in, dim, values, indices); });
}

}  // namespace lazylua
