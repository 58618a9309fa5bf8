// candidates.h - the convolution libraries measured by conv_bench.cpp, each
// behind a small wrapper that owns its operator and buffers: oneDNN (plain
// NCHW, or the blocked layout it picks, with optional post-ops) and XNNPACK
// (NHWC). Data is f32, weights are PyTorch's [O, C/groups, kh, kw].
#pragma once

#include <pthreadpool.h>
#include <xnnpack.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace conv_bench {

// One convolution layer (square windows, as in both models).
struct Layer {
  std::string model;
  int index = 0;
  int64_t n = 1, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, stride = 1, pad = 0, dilation = 1,
          groups = 1;
  int64_t out_h() const { return (h + 2 * pad - dilation * (kh - 1) - 1) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - dilation * (kw - 1) - 1) / stride + 1; }
  int64_t src_size() const { return n * c * h * w; }
  int64_t weight_size() const { return o * (c / groups) * kh * kw; }
  int64_t dst_size() const { return n * o * out_h() * out_w(); }
  double flops() const { return 2.0 * double(dst_size()) * double(c / groups * kh * kw); }
  bool depthwise() const { return groups > 1 && groups == c; }
  std::string kind() const {
    if (depthwise()) return "dw" + std::to_string(kh) + "x" + std::to_string(kw);
    if (kh == 1 && kw == 1) return "1x1";
    return std::to_string(kh) + "x" + std::to_string(kw);
  }
  std::string key() const {
    char text[160];
    std::snprintf(text, sizeof text, "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld", long(n),
                  long(c), long(h), long(w), long(o), long(kh), long(kw), long(stride), long(pad),
                  long(dilation), long(groups));
    return text;
  }
};

// oneDNN's weight dims: [O, C, kh, kw], or [G, O/G, C/G, kh, kw] when grouped.
inline dnnl::memory::dims dnnl_weight_dims(const Layer& l) {
  if (l.groups == 1) return {l.o, l.c, l.kh, l.kw};
  return {l.groups, l.o / l.groups, l.c / l.groups, l.kh, l.kw};
}

inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "conv_bench: %s\n", what);
    std::exit(1);
  }
}

// What runs after the convolution (and its bias), in the same pass.
enum class Epilogue {
  none,
  relu,         // a folded BatchNorm (bias) then ReLU: the common case
  sum_relu,     // the residual added (a sum into dst), then ReLU: a ResNet block's end
  bn_sum_relu,  // per-channel scale and shift (binary post-ops: an unfolded
                // BatchNorm), the residual added, then ReLU
};

// Where oneDNN's src and dst lie.
enum class Layout {
  nchw,     // as lazylua holds them
  any,      // the layout the primitive picks (NHWC for brgconv in 2.6)
  nchw16c,  // nChw16c, the classic AVX-512 blocked layout
};

