// core_test.cpp - shapes, broadcasting, strided views, the allocator and the
// thread pool.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/array.h"
#include "tensor/checked.h"
#include "tensor/interrupt.h"
#include "tensor/thread_pool.h"

namespace lazylua {
namespace {

TEST(Shape, NumelAndStrides) {
  EXPECT_EQ(numel(Shape{}), 1);
  EXPECT_EQ(numel(Shape{2, 3, 4}), 24);
  EXPECT_EQ(numel(Shape{2, 0, 4}), 0);
  EXPECT_EQ(contiguous_strides(Shape{2, 3, 4}), (Strides{12, 4, 1}));
  EXPECT_EQ(contiguous_strides(Shape{5}), (Strides{1}));
  EXPECT_EQ(contiguous_strides(Shape{}), (Strides{}));
}

TEST(Shape, CheckedNumelRejectsNegativeAndAbsurdSizes) {
  EXPECT_THROW(checked_numel(Shape{2, -1}, "zeros"), Error);
  EXPECT_THROW(checked_numel(Shape{1000000, 1000000, 1000}, "zeros"), Error);
  EXPECT_THROW(checked_numel(Shape{int64_t{1} << 62, 4}, "zeros"), Error);
  // An empty shape still bounds its other extents: strides and offsets
  // are computed from them.
  EXPECT_THROW(checked_numel(Shape{int64_t{1} << 62, 0}, "zeros"), Error);
  EXPECT_THROW(checked_numel(Shape{int64_t{1} << 40, 0, int64_t{1} << 40}, "zeros"), Error);
  EXPECT_EQ(checked_numel(Shape{int64_t{1} << 20, 0, int64_t{1} << 20}, "zeros"), 0);
  EXPECT_EQ(checked_numel(Shape{int64_t{1} << 40}, "zeros"), int64_t{1} << 40);
  EXPECT_THROW(checked_numel(Shape{(int64_t{1} << 40) + 1}, "zeros"), Error);
  // numel never overflows silently: an empty shape is 0 whatever its other
  // extents, anything else that does not fit is an Error.
  EXPECT_EQ(numel(Shape{int64_t{1} << 62, int64_t{1} << 62, 0}), 0);
  EXPECT_THROW(numel(Shape{int64_t{1} << 62, 4}), Error);
  try {
    checked_numel(Shape{3, -2}, "ones");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("ones: negative size -2"), std::string::npos);
  }
}

TEST(Checked, OverflowIsAnErrorNotAWrap) {
  EXPECT_EQ(checked_add(2, 3, "op"), 5);
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31, "op"), int64_t{1} << 62);
  EXPECT_THROW(checked_add(INT64_MAX, 1, "op"), Error);
  EXPECT_THROW(checked_mul(int64_t{1} << 32, int64_t{1} << 32, "op"), Error);
  try {
    checked_mul(INT64_MAX, 2, "narrow");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("narrow:"), std::string::npos) << error.what();
  }
  // [start, start + length) inside [0, size), without computing a sum that
  // wraps: narrow(2, maxinteger) once passed `start + length > size`.
  EXPECT_TRUE(range_fits(0, 10, 10));
  EXPECT_TRUE(range_fits(10, 0, 10));
  EXPECT_FALSE(range_fits(1, INT64_MAX, 10));
  EXPECT_FALSE(range_fits(INT64_MAX, INT64_MAX, 10));
  EXPECT_FALSE(range_fits(-1, 1, 10));
  EXPECT_FALSE(range_fits(0, -1, 10));
  EXPECT_FALSE(range_fits(11, 0, 10));
}

TEST(Shape, TooManyDimsIsAnError) {
  Shape shape;
  for (int i = 0; i < kMaxDims; i++) shape.push_back(1);
  EXPECT_THROW(shape.push_back(1), Error);
}

