// conv_onednn.cpp - f32 2-D convolutions through oneDNN's direct kernels,
// which run on blocked layouts (channels in blocks of 16, the weights
// packed for the kernel): 1.4-1.6x the rate of columns and an OpenBLAS
// product on ResNet-18's 3x3 layers with AVX-512, the reorders included
// (bench/conv_candidates/RESULTS.md, which measured the candidates).
//
// Our tensors stay NCHW: each call reorders its input into the layout the
// kernel wants and its output back. The weights of a buffer seen a second
// time unchanged are packed once and kept (WeightCache), so a model called
// again pays no packing.
//
// oneDNN runs on OpenMP; lazylua's own thread pool splits the work and each
// worker calls oneDNN with one OpenMP thread (no second set of threads
// spinning beside ours). The work is cut into items by the shapes alone, a
// sample and a part of the output channels each, and every output element
// is computed inside one item: the bits do not depend on the thread count,
// and eager mode and compiled plans call this same code.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <vector>

#include "../thread_pool.h"
#include "conv_geometry.h"

namespace lazylua::conv_detail {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// LAZYLUA_CONV: `onednn` (the default) or `columns` (this file's kernels
// off: every convolution runs on columns and OpenBLAS, as before oneDNN; for
// comparing the two). Anything else is said and taken as the default.
bool onednn_chosen() {
  static const bool chosen = [] {
    const char* text = std::getenv("LAZYLUA_CONV");
    if (!text || !*text || std::string_view(text) == "onednn") return true;
    if (std::string_view(text) == "columns") return false;
    std::fprintf(stderr, "lazylua: LAZYLUA_CONV=%s is not onednn or columns; using onednn\n", text);
    return true;
  }();
  return chosen;
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Each thread of ours calls oneDNN with one OpenMP thread (omp_set_num_threads
// sets the calling thread's own value).
dnnl::stream& thread_stream() {
  thread_local bool single = (omp_set_num_threads(1), true);
  thread_local dnnl::stream stream(cpu_engine());
  (void)single;
  return stream;
}

// Output channels of one item: two parts when they split into whole blocks
// of 16, so that a single sample still keeps two threads busy.
int64_t output_parts(int64_t outputs) {
  return outputs >= 64 && outputs % 32 == 0 ? 2 : 1;
}

// What one item runs: the convolution of one sample into one part of the
// layer's output channels, with the reorders around it.
struct Primitive {
  dnnl::convolution_forward conv;
  memory::desc src, weights, dst, scratchpad;  // the layouts the kernel wants
  memory::desc plain_src, plain_weights, plain_dst, plain_bias;
  dnnl::reorder src_in, weights_in, dst_out;  // null when the layouts agree
};

using PrimitiveKey = std::vector<int64_t>;

constexpr size_t kAlign = 64;
size_t round_up(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}
char* round_up(char* pointer) {
  return reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(pointer)));
}

std::shared_ptr<const Primitive> make_primitive(const ConvGeometry& g, int64_t outputs,
                                                bool has_bias) {
  const auto& engine = cpu_engine();
  const int64_t ih = g.in[1], iw = g.in[2], oh = g.out[1], ow = g.out[2];
  auto p = std::make_shared<Primitive>();
  p->plain_src = memory::desc({1, g.c, ih, iw}, memory::data_type::f32, Tag::nchw);
  p->plain_weights =
      memory::desc({outputs, g.c, g.kernel[1], g.kernel[2]}, memory::data_type::f32, Tag::oihw);
  // A part of the channels of one sample of y [N, O, oh, ow].
  p->plain_dst = memory::desc({1, outputs, oh, ow}, memory::data_type::f32,
                              memory::dims{g.o * oh * ow, oh * ow, ow, 1});
  p->plain_bias = memory::desc({outputs}, memory::data_type::f32, Tag::x);
  const memory::dims strides{g.stride[1], g.stride[2]};
  const memory::dims dilation{g.dilation[1] - 1, g.dilation[2] - 1};
  const memory::dims pad_l{g.pad_before[1], g.pad_before[2]};
  // The padding after that gives exactly y's extents.
  memory::dims pad_r(2);
  for (int d = 1; d < 3; d++) {
    pad_r[d - 1] = (g.out[d] - 1) * g.stride[d] + (g.kernel[d] - 1) * g.dilation[d] + 1 - g.in[d] -
                   g.pad_before[d];
  }
  auto any = [](const memory::desc& plain) {
    return memory::desc(plain.dims(), memory::data_type::f32, Tag::any);
  };
  const auto description = dnnl::convolution_forward::desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, any(p->plain_src),
      any(p->plain_weights), has_bias ? p->plain_bias : memory::desc(), any(p->plain_dst), strides,
      dilation, pad_l, pad_r);
  dnnl::primitive_attr attributes;
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::convolution_forward::primitive_desc pd(description, attributes, engine);
  p->conv = dnnl::convolution_forward(pd);
  p->src = pd.src_desc();
  p->weights = pd.weights_desc();
  p->dst = pd.dst_desc();
  p->scratchpad = pd.scratchpad_desc();
  if (p->src != p->plain_src) {
    p->src_in = dnnl::reorder(dnnl::reorder::primitive_desc(engine, p->plain_src, engine, p->src));
  }
  if (p->weights != p->plain_weights) {
    p->weights_in =
        dnnl::reorder(dnnl::reorder::primitive_desc(engine, p->plain_weights, engine, p->weights));
  }
  if (p->dst != p->plain_dst) {
    p->dst_out = dnnl::reorder(dnnl::reorder::primitive_desc(engine, p->dst, engine, p->plain_dst));
  }
  return p;
}