// oneDNN's forward convolution, src and dst in one of the Layouts (weights
// in whatever format the primitive wants, reordered once, as a constant
// weight would be). Outside NCHW, the reorders from and to NCHW are
// separate steps so they can be timed apart.
class DnnlConv {
 public:
  DnnlConv(const dnnl::engine& engine, const Layer& l, Layout layout, Epilogue epilogue,
           const float* x, const float* weight, const float* bias,
           dnnl::prop_kind prop = dnnl::prop_kind::forward_inference)
      : layer_(l), blocked_(layout != Layout::nchw), epilogue_(epilogue) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::dims src_dims{l.n, l.c, l.h, l.w}, dst_dims{l.n, l.o, l.out_h(), l.out_w()};
    const dnnl::memory::dims wei_dims = dnnl_weight_dims(l);
    const dnnl::memory::desc user_src(src_dims, dt::f32, tag::nchw),
        user_dst(dst_dims, dt::f32, tag::nchw),
        user_wei(wei_dims, dt::f32, l.groups == 1 ? tag::oihw : tag::goihw),
        bias_md({l.o}, dt::f32, tag::x);
    const tag data_tag = layout == Layout::nchw  ? tag::nchw
                         : layout == Layout::any ? tag::any
                                                 : tag::nChw16c;
    const dnnl::memory::desc src_any(src_dims, dt::f32, data_tag),
        dst_any(dst_dims, dt::f32, data_tag), wei_any(wei_dims, dt::f32, tag::any);
    const dnnl::memory::dims strides{l.stride, l.stride}, dilates{l.dilation - 1, l.dilation - 1},
        pads{l.pad, l.pad};
    dnnl::convolution_forward::desc desc(prop, dnnl::algorithm::convolution_auto, src_any, wei_any,
                                         bias_md, dst_any, strides, dilates, pads, pads);
    dnnl::primitive_attr attr;
    dnnl::post_ops ops;
    const dnnl::memory::desc channel_md({1, l.o, 1, 1}, dt::f32, tag::abcd);
    if (epilogue == Epilogue::bn_sum_relu) {
      ops.append_binary(dnnl::algorithm::binary_mul, channel_md);
      ops.append_binary(dnnl::algorithm::binary_add, channel_md);
    }
    if (epilogue == Epilogue::sum_relu || epilogue == Epilogue::bn_sum_relu) ops.append_sum(1.0f);
    if (epilogue != Epilogue::none) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0, 0);
    attr.set_post_ops(ops);
    pd_ = dnnl::convolution_forward::primitive_desc(desc, attr, engine);
    prim_ = dnnl::convolution_forward(pd_);

    dnnl::stream stream(engine);
    user_src_ = dnnl::memory(user_src, engine, const_cast<float*>(x));
    user_dst_ = dnnl::memory(user_dst, engine);
    dnnl::memory user_wei_mem(user_wei, engine, const_cast<float*>(weight));
    weights_ = dnnl::memory(pd_.weights_desc(), engine);
    dnnl::reorder(user_wei_mem, weights_).execute(stream, user_wei_mem, weights_);
    bias_ = dnnl::memory(bias_md, engine, const_cast<float*>(bias));
    if (blocked_) {
      src_ = dnnl::memory(pd_.src_desc(), engine);
      dst_ = dnnl::memory(pd_.dst_desc(), engine);
      to_blocked_ = dnnl::reorder(user_src_, src_);
      from_blocked_ = dnnl::reorder(dst_, user_dst_);
      to_blocked_.execute(stream, user_src_, src_);
    } else {
      src_ = user_src_;
      dst_ = user_dst_;
    }
    stream.wait();
    args_ = {{DNNL_ARG_SRC, src_},
             {DNNL_ARG_WEIGHTS, weights_},
             {DNNL_ARG_BIAS, bias_},
             {DNNL_ARG_DST, dst_}};
    if (epilogue == Epilogue::bn_sum_relu) {
      scale_.assign(size_t(l.o), 0.0f);
      shift_.assign(size_t(l.o), 0.0f);
      for (int64_t i = 0; i < l.o; ++i) {
        scale_[size_t(i)] = 0.5f + 0.01f * float(i % 7);
        shift_[size_t(i)] = 0.1f * float(i % 5) - 0.2f;
      }
      args_[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] =
          dnnl::memory(channel_md, engine, scale_.data());
      args_[DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1] =
          dnnl::memory(channel_md, engine, shift_.data());
    }
  }

  void run(dnnl::stream& stream) {
    prim_.execute(stream, args_);
    stream.wait();
  }
  void reorder_in(dnnl::stream& stream) {
    to_blocked_.execute(stream, user_src_, src_);
    stream.wait();
  }
  void reorder_out(dnnl::stream& stream) {
    from_blocked_.execute(stream, dst_, user_dst_);
    stream.wait();
  }
  // The output in NCHW (after a reorder for the blocked layout).
  const float* output(dnnl::stream& stream) {
    if (blocked_) reorder_out(stream);
    return static_cast<const float*>(user_dst_.get_data_handle());
  }
  float* dst_plain() { return static_cast<float*>(user_dst_.get_data_handle()); }
  // The primitive's implementation and the src layout it works on, e.g.
  // "brgconv:avx512_core/acdb" (acdb is NHWC, aBcd16b nChw16c).
  std::string impl() const {
    std::string name = const_cast<dnnl::convolution_forward::primitive_desc&>(pd_).impl_info_str();
    return name + "/" + format_name(pd_.src_desc());
  }
  // oneDNN's name of a layout: the dims from the outermost stride in, a
  // blocked dim in capitals, then the inner blocks.
  static std::string format_name(const dnnl::memory::desc& md) {
    const auto& blocking = md.data.format_desc.blocking;
    std::vector<int> order(size_t(md.data.ndims));
    for (int i = 0; i < md.data.ndims; ++i) order[size_t(i)] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return blocking.strides[a] > blocking.strides[b]; });
    std::string name;
    for (int i : order) {
      bool is_blocked = false;
      for (int k = 0; k < blocking.inner_nblks; ++k) is_blocked |= blocking.inner_idxs[k] == i;
      name += char((is_blocked ? 'A' : 'a') + i);
    }
    for (int k = 0; k < blocking.inner_nblks; ++k)
      name += std::to_string(blocking.inner_blks[k]) + char('a' + blocking.inner_idxs[k]);
    return name;
  }

 private:
  Layer layer_;
  bool blocked_;
  Epilogue epilogue_;
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward prim_;
  dnnl::memory user_src_, user_dst_, src_, dst_, weights_, bias_;
  dnnl::reorder to_blocked_, from_blocked_;
  std::vector<float> scale_, shift_;
  std::unordered_map<int, dnnl::memory> args_;
};

