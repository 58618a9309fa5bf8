// conv.h - convolutions of spatial rank 1 to 3 (stride, dilation,
// asymmetric padding, groups, bias) and 2-D max pooling, for f32 and f64:
// the kernels that eager mode, the reference walker and compiled plans all
// call, so every tier computes the same bits.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "../array.h"
#include "elementwise.h"

namespace lazylua {

// A sliding window: kernel kh x kw, strides sh, sw, zero (convolution) or
// -inf (pooling) padding ph, pw on both sides.
struct Window2d {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  int64_t out_height(int64_t height) const { return (height + 2 * ph - kh) / sh + 1; }
  int64_t out_width(int64_t width) const { return (width + 2 * pw - kw) / sw + 1; }
};

// The window of a convolution over `rank` spatial dims (1 to 3), as
// torch.nn.functional.conv{1,2,3}d: per dim a kernel extent (the weight's),
// a stride, a dilation and zero padding before and after (asymmetric, as
// ONNX's pads); the channels split into `groups`.
struct ConvWindow {
  static constexpr int kMaxRank = 3;
  int rank = 2;
  int64_t groups = 1;
  int64_t kernel[kMaxRank] = {1, 1, 1};
  int64_t stride[kMaxRank] = {1, 1, 1};
  int64_t dilation[kMaxRank] = {1, 1, 1};
  int64_t pad_before[kMaxRank] = {0, 0, 0};
  int64_t pad_after[kMaxRank] = {0, 0, 0};

  // The span of input one output reads along dim d.
  int64_t reach(int d) const { return dilation[d] * (kernel[d] - 1) + 1; }
  // Output extent along dim d of an input extent, or 0 when the padded
  // input is shorter than the window.
  int64_t out_extent(int d, int64_t in) const {
    const int64_t padded = in + pad_before[d] + pad_after[d];
    return padded < reach(d) ? 0 : (padded - reach(d)) / stride[d] + 1;
  }
};

// What a compiled plan has a convolution apply to each value it writes, in
// the same pass (docs/architecture.md, "Epilogues"): up to two of relu,
// maximum and minimum with a scalar, the clamps that follow convolutions in
// image models (ReLU, ReLU6 as ONNX's Clip), and silu, x * sigmoid(x)
// (EfficientNet's activation, ONNX's Sigmoid and Mul). Each stage computes
// exactly what the elementwise ops compute (elementwise_binary.cpp, NaN
// wins, the operands in the graph's order; kernel_math.h's sigmoid), so a
// fused plan gives the eager bits.
struct ConvEpilogue {
  enum class Kind : uint8_t { relu, maximum, minimum, silu };
  struct Stage {
    Kind kind = Kind::relu;
    bool value_first = true;  // maximum, minimum: the convolution's value is operand a
    double operand = 0;       // maximum, minimum: the other operand (of the value's dtype)
  };
  static constexpr int kMaxStages = 2;
  int count = 0;
  Stage stages[kMaxStages];

  // Applies the stages to n values in place; apply_after_adding adds `add`
  // (a bias) to each first, in the same pass. ReLU and Clip (maximum, then
  // minimum, the value first in both) are one loop; other chains a loop
  // per stage, over a run short enough to stay in cache.
  template <typename T>
  void apply(T* values, int64_t n) const {
    run(
        values, n, [](T value) { return value; }, false);
  }
  // Every value of `values` (contiguous, f32 or f64).
  void apply(const Array& values) const {
    if (values.dtype == DType::f64) return apply(values.data<double>(), values.numel());
    apply(values.data<float>(), values.numel());
  }
  template <typename T>
  void apply_after_adding(T* values, int64_t n, T add) const {
    run(
        values, n, [add](T value) { return value + add; }, true);
  }