// Primitives by shape: made once per layer shape (oneDNN generates their
// code), kept for the process. Null: oneDNN has no kernel for the shape.
std::shared_ptr<const Primitive> find_primitive(const ConvGeometry& g, int64_t outputs,
                                                bool has_bias) {
  static std::mutex mutex;
  static std::map<PrimitiveKey, std::shared_ptr<const Primitive>> primitives;
  PrimitiveKey key{g.c,         g.o,           outputs,       g.in[1],         g.in[2],
                   g.out[1],    g.out[2],      g.kernel[1],   g.kernel[2],     g.stride[1],
                   g.stride[2], g.dilation[1], g.dilation[2], g.pad_before[1], g.pad_before[2],
                   has_bias};
  const std::lock_guard lock(mutex);
  auto found = primitives.find(key);
  if (found != primitives.end()) return found->second;
  std::shared_ptr<const Primitive> made;
  try {
    made = make_primitive(g, outputs, has_bias);
  } catch (const dnnl::error&) {
    made = nullptr;  // the column kernels take it
  }
  primitives.emplace(std::move(key), made);
  return made;
}

// Packed weights, kept for a weight buffer seen a second time unchanged
// (the weights of a model called again). A buffer seen once is only noted,
// by id and version, without a reference: a training step's weights, new
// or updated at every step, are packed at each call and not kept. An entry
// holds a reference to its buffer, so the address is not reused and a plan
// does not share the buffer with another slot; that reference is counted
// apart (Buffer::cache_references) so that a plan may still update the
// weights in place, and it bumps the version when it does, as an eager
// in-place write does. Memory lent by a host program can change behind our
// back and is packed at every call.
class WeightCache {
 public:
  // The weights of output channels [first, first + outputs) of `weight`,
  // packed as `primitive` wants; null when not kept (the caller packs).
  std::shared_ptr<memory> find(const Array& weight, int64_t first, const Primitive& primitive,
                               dnnl::stream& stream) {
    const Buffer& buffer = *weight.buffer;
    if (buffer.lent()) return nullptr;
    const Key key{buffer.id, weight.offset, first, primitive.weights};
    const std::lock_guard lock(mutex_);
    forget_dead_entries();
    for (auto& entry : entries_) {
      if (entry.key == key) {
        if (entry.version != buffer.version) {
          entry.packed = pack(weight, first, primitive, stream);
          entry.version = buffer.version;
        }
        return entry.packed;
      }
    }
    const Seen seen{buffer.id, weight.offset, first, buffer.version};
    if (std::find(seen_.begin(), seen_.end(), seen) == seen_.end()) {
      if (seen_.size() == kMaxSeen) seen_.erase(seen_.begin());
      seen_.push_back(seen);
      return nullptr;
    }
    Entry entry{key, weight.buffer, buffer.version, pack(weight, first, primitive, stream)};
    entry.buffer->cache_references++;
    bytes_ += primitive.weights.get_size();
    entries_.push_back(std::move(entry));
    return entries_.back().packed;
  }

  static std::shared_ptr<memory> pack(const Array& weight, int64_t first,
                                      const Primitive& primitive, dnnl::stream& stream) {
    const int64_t per_output = weight.numel() / weight.shape[0];
    memory plain(primitive.plain_weights, cpu_engine(), weight.data<float>() + first * per_output);
    auto packed = std::make_shared<memory>(primitive.weights, cpu_engine());
    primitive.weights_in.execute(stream, plain, *packed);
    stream.wait();
    return packed;
  }

 private:
  struct Key {
    uint64_t buffer;
    int64_t offset, first;
    memory::desc layout;
    bool operator==(const Key&) const = default;
  };
  struct Seen {
    uint64_t buffer;
    int64_t offset, first;
    uint32_t version;
    bool operator==(const Seen&) const = default;
  };
  struct Entry {
    Key key;
    Ref<Buffer> buffer;
    uint32_t version;
    std::shared_ptr<memory> packed;
  };
  static constexpr size_t kMaxSeen = 1024;