// XNNPACK's f32 NHWC convolution operator. Its weights are
// [groups][O/groups][kh][kw][C/groups], repacked once at creation.
class XnnConv {
 public:
  XnnConv(const Layer& l, const float* x_nhwc, const float* weight, const float* bias,
          pthreadpool_t pool, bool relu = false, uint32_t flags = 0)
      : layer_(l), dst_(size_t(l.dst_size())) {
    const int64_t cg = l.c / l.groups, og = l.o / l.groups;
    std::vector<float> packed(size_t(l.weight_size()));
    for (int64_t g = 0; g < l.groups; ++g)
      for (int64_t oc = 0; oc < og; ++oc)
        for (int64_t ic = 0; ic < cg; ++ic)
          for (int64_t y = 0; y < l.kh; ++y)
            for (int64_t x = 0; x < l.kw; ++x)
              packed[size_t((((g * og + oc) * l.kh + y) * l.kw + x) * cg + ic)] =
                  weight[size_t((((g * og + oc) * cg + ic) * l.kh + y) * l.kw + x)];
    const auto p = uint32_t(l.pad);
    check(xnn_create_convolution2d_nhwc_f32(
              p, p, p, p, uint32_t(l.kh), uint32_t(l.kw), uint32_t(l.stride), uint32_t(l.stride),
              uint32_t(l.dilation), uint32_t(l.dilation), uint32_t(l.groups), size_t(cg),
              size_t(og), size_t(l.c), size_t(l.o), packed.data(), bias, relu ? 0.0f : -INFINITY,
              INFINITY, flags, &op_) == xnn_status_success,
          "xnn_create_convolution2d_nhwc_f32 failed");
    check(xnn_setup_convolution2d_nhwc_f32(op_, size_t(l.n), size_t(l.h), size_t(l.w), x_nhwc,
                                           dst_.data(), pool) == xnn_status_success,
          "xnn_setup_convolution2d_nhwc_f32 failed");
  }
  XnnConv(const XnnConv&) = delete;
  XnnConv& operator=(const XnnConv&) = delete;
  ~XnnConv() { xnn_delete_operator(op_); }
  void run(pthreadpool_t pool) {
    check(xnn_run_operator(op_, pool) == xnn_status_success, "xnn_run_operator failed");
  }
  const std::vector<float>& output_nhwc() const { return dst_; }

 private:
  Layer layer_;
  xnn_operator_t op_ = nullptr;
  std::vector<float> dst_;
};

// NCHW <-> NHWC, the layout change an NHWC library costs lazylua.
inline void nchw_to_nhwc(const float* in, float* out, int64_t n, int64_t c, int64_t hw) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < hw; ++i) out[(s * hw + i) * c + ch] = in[(s * c + ch) * hw + i];
}
inline void nhwc_to_nchw(const float* in, float* out, int64_t n, int64_t c, int64_t hw) {
  for (int64_t s = 0; s < n; ++s)
    for (int64_t i = 0; i < hw; ++i)
      for (int64_t ch = 0; ch < c; ++ch) out[(s * c + ch) * hw + i] = in[(s * hw + i) * c + ch];
}

}  // namespace conv_bench