 private:
  // maximum(a, b) and minimum(a, b) of elementwise_binary.cpp: a when it
  // compares past b or is NaN; relu as elementwise_unary.cpp's. A select by
  // bit mask: with `?:` GCC leaves a loop of two clamps scalar.
  template <typename T>
  [[gnu::always_inline]] static T pick_first(bool beyond, T a, T b) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const Bits mask = Bits(0) - static_cast<Bits>(beyond | (a != a));
    return std::bit_cast<T>((std::bit_cast<Bits>(a) & mask) | (std::bit_cast<Bits>(b) & ~mask));
  }
  template <typename T>
  [[gnu::always_inline]] static T relu(T value) {
    return value < T(0) ? T(0) : value;
  }

  template <typename T, typename First>
  void run(T* values, int64_t n, First first, bool has_first) const {
    if (count == 1 && stages[0].kind == Kind::relu) {
      for (int64_t i = 0; i < n; i++) values[i] = relu(first(values[i]));
      return;
    }
    if (count == 2 && stages[0].kind == Kind::maximum && stages[0].value_first &&
        stages[1].kind == Kind::minimum && stages[1].value_first) {
      const T low = static_cast<T>(stages[0].operand), high = static_cast<T>(stages[1].operand);
      for (int64_t i = 0; i < n; i++) {
        const T value = first(values[i]), raised = pick_first(value > low, value, low);
        values[i] = pick_first(raised < high, raised, high);
      }
      return;
    }
    if (has_first) {
      for (int64_t i = 0; i < n; i++) values[i] = first(values[i]);
    }
    for (int s = 0; s < count; s++) {
      const Stage& stage = stages[s];
      const T other = static_cast<T>(stage.operand);
      if (stage.kind == Kind::relu) {
        for (int64_t i = 0; i < n; i++) values[i] = relu(values[i]);
      } else if (stage.kind == Kind::silu) {
        silu_in_place(values, n);
      } else if (stage.kind == Kind::maximum && stage.value_first) {
        for (int64_t i = 0; i < n; i++) values[i] = pick_first(values[i] > other, values[i], other);
      } else if (stage.kind == Kind::maximum) {
        for (int64_t i = 0; i < n; i++) values[i] = pick_first(other > values[i], other, values[i]);
      } else if (stage.value_first) {
        for (int64_t i = 0; i < n; i++) values[i] = pick_first(values[i] < other, values[i], other);
      } else {
        for (int64_t i = 0; i < n; i++) values[i] = pick_first(other < values[i], other, values[i]);
      }
    }
  }
};

// All arrays contiguous and of one float dtype; shapes already checked
// (eager_ops_conv.cpp). x [N, C, spatial...], weight [O, C/groups, k...],
// y [N, O, out...]. `bias` [O] may be undefined. The epilogue's stages are
// applied to every value of y.
void conv_kernel(const Array& x, const Array& weight, const Array& bias, const ConvWindow& window,
                 const Array& y, const ConvEpilogue& epilogue = {});
// grad_x [N, C, in...] from grad_y [N, O, out...] and weight: the adjoint of
// conv_kernel, which is also the transposed convolution of grad_y; `bias`
// [C] (undefined: none) is added to every position. grad_y's extents may be
// below the window's output extents (a transposed convolution's
// output_padding): the missing positions count as zeros.
void conv_grad_input_kernel(const Array& grad_y, const Array& weight, const Array& bias,
                            const ConvWindow& window, const Array& grad_x);
// grad_weight [O, C/groups, k...] from grad_y [N, O, out...] and x (grad_y's
// extents may be short, as above).
void conv_grad_weight_kernel(const Array& grad_y, const Array& x, const ConvWindow& window,
                             const Array& grad_weight);

// y [N, C, OH, OW]: the maximum of each window (NaN if it holds one).
void max_pool2d_kernel(const Array& x, const Window2d& window, const Array& y);
// grad_x [N, C, H, W]: each window's gradient added at its first maximum.
void max_pool2d_grad_kernel(const Array& grad_y, const Array& x, const Window2d& window,
                            const Array& grad_x);

}  // namespace lazylua
