// matmul.cpp - batched matrix products: OpenBLAS for floats (but products
// of a few rows: small_rows_product), a blocked loop for integers and bools.
#include "matmul.h"

#include <cblas.h>  // CBLAS_TRANSPOSE only: the calls go through ../blas.h

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "../blas.h"
#include "../interrupt.h"
#include "../profiler.h"
#include "../thread_pool.h"
#include "loops.h"
#include "simd.h"

namespace lazylua {

namespace {

// How BLAS reads one [rows, cols] matrix slice of an operand: row-major
// with leading dimension `ld`, possibly transposed.
struct BlasView {
  CBLAS_TRANSPOSE transpose = CblasNoTrans;
  int64_t ld = 1;
};

// BLAS takes a matrix whose elements along one dim are adjacent and whose
// other dim steps by at least that extent; a view with strides (1, ld) is
// then the transpose of a row-major matrix. Extent-1 dims may have any
// stride. Returns false for other layouts (broadcast rows, gaps both ways).
bool blas_view(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, BlasView* view) {
  if ((cols <= 1 || col_stride == 1) && (rows <= 1 || row_stride >= std::max<int64_t>(1, cols))) {
    view->transpose = CblasNoTrans;
    view->ld = rows <= 1 ? std::max<int64_t>(1, cols) : row_stride;
    return view->ld <= INT_MAX;
  }
  if ((rows <= 1 || row_stride == 1) && (cols <= 1 || col_stride >= std::max<int64_t>(1, rows))) {
    view->transpose = CblasTrans;
    view->ld = cols <= 1 ? std::max<int64_t>(1, rows) : col_stride;
    return view->ld <= INT_MAX;
  }
  return false;
}

// The operand itself when BLAS can read it, else a contiguous copy (which
// it always can: strides (M*K, K, 1) are the plain row-major layout).
Array blas_operand(const Array& x, BlasView* view) {
  if (blas_view(x.shape[1], x.shape[2], x.strides[1], x.strides[2], view)) return x;
  Array copy = Array::empty(x.shape, x.dtype, "matmul");
  loops::copy_same_dtype(x, copy);
  const bool readable =
      blas_view(copy.shape[1], copy.shape[2], copy.strides[1], copy.strides[2], view);
  LAZYLUA_ASSERT(readable);
  return copy;
}

void blas_call(bool is_double, CBLAS_TRANSPOSE transpose_a, CBLAS_TRANSPOSE transpose_b, int64_t m,
               int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
               void* c, int64_t ldc) {
  const bool trans_a = transpose_a == CblasTrans, trans_b = transpose_b == CblasTrans;
  if (is_double) {
    blas::dgemm(trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                1.0, static_cast<const double*>(a), static_cast<int>(lda),
                static_cast<const double*>(b), static_cast<int>(ldb), 0.0, static_cast<double*>(c),
                static_cast<int>(ldc));
  } else {
    blas::sgemm(trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                1.0f, static_cast<const float*>(a), static_cast<int>(lda),
                static_cast<const float*>(b), static_cast<int>(ldb), 0.0f, static_cast<float*>(c),
                static_cast<int>(ldc));
  }
}

// Products of at most kSmallRows rows of C (an RNN step's h W at a small
// batch, a linear layer at batch 1), f32, with B read in rows (not
// transposed): OpenBLAS packs A and zeroes C on every call, which made
// 1x256x64 take 5.5 us; a loop over columns of C held in registers takes
// 1.3 us. At 8 rows it is about as fast as OpenBLAS (8x256x64 in an
// imported LSTM's steps: 4.3-6.5 us against 6.8 us). The choice
// is made on the whole product's shape, before it is cut into bands, and
// each element is its own sum over k in order, so the bits depend on
// neither the bands nor the thread count.
constexpr int64_t kSmallRows = 8;

bool small_rows_product(bool is_double, CBLAS_TRANSPOSE transpose_b, int64_t m, int64_t n) {
  return !is_double && transpose_b == CblasNoTrans && m <= kSmallRows && m < n;
}

// Rows [row, row + kRows) and columns [column, column + kVectors vectors)
// of C = A B, the sums held in registers while k runs. Every element is
// the same sum, a[i][0] b[0][j] first, one rounding per step (FMA), so its
// bits do not depend on the block that computes it.
template <int kRows, int kVectors>
void small_rows_block(bool trans_a, int64_t row, int64_t column, int64_t k, const float* a,
                      int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  using simd::Vec;
  constexpr int64_t kLanes = simd::kLanes<float>;
  Vec<float> sum[kRows][kVectors] = {};
  for (int64_t kk = 0; kk < k; ++kk) {
    Vec<float> b_row[kVectors];
    for (int v = 0; v < kVectors; ++v) b_row[v] = simd::load(b + kk * ldb + column + v * kLanes);
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = row + r;
      const Vec<float> factor = simd::broadcast(trans_a ? a[kk * lda + i] : a[i * lda + kk]);
      for (int v = 0; v < kVectors; ++v) sum[r][v] = simd::fma(factor, b_row[v], sum[r][v]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      simd::store(c + (row + r) * ldc + column + v * kLanes, sum[r][v]);
    }
  }
}

using SmallRowsBlock = void (*)(bool, int64_t, int64_t, int64_t, const float*, int64_t,
                                const float*, int64_t, float*, int64_t);
template <int kVectors>
SmallRowsBlock small_rows_block_of(int64_t rows) {
  switch (rows) {
    case 1:
      return small_rows_block<1, kVectors>;
    case 2:
      return small_rows_block<2, kVectors>;
    case 3:
      return small_rows_block<3, kVectors>;
    default:
      return small_rows_block<4, kVectors>;
  }
}

// Columns [first, last) of C = A B for a small_rows_product. Blocks of up
// to 4 rows and of 8 vector sums in all at 1 and 2 rows (an FMA's latency
// times the two FMA units: fewer leave them waiting), 12 from 3 rows on
// (4 x 3: 8x256x64 in 3.6 us where 4 x 2 took 4.6-5.9, and 4x256x64 1.8 us
// against 2.1-2.9, on the AMD EPYC VM; at 1 and 2 rows the longer blocks
// leave too many columns to the single vectors), every row block of a
// column block before the next, so B passes through the cache once; then
// single vectors, then single columns.
void small_rows_columns(bool trans_a, int64_t m, int64_t first, int64_t last, int64_t k,
                        const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                        int64_t ldc) {
  constexpr int64_t kLanes = simd::kLanes<float>;
  const int vectors = m == 1 ? 8 : m == 2 ? 4 : 3;
  int64_t j = first;
  for (; j + vectors * kLanes <= last; j += vectors * kLanes) {
    for (int64_t row = 0; row < m; row += 4) {
      const int64_t rows = std::min<int64_t>(4, m - row);
      const SmallRowsBlock block = vectors == 8   ? small_rows_block_of<8>(rows)
                                   : vectors == 4 ? small_rows_block_of<4>(rows)
                                                  : small_rows_block_of<3>(rows);
      block(trans_a, row, j, k, a, lda, b, ldb, c, ldc);
    }
  }
  for (; j + kLanes <= last; j += kLanes) {
    for (int64_t row = 0; row < m; row += 4) {
      small_rows_block_of<1>(std::min<int64_t>(4, m - row))(trans_a, row, j, k, a, lda, b, ldb, c,
                                                            ldc);
    }
  }
  for (; j < last; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) {
        sum = simd::fma(trans_a ? a[kk * lda + i] : a[i * lda + kk], b[kk * ldb + j], sum);
      }
      c[i * ldc + j] = sum;
    }
  }
}