  // Entries whose buffer only the cache still holds (the model is gone),
  // and all of them when the packed copies pass a bound.
  void forget_dead_entries() {
    constexpr size_t kMaxBytes = size_t{1} << 30;
    const bool over = bytes_ > kMaxBytes;
    std::erase_if(entries_, [&](const Entry& entry) {
      const bool dead = over || entry.buffer->use_count() == 1;
      if (dead) {
        bytes_ -= entry.packed->get_desc().get_size();
        entry.buffer->cache_references--;
      }
      return dead;
    });
  }

  std::mutex mutex_;
  std::vector<Entry> entries_;
  std::vector<Seen> seen_;
  size_t bytes_ = 0;
};

WeightCache& weight_cache() {
  static WeightCache* cache = new WeightCache;  // never destroyed: workers may outlive exit
  return *cache;
}

}  // namespace

bool onednn_forward(const ConvGeometry& g, int rank, const Array& x, const Array& weight,
                    const Array& bias, const Array& y) {
  // A 1x1 window is a plain matrix product (conv.cpp reads the input in
  // place), which OpenBLAS does as fast without the reorders.
  if (y.dtype != DType::f32 || rank != 2 || g.groups != 1 || g.pointwise() || g.n == 0 ||
      g.c == 0 || !onednn_chosen()) {
    return false;
  }
  const int64_t parts = output_parts(g.o), outputs = g.o / parts;
  dnnl::stream& caller_stream = thread_stream();  // before any oneDNN call on this thread
  const auto primitive = find_primitive(g, outputs, bias.defined());
  if (!primitive) return false;
  // The packed weights of each part, on this thread (cached, or packed now
  // into memory this call owns).
  std::vector<std::shared_ptr<memory>> packed(parts);
  for (int64_t part = 0; part < parts; part++) {
    if (!primitive->weights_in) continue;  // the plain weights are the kernel's
    packed[part] = weight_cache().find(weight, part * outputs, *primitive, caller_stream);
    if (!packed[part])
      packed[part] = WeightCache::pack(weight, part * outputs, *primitive, caller_stream);
  }
  const int64_t in_sample = g.c * g.in_plane(), out_sample = g.o * g.out_plane();
  const int64_t per_output = weight.numel() / g.o;
  const size_t src_bytes = primitive->src_in ? primitive->src.get_size() : 0;
  const size_t dst_bytes = primitive->dst_out ? primitive->dst.get_size() : 0;
  std::atomic<bool> failed{false};
  auto run_item = [&](int64_t item) {
    const int64_t sample = item / parts, part = item % parts;
    try {
      auto& stream = thread_stream();
      const auto& engine = cpu_engine();
      // src, dst and the kernel's scratchpad, each 64-byte aligned.
      const size_t dst_at = round_up(src_bytes), scratchpad_at = dst_at + round_up(dst_bytes);
      char* scratch = round_up(thread_scratch<char>(
          static_cast<int64_t>(scratchpad_at + primitive->scratchpad.get_size() + kAlign)));
      memory plain_src(primitive->plain_src, engine,
                       const_cast<float*>(x.data<float>()) + sample * in_sample);
      memory src = plain_src;
      if (primitive->src_in) {
        src = memory(primitive->src, engine, scratch);
        primitive->src_in.execute(stream, plain_src, src);
      }
      memory plain_dst(primitive->plain_dst, engine,
                       y.data<float>() + sample * out_sample + part * outputs * g.out_plane());
      memory dst =
          primitive->dst_out ? memory(primitive->dst, engine, scratch + dst_at) : plain_dst;
      memory weights =
          packed[part]
              ? *packed[part]
              : memory(primitive->plain_weights, engine,
                       const_cast<float*>(weight.data<float>()) + part * outputs * per_output);
      memory scratchpad(primitive->scratchpad, engine, scratch + scratchpad_at);
      std::unordered_map<int, memory> arguments{{DNNL_ARG_SRC, src},
                                                {DNNL_ARG_WEIGHTS, weights},
                                                {DNNL_ARG_DST, dst},
                                                {DNNL_ARG_SCRATCHPAD, scratchpad}};
      if (bias.defined()) {
        arguments.emplace(DNNL_ARG_BIAS,
                          memory(primitive->plain_bias, engine,
                                 const_cast<float*>(bias.data<float>()) + part * outputs));
      }
      primitive->conv.execute(stream, arguments);
      if (primitive->dst_out) primitive->dst_out.execute(stream, dst, plain_dst);
      stream.wait();
    } catch (const dnnl::error&) {
      failed = true;
    }
  };
  parallel_for(g.n * parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; item++) run_item(item);
  });
  if (failed) throw InternalError("oneDNN failed to run a convolution it had accepted");
  return true;
}

}  // namespace lazylua::conv_detail