TEST(Shape, Broadcasting) {
  EXPECT_EQ(broadcast_shapes(Shape{2, 3}, Shape{3}, "add"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes(Shape{2, 1}, Shape{1, 3}, "add"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes(Shape{}, Shape{4, 1}, "add"), (Shape{4, 1}));
  EXPECT_EQ(broadcast_shapes(Shape{0, 1}, Shape{1, 5}, "add"), (Shape{0, 5}));
  try {
    broadcast_shapes(Shape{2, 3}, Shape{4}, "add");
    FAIL();
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("add"), std::string::npos);
    EXPECT_NE(message.find("[2, 3]"), std::string::npos);
    EXPECT_NE(message.find("[4]"), std::string::npos);
  }
}

TEST(Shape, LuaDimsAndIndices) {
  EXPECT_EQ(normalize_dim(1, 3, "sum"), 0);
  EXPECT_EQ(normalize_dim(3, 3, "sum"), 2);
  EXPECT_EQ(normalize_dim(-1, 3, "sum"), 2);
  EXPECT_EQ(normalize_dim(-3, 3, "sum"), 0);
  EXPECT_EQ(normalize_dim(4, 3, "unsqueeze", 1), 3);
  EXPECT_THROW(normalize_dim(0, 3, "sum"), Error);
  EXPECT_THROW(normalize_dim(4, 3, "sum"), Error);
  EXPECT_THROW(normalize_dim(-4, 3, "sum"), Error);
  EXPECT_EQ(normalize_index(1, 5, "select"), 0);
  EXPECT_EQ(normalize_index(-1, 5, "select"), 4);
  EXPECT_THROW(normalize_index(0, 5, "select"), Error);
  EXPECT_THROW(normalize_index(6, 5, "select"), Error);
}

// Fills a contiguous f32 array with 0, 1, 2, ...
Array iota(const Shape& shape) {
  Array a = Array::empty(shape, DType::f32);
  std::iota(a.data<float>(), a.data<float>() + a.numel(), 0.0f);
  return a;
}

float at(const Array& a, std::initializer_list<int64_t> index) {
  int64_t offset = 0;
  int d = 0;
  for (int64_t i : index) offset += i * a.strides[d++];
  return a.data<float>()[offset];
}

TEST(Array, ViewsShareStorage) {
  const Array a = iota(Shape{3, 4});
  EXPECT_TRUE(a.is_contiguous());
  const Array t = a.transposed(0, 1);
  EXPECT_EQ(t.shape, (Shape{4, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(at(t, {3, 2}), 11.0f);
  const Array n = a.narrowed(1, 1, 2);
  EXPECT_EQ(at(n, {2, 0}), 9.0f);
  const Array s = a.selected(0, 2);
  EXPECT_EQ(s.shape, (Shape{4}));
  EXPECT_EQ(at(s, {3}), 11.0f);
  a.data<float>()[9] = -1;
  EXPECT_EQ(at(n, {2, 0}), -1.0f);
  const Array e = a.selected(0, 0).expanded(Shape{2, 4});
  EXPECT_EQ(e.strides, (Strides{0, 1}));
  EXPECT_EQ(at(e, {1, 3}), 3.0f);
}

TEST(Array, ReshapeViewWhenStridesAllow) {
  const Array a = iota(Shape{2, 3, 4});
  const Array flat = a.try_reshape_view(Shape{24});
  ASSERT_TRUE(flat.defined());
  EXPECT_EQ(flat.strides, (Strides{1}));
  // Narrowing the last dim breaks contiguity between rows, but merging the
  // first two dims is still a view.
  const Array narrowed = a.narrowed(2, 0, 2);
  const Array merged = narrowed.try_reshape_view(Shape{6, 2});
  ASSERT_TRUE(merged.defined());
  EXPECT_EQ(merged.strides, (Strides{4, 1}));
  EXPECT_EQ(at(merged, {5, 1}), 21.0f);
  EXPECT_FALSE(narrowed.try_reshape_view(Shape{12}).defined());
  const Array transposed = a.transposed(1, 2);
  EXPECT_FALSE(transposed.try_reshape_view(Shape{24}).defined());
  const Array split = transposed.try_reshape_view(Shape{2, 2, 2, 3});
  ASSERT_TRUE(split.defined());
  EXPECT_EQ(at(split, {1, 1, 1, 2}), at(transposed, {1, 3, 2}));
}

TEST(Array, Overlap) {
  const Array a = iota(Shape{4, 4});
  const Array b = iota(Shape{4, 4});
  EXPECT_FALSE(may_overlap(a, b));
  EXPECT_TRUE(may_overlap(a, a.transposed(0, 1)));
  EXPECT_FALSE(may_overlap(a.narrowed(0, 0, 2), a.narrowed(0, 2, 2)));
  EXPECT_TRUE(may_overlap(a.narrowed(0, 0, 3), a.narrowed(0, 2, 2)));
}

TEST(Allocator, ReusesFreedBlocks) {
  const AllocatorStats before = allocator_stats();
  void* first = allocate_buffer(100000);
  free_buffer(first, 100000);
  void* second = allocate_buffer(99000);  // same size class
  EXPECT_EQ(first, second);
  free_buffer(second, 99000);
  const AllocatorStats after = allocator_stats();
  EXPECT_EQ(after.allocations - before.allocations, 2);
  EXPECT_GE(after.cache_hits - before.cache_hits, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
}

TEST(Allocator, AbsurdRequestIsAnError) {
  EXPECT_THROW(allocate_buffer(size_t{1} << 50), Error);
  void* ok = allocate_buffer(64);  // still usable afterwards
  free_buffer(ok, 64);
}

TEST(ThreadPool, CoversTheRangeOnceInChunks) {
  std::vector<std::atomic<int>> hits(100003);
  parallel_for(static_cast<int64_t>(hits.size()), 1000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i++) hits[i]++;
  });
  for (auto& hit : hits) ASSERT_EQ(hit.load(), 1);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  EXPECT_THROW(parallel_for(1 << 20, 1024,
                            [](int64_t begin, int64_t) {
                              if (begin > 0) fail("boom");
                            }),
               Error);
  // The pool still works afterwards.
  std::atomic<int64_t> total{0};
  parallel_for(1 << 20, 1024, [&](int64_t begin, int64_t end) { total += end - begin; });
  EXPECT_EQ(total.load(), 1 << 20);
}

TEST(ThreadPool, ThreadCountCanChange) {
  const int original = thread_count();
  set_thread_count(3);
  EXPECT_EQ(thread_count(), 3);
  // Each thread runs one chunk (in slices, see parallel_for_raw).
  std::set<std::thread::id> threads;
  std::mutex mutex;
  parallel_for(300000, 1000, [&](int64_t, int64_t) {
    std::lock_guard lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(threads.size(), 3u);
  set_thread_count(original);
}

// The caller's interrupt flag (interrupt.h) stops a job on every thread
// between slices, and reaches the caller as Interrupted; without a current
// flag nothing stops.
TEST(ThreadPool, InterruptStopsAJobBetweenSlices) {
  InterruptFlag flag{false};
  std::atomic<int64_t> done{0};
  auto interrupt_halfway = [&](int64_t begin, int64_t end) {
    if (done.fetch_add(end - begin) + (end - begin) >= (1 << 19)) flag.store(true);
  };
  {
    InterruptScope scope(&flag);
    EXPECT_THROW(parallel_for(1 << 22, 1024, interrupt_halfway), Interrupted);
    // Each thread ends its running slice at most.
    EXPECT_LE(done.load(), (1 << 19) + (thread_count() + 1) * 1024 * kSliceGrains);
    flag.store(false);
    done = 0;
    parallel_for(1 << 22, 1024, [&](int64_t begin, int64_t end) { done += end - begin; });
    EXPECT_EQ(done.load(), 1 << 22);
  }
  flag.store(true);
  done = 0;
  parallel_for(1 << 22, 1024, [&](int64_t begin, int64_t end) { done += end - begin; });
  EXPECT_EQ(done.load(), 1 << 22);
}

}  // namespace
}  // namespace lazylua