// Products of at most kSmallRows rows of C with B transposed: B given as
// [n, k] rows, as nn.Linear keeps its weight and ONNX's Gemm reads it with
// transB. OpenBLAS packs all of B on every call, three passes over a
// classifier's 5 MB of weights at batch 1 (1x1000x1280: 0.5 ms a thread),
// and its bits then depend on where the thread bands cut the columns. Here
// every element of C is one dot product of a row of A and a row of B, read
// in place: 8 lanes of partial sums over k, in order, folded in lane order,
// then the last k % 8 terms in order. Its bits depend on neither the block
// nor the band nor the thread count.
bool small_rows_dot_product(bool is_double, CBLAS_TRANSPOSE transpose_a,
                            CBLAS_TRANSPOSE transpose_b, int64_t m, int64_t n) {
  return !is_double && transpose_a == CblasNoTrans && transpose_b == CblasTrans &&
         m <= kSmallRows && m < n;
}

// Rows [row, row + kRows) and columns [column, column + kColumns) of C = A B^T.
template <int kRows, int kColumns>
void small_rows_dot_block(int64_t row, int64_t column, int64_t k, const float* a, int64_t lda,
                          const float* b, int64_t ldb, float* c, int64_t ldc) {
  using simd::Vec;
  constexpr int64_t kLanes = simd::kLanes<float>;
  const int64_t vector_end = k / kLanes * kLanes;
  Vec<float> sum[kRows][kColumns] = {};
  for (int64_t kk = 0; kk < vector_end; kk += kLanes) {
    Vec<float> b_chunk[kColumns];
    for (int j = 0; j < kColumns; ++j) b_chunk[j] = simd::load(b + (column + j) * ldb + kk);
    for (int r = 0; r < kRows; ++r) {
      const Vec<float> a_chunk = simd::load(a + (row + r) * lda + kk);
      for (int j = 0; j < kColumns; ++j) sum[r][j] = simd::fma(a_chunk, b_chunk[j], sum[r][j]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    const float* a_row = a + (row + r) * lda;
    for (int j = 0; j < kColumns; ++j) {
      const float* b_row = b + (column + j) * ldb;
      float total = simd::fold_lanes<float>(sum[r][j], [](float x, float y) { return x + y; });
      for (int64_t kk = vector_end; kk < k; ++kk) total = simd::fma(a_row[kk], b_row[kk], total);
      c[(row + r) * ldc + column + j] = total;
    }
  }
}

using SmallRowsDotBlock = void (*)(int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                                   int64_t, float*, int64_t);
template <int kColumns>
SmallRowsDotBlock small_rows_dot_block_of(int64_t rows) {
  switch (rows) {
    case 1:
      return small_rows_dot_block<1, kColumns>;
    case 2:
      return small_rows_dot_block<2, kColumns>;
    case 3:
      return small_rows_dot_block<3, kColumns>;
    default:
      return small_rows_dot_block<4, kColumns>;
  }
}

// Columns [first, last) of C = A B^T for a small_rows_dot_product: blocks
// of up to 4 rows by 8 columns at 1 row (8 sums for the FMA units'
// latency), 4 at 2 rows, 3 from 3 rows on; every row block of a column
// block before the next, so those rows of B are read from memory once;
// then single columns.
void small_rows_dot_columns(int64_t m, int64_t first, int64_t last, int64_t k, const float* a,
                            int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  const int columns = m == 1 ? 8 : m == 2 ? 4 : 3;
  int64_t j = first;
  for (; j + columns <= last; j += columns) {
    for (int64_t row = 0; row < m; row += 4) {
      const int64_t rows = std::min<int64_t>(4, m - row);
      const SmallRowsDotBlock block = columns == 8   ? small_rows_dot_block_of<8>(rows)
                                      : columns == 4 ? small_rows_dot_block_of<4>(rows)
                                                     : small_rows_dot_block_of<3>(rows);
      block(row, j, k, a, lda, b, ldb, c, ldc);
    }
  }
  for (; j < last; ++j) {
    for (int64_t row = 0; row < m; row += 4) {
      small_rows_dot_block_of<1>(std::min<int64_t>(4, m - row))(row, j, k, a, lda, b, ldb, c, ldc);
    }
  }
}

// Multiply-adds below which one thread does the whole product: splitting
// costs a wake-up of the pool (a few microseconds).
constexpr double kParallelGemmWork = 1 << 20;

// Multiply-adds of one thread's share of a batch of products too small to
// cut (attention's heads): each product whole, several to a task.
constexpr double kParallelBatchWork = 1 << 18;

// Multiply-adds of one BLAS call above which a band is cut into sub-bands,
// with check_interrupt() (../interrupt.h) between them: a BLAS call cannot
// be stopped, and one thread's half of a 3000^3 product ran 0.5 s on a
// loaded 2-core VM (27 GMAD/s). A sub-band keeps at least
// kMinimumSubBand rows or columns: each call packs the whole other operand
// again, which cost 40% at 128 rows of a 3000^3 product and nothing
// measurable at 256. Only products this large are cut further, so smaller
// ones make exactly the calls they made before; for the large ones
// OpenBLAS's result may change in the last bits with the cut on some cores
// (measured with Haswell's sgemm; SkylakeX's sgemm gave the same bits).
constexpr double kInterruptibleGemmWork = double(1 << 30);
constexpr int64_t kMinimumSubBand = 256;

// One band [first, last) of rows (by_rows) or columns of C, as BLAS calls
// of sub-bands short enough to interrupt between.
void gemm_band(bool is_double, CBLAS_TRANSPOSE transpose_a, CBLAS_TRANSPOSE transpose_b,
               bool by_rows, int64_t first, int64_t last, int64_t m, int64_t n, int64_t k,
               const void* a, int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc) {
  const int64_t element = is_double ? 8 : 4;
  const int64_t other = by_rows ? n : m;
  const double work =
      static_cast<double>(last - first) * static_cast<double>(other) * static_cast<double>(k);
  int64_t step = last - first;
  if (work > kInterruptibleGemmWork) {
    // Equal sub-bands of whole vector widths (16 floats).
    const auto parts = static_cast<int64_t>(std::ceil(work / kInterruptibleGemmWork));
    step = std::max(kMinimumSubBand, ((last - first + parts - 1) / parts + 15) / 16 * 16);
  }
  for (int64_t begin = first; begin < last; begin += step) {
    if (begin > first) check_interrupt();
    const int64_t end = std::min(last, begin + step);
    if (!by_rows && small_rows_dot_product(is_double, transpose_a, transpose_b, m, n)) {
      profiler::Span span("blas");
      blas::name_product_span(span, "small-rows dot", m, end - begin, k, sizeof(float));
      small_rows_dot_columns(m, begin, end, k, static_cast<const float*>(a), lda,
                             static_cast<const float*>(b), ldb, static_cast<float*>(c), ldc);
    } else if (!by_rows && small_rows_product(is_double, transpose_b, m, n)) {
      profiler::Span span("blas");
      blas::name_product_span(span, "small-rows sgemm", m, end - begin, k, sizeof(float));
      small_rows_columns(transpose_a == CblasTrans, m, begin, end, k, static_cast<const float*>(a),
                         lda, static_cast<const float*>(b), ldb, static_cast<float*>(c), ldc);
    } else if (by_rows) {
      // Rows of C come from rows of A: row r of a transposed A is column r.
      const int64_t a_offset = transpose_a == CblasNoTrans ? begin * lda : begin;
      blas_call(is_double, transpose_a, transpose_b, end - begin, n, k,
                static_cast<const char*>(a) + a_offset * element, lda, b, ldb,
                static_cast<char*>(c) + begin * ldc * element, ldc);
    } else {
      const int64_t b_offset = transpose_b == CblasNoTrans ? begin : begin * ldb;
      blas_call(is_double, transpose_a, transpose_b, m, end - begin, k, a, lda,
                static_cast<const char*>(b) + b_offset * element, ldb,
                static_cast<char*>(c) + begin * element, ldc);
    }
  }
}

// C = A B on the thread pool. OpenBLAS itself runs single-threaded (see
// thread_pool.cpp): its own threads wait for work by spinning on
// sched_yield, which on two cores starves the pool running the kernels
// around each product (measured: half the time of a training step). So the
// product is cut into one band of C per thread, rows or columns, whichever
// dim is longer, and each band is one BLAS call (or several, when it is too
// long to wait for on Ctrl-C: gemm_band).
void gemm(bool is_double, CBLAS_TRANSPOSE transpose_a, CBLAS_TRANSPOSE transpose_b, int64_t m,
          int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, void* c,
          int64_t ldc) {
  const int threads = thread_count();
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool by_rows = m >= n;
  const int64_t extent = by_rows ? m : n;
  if (threads == 1 || work < kParallelGemmWork || extent < 2 * threads) {
    gemm_band(is_double, transpose_a, transpose_b, by_rows, 0, extent, m, n, k, a, lda, b, ldb, c,
              ldc);
    return;
  }
  const int64_t bands = threads;
  parallel_for(bands, 1, [&](int64_t begin, int64_t end) {
    for (int64_t band = begin; band < end; ++band) {
      // Bands of whole vector widths (16 floats), the last one takes the rest.
      const int64_t step = (extent / bands + 15) / 16 * 16;
      const int64_t first = std::min(extent, band * step);
      const int64_t last = band + 1 == bands ? extent : std::min(extent, first + step);
      if (first >= last) continue;
      gemm_band(is_double, transpose_a, transpose_b, by_rows, first, last, m, n, k, a, lda, b, ldb,
                c, ldc);
    }
  });
}

void blas_matmul(const Array& a_in, const Array& b_in, const Array& out) {
  const bool is_double = out.dtype == DType::f64;
  const int64_t batches = out.shape[0], m = out.shape[1], n = out.shape[2], k = a_in.shape[2];
  BlasView view_a, view_b;
  const Array a = blas_operand(a_in, &view_a);
  const Array b = blas_operand(b_in, &view_b);
  const int64_t element_size = dtype_size(out.dtype);
  const char* a_data = static_cast<const char*>(a.raw_data());
  const char* b_data = static_cast<const char*>(b.raw_data());
  char* c_data = static_cast<char*>(out.raw_data());
  const int64_t batch_stride_a = batches > 1 ? a.strides[0] : 0;
  const int64_t batch_stride_b = batches > 1 ? b.strides[0] : 0;

  // A batch of row-major matrices times one shared matrix (nn.Linear on a
  // [B, T, D] input) is a single product with B*M rows: one BLAS call
  // instead of B small ones.
  if (batches > 1 && batch_stride_b == 0 && view_a.transpose == CblasNoTrans &&
      batch_stride_a == m * view_a.ld && batches * m <= INT_MAX) {
    gemm(is_double, CblasNoTrans, view_b.transpose, batches * m, n, k, a_data, view_a.ld, b_data,
         view_b.ld, c_data, n);
    return;
  }
  // Products too small to cut run whole, several at once on the threads
  // (attention's heads); larger ones one after another, each cut in bands.
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const auto grain = static_cast<int64_t>(std::ceil(kParallelBatchWork / std::max(work, 1.0)));
  auto products = [&](int64_t first, int64_t last) {
    for (int64_t batch = first; batch < last; ++batch) {
      gemm(is_double, view_a.transpose, view_b.transpose, m, n, k,
           a_data + batch * batch_stride_a * element_size, view_a.ld,
           b_data + batch * batch_stride_b * element_size, view_b.ld,
           c_data + batch * m * n * element_size, n);
    }
  };
  if (work < kParallelGemmWork && batches > grain) return parallel_for(batches, grain, products);
  products(0, batches);
}

// Integer products wrap (computed in the unsigned type of the same width);
// bool products are or-of-and.
template <typename T>
struct AccumulatorOf {
  using type = std::make_unsigned_t<T>;
};
template <>
struct AccumulatorOf<bool> {
  using type = bool;
};
template <typename T>
using Accumulator = typename AccumulatorOf<T>::type;

// Rows of out per parallel task, columns and inner extent per cache block:
// a [kBlockInner, kBlockColumns] tile of b (128 KiB of i32) stays in L2
// while kBlockRows rows of a run over it.
constexpr int64_t kBlockRows = 16;
constexpr int64_t kBlockColumns = 256;
constexpr int64_t kBlockInner = 128;

template <typename T>
void loop_matmul(const Array& a, const Array& b_in, const Array& out) {
  using Acc = Accumulator<T>;
  const int64_t batches = out.shape[0], m = out.shape[1], n = out.shape[2], k = a.shape[2];
  // The inner loop walks rows of b: make them contiguous.
  const Array b = b_in.strides[2] == 1 || n <= 1 ? b_in : loops::contiguous_copy(b_in, "matmul");
  const T* a_data = a.data<T>();
  const T* b_data = b.data<T>();
  T* c_data = out.data<T>();
  const int64_t a_batch = batches > 1 ? a.strides[0] : 0, a_row = a.strides[1],
                a_col = a.strides[2];
  const int64_t b_batch = batches > 1 ? b.strides[0] : 0, b_row = b.strides[1];
  const int64_t row_groups = (m + kBlockRows - 1) / kBlockRows;
  const int64_t work_per_group = kBlockRows * n * std::max<int64_t>(1, k);
  parallel_for(batches * row_groups, std::max<int64_t>(1, kElementwiseGrain / work_per_group),
               [&](int64_t begin, int64_t end) {
                 auto acc = std::make_unique<Acc[]>(kBlockRows * kBlockColumns);
                 for (int64_t item = begin; item < end; ++item) {
                   const int64_t batch = item / row_groups;
                   const int64_t first_row = (item % row_groups) * kBlockRows;
                   const int64_t rows = std::min(kBlockRows, m - first_row);
                   const T* a_batch_data = a_data + batch * a_batch;
                   const T* b_batch_data = b_data + batch * b_batch;
                   for (int64_t first_column = 0; first_column < n; first_column += kBlockColumns) {
                     const int64_t columns = std::min(kBlockColumns, n - first_column);
                     std::fill(acc.get(), acc.get() + kBlockRows * kBlockColumns, Acc(0));
                     for (int64_t first_inner = 0; first_inner < k; first_inner += kBlockInner) {
                       const int64_t inner_end = std::min(k, first_inner + kBlockInner);
                       for (int64_t i = 0; i < rows; ++i) {
                         Acc* acc_row = acc.get() + i * kBlockColumns;
                         const T* a_row_data = a_batch_data + (first_row + i) * a_row;
                         for (int64_t kk = first_inner; kk < inner_end; ++kk) {
                           const T a_value = a_row_data[kk * a_col];
                           if (a_value == T(0)) continue;
                           const T* b_row_data = b_batch_data + kk * b_row + first_column;
                           if constexpr (std::is_same_v<T, bool>) {
                             for (int64_t j = 0; j < columns; ++j) acc_row[j] |= b_row_data[j];
                           } else {
                             const Acc factor = static_cast<Acc>(a_value);
                             for (int64_t j = 0; j < columns; ++j) {
                               acc_row[j] += factor * static_cast<Acc>(b_row_data[j]);
                             }
                           }
                         }
                       }
                     }
                     for (int64_t i = 0; i < rows; ++i) {
                       T* c_row = c_data + (batch * m + first_row + i) * n + first_column;
                       for (int64_t j = 0; j < columns; ++j) {
                         c_row[j] = static_cast<T>(acc[i * kBlockColumns + j]);
                       }
                     }
                   }
                 }
               });
}

}  // namespace

void float_gemm(bool is_double, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                const void* a, int64_t lda, const void* b, int64_t ldb, void* c, int64_t ldc) {
  gemm(is_double, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
       m, n, k, a, lda, b, ldb, c, ldc);
}

void float_gemm_unsplit(bool is_double, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                        int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, void* c,
                        int64_t ldc) {
  const bool by_rows = m >= n;
  gemm_band(is_double, transpose_a ? CblasTrans : CblasNoTrans,
            transpose_b ? CblasTrans : CblasNoTrans, by_rows, 0, by_rows ? m : n, m, n, k, a, lda,
            b, ldb, c, ldc);
}

void matmul_kernel(const Array& a, const Array& b, const Array& out) {
  LAZYLUA_ASSERT(a.rank() == 3 && b.rank() == 3 && out.rank() == 3);
  LAZYLUA_ASSERT(a.dtype == out.dtype && b.dtype == out.dtype && out.is_contiguous());
  const int64_t batches = out.shape[0], m = out.shape[1], n = out.shape[2], k = a.shape[2];
  LAZYLUA_ASSERT(a.shape[1] == m && b.shape[2] == n && b.shape[1] == k);
  LAZYLUA_ASSERT(a.shape[0] == batches && b.shape[0] == batches);
  if (batches == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    std::memset(out.raw_data(), 0, out.numel() * dtype_size(out.dtype));
    return;
  }
  if (is_floating(out.dtype)) {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
      fail("matmul: matrices of [{}, {}] x [{}, {}] exceed the BLAS size limit", m, k, k, n);
    }
    blas::require("matmul");  // here, not on a pool thread: a missing library is a Lua error
    blas_matmul(a, b, out);
    return;
  }
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_floating_point_v<T>) loop_matmul<T>(a, b, out);
  });
}

}  // namespace lazylua
