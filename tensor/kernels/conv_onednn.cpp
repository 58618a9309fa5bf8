// conv_onednn.cpp - f32 2-D convolutions and their gradients through
// oneDNN's direct kernels, which run on blocked layouts (channels in blocks
// of 16, the weights packed for the kernel): 1.4-1.6x the rate of columns
// and an OpenBLAS product on ResNet-18's 3x3 layers with AVX-512, the
// reorders included (bench/conv_candidates/RESULTS.md, which measured the
// candidates).
//
// Our tensors stay NCHW: each call reorders its inputs into the layouts the
// kernel wants and its result back. The weights of a buffer seen a second
// time unchanged are packed once and kept (WeightCache), so a model called
// again pays no packing.
//
// oneDNN runs on OpenMP; lazylua's own thread pool splits the work and each
// worker calls oneDNN with one OpenMP thread (no second set of threads
// spinning beside ours). The work is cut into items by the shapes alone:
// a run of samples and a part of the channels each (output channels for the
// forward pass and the weight gradient, input channels for the input
// gradient). Every output and input-gradient element is computed inside one
// item; the weight gradient of each run of samples goes to its own partial
// sum, and the partial sums are added in run order. So the bits do not
// depend on the thread count, and eager mode and compiled plans call this
// same code.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../thread_pool.h"
#include "conv_geometry.h"
#include "conv_onednn.h"

namespace lazylua::conv_detail {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

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

// The convolutions this file takes: f32 2-D with one group, other than a
// 1x1 window (a plain matrix product, which conv.cpp reads in place and
// OpenBLAS does as fast without the reorders) and a one-channel input
// (oneDNN's first-layer kernels and the reorders of their 16-channel
// blocks were slower than conv.cpp's kernels on a 28x28 input).
bool taken(const ConvGeometry& g, int rank, DType dtype) {
  return dtype == DType::f32 && rank == 2 && g.groups == 1 && !g.pointwise() && g.n > 0 &&
         g.c > 1 && g.o > 0 && onednn_chosen();
}

// And the forward pass of f32 2-D depthwise convolutions of one output per
// channel (MobileNet's, EfficientNet's): oneDNN's kernel on 8- or 16-channel
// blocks, with the reorders, took a third of the time of conv_depthwise.cpp's
// phase planes on MobileNetV2's 14x14 and 7x7 layers.
bool depthwise_taken(const ConvGeometry& g, int rank, DType dtype) {
  return dtype == DType::f32 && rank == 2 && g.depthwise() && g.o == g.c && g.c > 1 && g.n > 0 &&
         onednn_chosen();
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

// Runs of samples a convolution is cut into at least, when it has them.
constexpr int64_t kMinRuns = 4;

// Channels of one item: two parts when they split into whole blocks of 16,
// so that a single sample still keeps two threads busy. Not when the
// samples alone make kMinRuns items: each part reorders the whole input of
// its samples, so two parts did that work twice (a third of the reorders'
// time on ResNet-18 at batch 8). A choice made on the shapes alone: the
// bits may not depend on the thread count.
int64_t channel_parts(int64_t channels, int64_t runs) {
  return runs < kMinRuns && channels >= 64 && channels % 32 == 0 ? 2 : 1;
}

// Channels of a depthwise item: two parts of whole 8-channel blocks (the
// AVX2 kernels' block; AVX-512's 16 pad a part's last block) when there are
// enough, for a single sample to keep two threads busy (MobileNetV2's 144
// channels ran on one thread with parts of whole 16-channel blocks).
int64_t depthwise_parts(int64_t channels) {
  return channels >= 32 && channels % 16 == 0 ? 2 : 1;
}

// Output positions an item aims at: a call on a small plane (a sample of
// a 14x14 layer is a few microseconds of work) takes several samples, so
// that the per-call cost of the kernel and its reorders is paid rarely.
constexpr int64_t kItemPositions = 2048;
// Runs of a weight gradient, each with its own partial sum, at most.
constexpr int64_t kWeightRuns = 8;

// The batch cut into `count` runs of consecutive samples: run r is samples
// [first(r), first(r + 1)), all of the same size but for the last ones,
// which are one shorter (at most two sizes, so two primitives).
struct SampleRuns {
  int64_t samples = 0, count = 1;
  int64_t first(int64_t run) const { return run * samples / count; }
  int64_t size(int64_t run) const { return first(run + 1) - first(run); }
};

SampleRuns item_runs(const ConvGeometry& g) {
  const int64_t wanted = std::clamp<int64_t>(kItemPositions / std::max<int64_t>(1, g.out_plane()),
                                             1, std::max<int64_t>(1, ceil_div(g.n, kMinRuns)));
  return {g.n, ceil_div(g.n, wanted)};
}

SampleRuns weight_runs(const ConvGeometry& g) {
  return {g.n, std::min(item_runs(g).count, kWeightRuns)};
}

enum class Pass { forward, input_gradient, weight_gradient };

// The three tensors of a convolution, each in the plain layout of our
// arrays (a view of a run of samples and a part of the channels) and in the
// layout the kernel wants, with the reorder between them when they differ:
// into the kernel's layout for what the pass reads, out of it for what it
// writes.
struct Operand {
  memory::desc plain, kernel;
  dnnl::reorder reorder;  // null when the layouts agree
  // A forward pass's input padded by us (explicitly_padded): the part of
  // `kernel` the reorder writes; the rest of it is zeros.
  memory::desc interior;
};

struct Primitive {
  Pass pass;
  dnnl::primitive op;
  Operand src, weights, dst;
  memory::desc plain_bias, scratchpad;
};

memory::desc any_layout(const memory::desc& plain) {
  return memory::desc(plain.dims(), kF32, Tag::any);
}

void add_reorder(Operand& operand, bool into_kernel) {
  if (operand.kernel == operand.plain) return;
  const auto& engine = cpu_engine();
  const memory::desc& target = operand.interior ? operand.interior : operand.kernel;
  operand.reorder =
      into_kernel
          ? dnnl::reorder(dnnl::reorder::primitive_desc(engine, operand.plain, engine, target))
          : dnnl::reorder(
                dnnl::reorder::primitive_desc(engine, operand.kernel, engine, operand.plain));
}

// oneDNN's direct kernels, or a fallback: an im2col product of its own
// ("gemm:jit") or reference loops.
bool direct_kernel(const char* implementation) {
  const std::string_view name(implementation);
  return name.find("gemm") == std::string_view::npos && !name.starts_with("ref");
}

// A forward pass whose input we pad ourselves, when oneDNN's direct kernel
// refuses the padding: on AVX2 it takes no more than a few columns of it,
// so DeepLabV3's dilated layers (padding 4 to 36) fell to oneDNN's im2col
// product, at a third of the direct kernel's rate. The padded input is the
// extent the windows read, its inside the rows and columns of x they reach;
// the kernel then runs without padding. Only while the padded input is at
// most twice the input's area: the kernel multiplies the zeros too. On
// DeepLabV3's 32x32 maps, padding 4 (1.6x the area) ran 1.5x faster than
// the fallback, padding 12 (3.1x) as fast, padding 24 and 36 (6x, 10x)
// 2.5x and 3.6x slower. Zeroing the whole padded input before the reorder
// fills its inside costs under 1% of such an item. Null when not taken.
std::shared_ptr<Primitive> explicitly_padded(const ConvGeometry& g,
                                             const Primitive& padded_by_onednn, bool has_bias,
                                             const memory::dims& strides,
                                             const memory::dims& dilation,
                                             const dnnl::primitive_attr& attributes) {
  const auto& engine = cpu_engine();
  memory::dims extent(2), inside(2);
  for (int d = 1; d < 3; d++) {
    extent[d - 1] = (g.out[d] - 1) * g.stride[d] + (g.kernel[d] - 1) * g.dilation[d] + 1;
    inside[d - 1] = std::min(g.in[d], extent[d - 1] - g.pad_before[d]);
    if (inside[d - 1] <= 0) return nullptr;
  }
  if (extent[0] * extent[1] > 2 * g.in[1] * g.in[2]) return nullptr;
  auto p = std::make_shared<Primitive>(padded_by_onednn);
  const memory::dims plain_dims = p->src.plain.dims();
  const memory::dims padded_dims{plain_dims[0], plain_dims[1], extent[0], extent[1]};
  const memory::dims zero{0, 0};
  const dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          memory::desc(padded_dims, kF32, Tag::any), any_layout(p->weights.plain),
          has_bias ? p->plain_bias : memory::desc(), any_layout(p->dst.plain), strides, dilation,
          zero, zero),
      attributes, engine);
  if (!direct_kernel(pd.impl_info_str())) return nullptr;
  p->op = dnnl::convolution_forward(pd);
  p->src.kernel = pd.src_desc();
  p->weights.kernel = pd.weights_desc();
  p->dst.kernel = pd.dst_desc();
  p->scratchpad = pd.scratchpad_desc();
  const memory::dims inside_dims{plain_dims[0], plain_dims[1], inside[0], inside[1]};
  p->src.plain = p->src.plain.submemory_desc(inside_dims, {0, 0, 0, 0});
  p->src.interior =
      p->src.kernel.submemory_desc(inside_dims, {0, 0, g.pad_before[1], g.pad_before[2]});
  p->src.reorder = p->weights.reorder = p->dst.reorder = {};
  add_reorder(p->src, true);
  add_reorder(p->weights, true);
  add_reorder(p->dst, false);
  return p;
}

// The primitive of `pass` over `samples` samples, `outputs` output channels
// (starting anywhere in y's O) and `channels` input channels (anywhere in
// x's C).
std::shared_ptr<const Primitive> make_primitive(const ConvGeometry& g, Pass pass, int64_t samples,
                                                int64_t outputs, int64_t channels, bool has_bias) {
  const auto& engine = cpu_engine();
  const int64_t ih = g.in[1], iw = g.in[2], oh = g.out[1], ow = g.out[2];
  const int64_t kh = g.kernel[1], kw = g.kernel[2];
  auto p = std::make_shared<Primitive>();
  p->pass = pass;
  p->src.plain =
      memory::desc({samples, channels, ih, iw}, kF32, memory::dims{g.c * ih * iw, ih * iw, iw, 1});
  // A depthwise convolution's weights: `outputs` groups of one output and
  // one channel each.
  p->weights.plain = g.groups == 1 ? memory::desc({outputs, channels, kh, kw}, kF32,
                                                  memory::dims{g.c * kh * kw, kh * kw, kw, 1})
                                   : memory::desc({outputs, 1, 1, kh, kw}, kF32,
                                                  memory::dims{kh * kw, kh * kw, kh * kw, kw, 1});
  p->dst.plain =
      memory::desc({samples, outputs, oh, ow}, kF32, memory::dims{g.o * oh * ow, oh * ow, ow, 1});
  p->plain_bias = memory::desc({outputs}, kF32, Tag::x);
  const memory::dims strides{g.stride[1], g.stride[2]};
  const memory::dims dilation{g.dilation[1] - 1, g.dilation[2] - 1};
  const memory::dims pad_l{g.pad_before[1], g.pad_before[2]};
  // The padding after that gives exactly y's extents.
  memory::dims pad_r(2);
  for (int d = 1; d < 3; d++) {
    pad_r[d - 1] = (g.out[d] - 1) * g.stride[d] + (g.kernel[d] - 1) * g.dilation[d] + 1 - g.in[d] -
                   g.pad_before[d];
  }
  const bool forward_bias = has_bias && pass == Pass::forward;
  const auto forward = dnnl::convolution_forward::desc(
      pass == Pass::forward ? dnnl::prop_kind::forward_inference
                            : dnnl::prop_kind::forward_training,
      dnnl::algorithm::convolution_direct, any_layout(p->src.plain), any_layout(p->weights.plain),
      forward_bias ? p->plain_bias : memory::desc(), any_layout(p->dst.plain), strides, dilation,
      pad_l, pad_r);
  dnnl::primitive_attr attributes;
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::convolution_forward::primitive_desc forward_pd(forward, attributes, engine);
  const auto take = [&](dnnl::primitive op, const memory::desc& src, const memory::desc& weights,
                        const memory::desc& dst, const memory::desc& scratchpad) {
    p->op = std::move(op);
    p->src.kernel = src;
    p->weights.kernel = weights;
    p->dst.kernel = dst;
    p->scratchpad = scratchpad;
  };
  if (pass == Pass::forward) {
    if (!direct_kernel(forward_pd.impl_info_str())) {
      if (auto padded = explicitly_padded(g, *p, has_bias, strides, dilation, attributes)) {
        return padded;
      }
    }
    take(dnnl::convolution_forward(forward_pd), forward_pd.src_desc(), forward_pd.weights_desc(),
         forward_pd.dst_desc(), forward_pd.scratchpad_desc());
  } else if (pass == Pass::input_gradient) {
    const dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(
            dnnl::algorithm::convolution_direct, any_layout(p->src.plain),
            any_layout(p->weights.plain), any_layout(p->dst.plain), strides, dilation, pad_l,
            pad_r),
        attributes, engine, forward_pd);
    take(dnnl::convolution_backward_data(pd), pd.diff_src_desc(), pd.weights_desc(),
         pd.diff_dst_desc(), pd.scratchpad_desc());
  } else {
    const dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(
            dnnl::algorithm::convolution_direct, any_layout(p->src.plain),
            any_layout(p->weights.plain), any_layout(p->dst.plain), strides, dilation, pad_l,
            pad_r),
        attributes, engine, forward_pd);
    take(dnnl::convolution_backward_weights(pd), pd.src_desc(), pd.diff_weights_desc(),
         pd.diff_dst_desc(), pd.scratchpad_desc());
  }
  // What the pass reads goes into the kernel's layout, what it writes out.
  add_reorder(p->src, pass != Pass::input_gradient);
  add_reorder(p->weights, pass != Pass::weight_gradient);
  add_reorder(p->dst, pass != Pass::forward);
  return p;
}

// Primitives by pass and shape: made once per layer shape (oneDNN generates
// their code), kept for the process. Null: oneDNN has no kernel for it.
std::shared_ptr<const Primitive> find_primitive(const ConvGeometry& g, Pass pass, int64_t samples,
                                                int64_t outputs, int64_t channels, bool has_bias) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::shared_ptr<const Primitive>> primitives;
  std::vector<int64_t> key{static_cast<int64_t>(pass),
                           samples,
                           g.groups,
                           g.c,
                           g.o,
                           outputs,
                           channels,
                           g.in[1],
                           g.in[2],
                           g.out[1],
                           g.out[2],
                           g.kernel[1],
                           g.kernel[2],
                           g.stride[1],
                           g.stride[2],
                           g.dilation[1],
                           g.dilation[2],
                           g.pad_before[1],
                           g.pad_before[2],
                           has_bias};
  const std::lock_guard lock(mutex);
  auto found = primitives.find(key);
  if (found != primitives.end()) return found->second;
  std::shared_ptr<const Primitive> made;
  try {
    made = make_primitive(g, pass, samples, outputs, channels, has_bias);
  } catch (const dnnl::error&) {
    made = nullptr;  // the column kernels take it
  }
  primitives.emplace(std::move(key), made);
  return made;
}

// The primitives of a pass for every run size of `runs` (at most two), by
// size; empty when oneDNN has no kernel for one of them.
std::map<int64_t, std::shared_ptr<const Primitive>> find_primitives(
    const ConvGeometry& g, Pass pass, const SampleRuns& runs, int64_t outputs, int64_t channels,
    bool has_bias) {
  std::map<int64_t, std::shared_ptr<const Primitive>> by_size;
  for (int64_t run = 0; run < runs.count; run++) {
    const int64_t size = runs.size(run);
    if (by_size.contains(size)) continue;
    auto primitive = find_primitive(g, pass, size, outputs, channels, has_bias);
    if (!primitive) return {};
    by_size.emplace(size, std::move(primitive));
  }
  return by_size;
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
  // The part of `weight` that starts `offset` elements in, packed as
  // `operand` wants; null when not kept (the caller packs).
  std::shared_ptr<memory> find(const Array& weight, int64_t offset, const Operand& operand,
                               dnnl::stream& stream) {
    const Buffer& buffer = *weight.buffer;
    if (buffer.lent()) return nullptr;
    const Key key{buffer.id, weight.offset, offset, operand.kernel};
    const std::lock_guard lock(mutex_);
    forget_dead_entries();
    for (auto& entry : entries_) {
      if (entry.key == key) {
        if (entry.version != buffer.version) {
          entry.packed = pack(weight, offset, operand, stream);
          entry.version = buffer.version;
        }
        return entry.packed;
      }
    }
    const Seen seen{buffer.id, weight.offset, offset, operand.kernel, buffer.version};
    if (std::find(seen_.begin(), seen_.end(), seen) == seen_.end()) {
      if (seen_.size() == kMaxSeen) seen_.erase(seen_.begin());
      seen_.push_back(seen);
      return nullptr;
    }
    Entry entry{key, weight.buffer, buffer.version, pack(weight, offset, operand, stream)};
    entry.buffer->cache_references++;
    bytes_ += operand.kernel.get_size();
    entries_.push_back(std::move(entry));
    return entries_.back().packed;
  }

  static std::shared_ptr<memory> pack(const Array& weight, int64_t offset, const Operand& operand,
                                      dnnl::stream& stream) {
    memory plain(operand.plain, cpu_engine(), const_cast<float*>(weight.data<float>()) + offset);
    auto packed = std::make_shared<memory>(operand.kernel, cpu_engine());
    operand.reorder.execute(stream, plain, *packed);
    stream.wait();
    return packed;
  }

 private:
  struct Key {
    uint64_t buffer;
    int64_t offset, part_offset;
    memory::desc layout;
    bool operator==(const Key&) const = default;
  };
  // By layout too: a training step's forward pass and input gradient ask
  // for the same weights in two layouts, which is not a second sight.
  struct Seen {
    uint64_t buffer;
    int64_t offset, part_offset;
    memory::desc layout;
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

// The packed weights of each part (`parts` views of `weight`, the p-th
// starting `part_offset * p` elements in) for each primitive, by run size,
// on the calling thread: cached, or packed now into memory this call owns;
// null where the kernel reads the plain weights. Primitives of two run
// sizes that want the same layout share one packing.
using PackedWeights = std::map<int64_t, std::vector<std::shared_ptr<memory>>>;

PackedWeights packed_weights(const Array& weight, int64_t parts, int64_t part_offset,
                             const std::map<int64_t, std::shared_ptr<const Primitive>>& by_size) {
  PackedWeights packed;
  const std::vector<std::shared_ptr<memory>>* previous = nullptr;
  const Primitive* previous_primitive = nullptr;
  dnnl::stream& stream = thread_stream();
  for (const auto& [size, primitive] : by_size) {
    auto& parts_packed = packed[size];
    if (previous && previous_primitive->weights.kernel == primitive->weights.kernel) {
      parts_packed = *previous;
      continue;
    }
    parts_packed.resize(parts);
    if (primitive->weights.reorder) {
      for (int64_t part = 0; part < parts; part++) {
        const int64_t offset = part * part_offset;
        auto& slot = parts_packed[part];
        slot = weight_cache().find(weight, offset, primitive->weights, stream);
        if (!slot) slot = WeightCache::pack(weight, offset, primitive->weights, stream);
      }
    }
    previous = &parts_packed;
    previous_primitive = primitive.get();
  }
  return packed;
}

// The calling thread's scratch memory for one item, handed out in 64-byte
// aligned pieces.
class ItemScratch {
 public:
  explicit ItemScratch(const Primitive& p) {
    const Operand* operands[] = {&p.src, &p.weights, &p.dst};
    size_t bytes = round_up(p.scratchpad.get_size()) + kAlign;
    for (const Operand* operand : operands) {
      if (operand->reorder) bytes += round_up(operand->kernel.get_size());
    }
    next_ = round_up(thread_scratch<char>(static_cast<int64_t>(bytes)));
  }
  char* take(size_t bytes) {
    char* at = next_;
    next_ += round_up(bytes);
    return at;
  }

 private:
  static constexpr size_t kAlign = 64;
  static size_t round_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
  static char* round_up(char* pointer) {
    return reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(pointer)));
  }
  char* next_;
};

// One operand of an item's call: our memory at `plain` (or `packed`, the
// weights already in the kernel's layout), in the kernel's layout.
struct Bound {
  memory plain, kernel;
};

Bound bind(const Operand& operand, float* plain, const std::shared_ptr<memory>& packed, bool read,
           ItemScratch& scratch, dnnl::stream& stream) {
  const auto& engine = cpu_engine();
  memory at(operand.plain, engine, plain);
  if (!operand.reorder) return {at, at};
  if (packed) return {at, *packed};
  char* const kernel_data = scratch.take(operand.kernel.get_size());
  memory kernel(operand.kernel, engine, kernel_data);
  if (operand.interior) {
    std::memset(kernel_data, 0, operand.kernel.get_size());  // the padding
    memory inside(operand.interior, engine, kernel_data);
    operand.reorder.execute(stream, at, inside);
  } else if (read) {
    operand.reorder.execute(stream, at, kernel);
  }
  return {at, kernel};
}

// Runs `item(index)` for [0, count) on the pool; an error of oneDNN's in
// any item is thrown after. Each thread takes the next item left, not a
// fixed range: items differ in cost (a shorter run of samples, a thread the
// OS has descheduled), and what an item computes does not depend on which
// thread runs it.
template <typename Item>
void run_items(int64_t count, Item&& item) {
  std::atomic<bool> failed{false};
  std::atomic<int64_t> next{0};
  parallel_for(std::min<int64_t>(count, thread_count()), 1, [&](int64_t, int64_t) {
    for (int64_t index; (index = next.fetch_add(1)) < count;) {
      try {
        item(index);
      } catch (const dnnl::error&) {
        failed = true;
      }
    }
  });
  if (failed) throw InternalError("oneDNN failed to run a convolution it had accepted");
}

// Executes an item's primitive on its bound operands, then writes what the
// pass wrote (dst, the input gradient or the weight gradient) out in our
// layout.
void execute(const Primitive& p, const Bound& src, const Bound& weights, const Bound& dst,
             const memory* bias, ItemScratch& scratch, dnnl::stream& stream) {
  memory scratchpad(p.scratchpad, cpu_engine(), scratch.take(p.scratchpad.get_size()));
  std::unordered_map<int, memory> arguments{{DNNL_ARG_SCRATCHPAD, scratchpad}};
  if (p.pass == Pass::forward) {
    arguments.insert({{DNNL_ARG_SRC, src.kernel},
                      {DNNL_ARG_WEIGHTS, weights.kernel},
                      {DNNL_ARG_DST, dst.kernel}});
    if (bias) arguments.emplace(DNNL_ARG_BIAS, *bias);
  } else if (p.pass == Pass::input_gradient) {
    arguments.insert({{DNNL_ARG_DIFF_SRC, src.kernel},
                      {DNNL_ARG_WEIGHTS, weights.kernel},
                      {DNNL_ARG_DIFF_DST, dst.kernel}});
  } else {
    arguments.insert({{DNNL_ARG_SRC, src.kernel},
                      {DNNL_ARG_DIFF_WEIGHTS, weights.kernel},
                      {DNNL_ARG_DIFF_DST, dst.kernel}});
  }
  p.op.execute(stream, arguments);
  const auto [written_operand, written] = p.pass == Pass::forward ? std::pair{&p.dst, &dst}
                                          : p.pass == Pass::input_gradient
                                              ? std::pair{&p.src, &src}
                                              : std::pair{&p.weights, &weights};
  if (written_operand->reorder) {
    memory from = written->kernel, to = written->plain;
    written_operand->reorder.execute(stream, from, to);
  }
  stream.wait();
}

}  // namespace

bool onednn_forward(const ConvGeometry& g, int rank, const Array& x, const Array& weight,
                    const Array& bias, const Array& y, const ConvEpilogue& epilogue) {
  const bool depthwise = depthwise_taken(g, rank, y.dtype);
  if (!depthwise && !taken(g, rank, y.dtype)) return false;
  (void)thread_stream();  // before any oneDNN call on this thread
  const SampleRuns runs = item_runs(g);
  // A depthwise part reads its own input channels, the others all of them.
  const int64_t parts = depthwise ? depthwise_parts(g.o) : channel_parts(g.o, runs.count);
  const int64_t outputs = g.o / parts, channels = depthwise ? outputs : g.c;
  const auto primitives =
      find_primitives(g, Pass::forward, runs, outputs, channels, bias.defined());
  if (primitives.empty()) return false;
  const int64_t per_output = weight.numel() / g.o;
  const auto packed = packed_weights(weight, parts, outputs * per_output, primitives);
  const int64_t in_sample = g.c * g.in_plane(), out_sample = g.o * g.out_plane();
  float* x_data = const_cast<float*>(x.data<float>());
  float* w_data = const_cast<float*>(weight.data<float>());
  run_items(runs.count * parts, [&](int64_t item) {
    const int64_t run = item / parts, part = item % parts;
    const Primitive& p = *primitives.at(runs.size(run));
    auto& stream = thread_stream();
    ItemScratch scratch(p);
    const int64_t first = runs.first(run);
    const int64_t c0 = depthwise ? part * channels : 0;
    const Bound src =
        bind(p.src, x_data + first * in_sample + c0 * g.in_plane(), nullptr, true, scratch, stream);
    const Bound weights = bind(p.weights, w_data + part * outputs * per_output,
                               packed.at(runs.size(run))[part], true, scratch, stream);
    float* const written = y.data<float>() + first * out_sample + part * outputs * g.out_plane();
    const Bound dst = bind(p.dst, written, nullptr, false, scratch, stream);
    std::unique_ptr<memory> bias_memory;
    if (bias.defined()) {
      bias_memory = std::make_unique<memory>(
          p.plain_bias, cpu_engine(), const_cast<float*>(bias.data<float>()) + part * outputs);
    }
    execute(p, src, weights, dst, bias_memory.get(), scratch, stream);
    // Each sample's channels of this part, while they are in cache: our own
    // pass, which computes what the elementwise ops do, where a oneDNN
    // post-op would round and order by its own rules.
    for (int64_t s = 0; s < runs.size(run); s++) {
      epilogue.apply(written + s * out_sample, outputs * g.out_plane());
    }
  });
  return true;
}

bool onednn_grad_input(const ConvGeometry& g, int rank, const Array& grad_y, const Array& weight,
                       const Array& bias, const Array& grad_x) {
  if (!taken(g, rank, grad_x.dtype)) return false;
  (void)thread_stream();
  const SampleRuns runs = item_runs(g);
  const int64_t parts = channel_parts(g.c, runs.count), channels = g.c / parts;
  const auto primitives = find_primitives(g, Pass::input_gradient, runs, g.o, channels, false);
  if (primitives.empty()) return false;
  const int64_t taps = g.taps();
  const auto packed = packed_weights(weight, parts, channels * taps, primitives);
  const int64_t in_sample = g.c * g.in_plane(), out_sample = g.o * g.out_plane();
  float* gy_data = const_cast<float*>(grad_y.data<float>());
  float* w_data = const_cast<float*>(weight.data<float>());
  float* gx_data = grad_x.data<float>();
  run_items(runs.count * parts, [&](int64_t item) {
    const int64_t run = item / parts, part = item % parts;
    const Primitive& p = *primitives.at(runs.size(run));
    auto& stream = thread_stream();
    ItemScratch scratch(p);
    const int64_t first = runs.first(run), c0 = part * channels;
    const Bound dst = bind(p.dst, gy_data + first * out_sample, nullptr, true, scratch, stream);
    const Bound weights =
        bind(p.weights, w_data + c0 * taps, packed.at(runs.size(run))[part], true, scratch, stream);
    float* target = gx_data + first * in_sample + c0 * g.in_plane();
    const Bound src = bind(p.src, target, nullptr, false, scratch, stream);
    execute(p, src, weights, dst, nullptr, scratch, stream);
    // A transposed convolution's bias, added to what this item wrote.
    if (!bias.defined()) return;
    for (int64_t s = 0; s < runs.size(run); s++) {
      for (int64_t c = 0; c < channels; c++) {
        float* at = target + s * in_sample + c * g.in_plane();
        const float add = bias.data<float>()[c0 + c];
        for (int64_t e = 0; e < g.in_plane(); e++) at[e] += add;
      }
    }
  });
  return true;
}

bool onednn_grad_weight(const ConvGeometry& g, int rank, const Array& grad_y, const Array& x,
                        const Array& grad_weight) {
  if (!taken(g, rank, grad_weight.dtype)) return false;
  (void)thread_stream();
  const SampleRuns runs = weight_runs(g);
  const int64_t parts = channel_parts(g.o, runs.count), outputs = g.o / parts;
  const auto primitives = find_primitives(g, Pass::weight_gradient, runs, outputs, g.c, false);
  if (primitives.empty()) return false;
  const int64_t size = grad_weight.numel(), per_output = size / g.o;
  const int64_t in_sample = g.c * g.in_plane(), out_sample = g.o * g.out_plane();
  // Run 0's sum goes straight into grad_weight, the others' into partial
  // sums, added after in run order.
  float* out = grad_weight.data<float>();
  float* partial = thread_scratch<float, kPartialSums>((runs.count - 1) * size);
  float* x_data = const_cast<float*>(x.data<float>());
  float* gy_data = const_cast<float*>(grad_y.data<float>());
  run_items(runs.count * parts, [&](int64_t item) {
    const int64_t run = item / parts, part = item % parts;
    const Primitive& p = *primitives.at(runs.size(run));
    auto& stream = thread_stream();
    ItemScratch scratch(p);
    const int64_t first = runs.first(run);
    const Bound src = bind(p.src, x_data + first * in_sample, nullptr, true, scratch, stream);
    const Bound dst = bind(p.dst, gy_data + first * out_sample + part * outputs * g.out_plane(),
                           nullptr, true, scratch, stream);
    float* sum = (run == 0 ? out : partial + (run - 1) * size) + part * outputs * per_output;
    const Bound weights = bind(p.weights, sum, nullptr, false, scratch, stream);
    execute(p, src, weights, dst, nullptr, scratch, stream);
  });
  parallel_for(size, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t run = 1; run < runs.count; run++) {
      const float* __restrict add = partial + (run - 1) * size;
      float* __restrict target = out;
      for (int64_t e = begin; e < end; e++) target[e] += add[e];
    }
  });
  return true;
}

}  // namespace lazylua::conv_detail

namespace lazylua {
namespace {

// dnnl::cpu_isa's names, which are also ONEDNN_MAX_CPU_ISA's values in lower
// case. A value not listed here (a newer oneDNN's) shows as hex rather
// than being guessed.
std::string isa_name(dnnl::cpu_isa isa) {
  using Isa = dnnl::cpu_isa;
  switch (isa) {
    case Isa::all:
      return "reference";  // no JIT ISA: not x86, or no SSE4.1
    case Isa::sse41:
      return "sse41";
    case Isa::avx:
      return "avx";
    case Isa::avx2:
      return "avx2";
    case Isa::avx2_vnni:
      return "avx2_vnni";
    case Isa::avx512_mic:
      return "avx512_mic";
    case Isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case Isa::avx512_core:
      return "avx512_core";
    case Isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case Isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case Isa::avx512_core_amx:
      return "avx512_core_amx";
  }
  char text[32];
  std::snprintf(text, sizeof text, "isa_0x%x", static_cast<unsigned>(isa));
  return text;
}

}  // namespace

std::string onednn_summary() {
  // The loaded library's version, not the header's: the two can differ.
  const dnnl::version_t* version = dnnl::version();
  std::string summary = "oneDNN " + std::to_string(version->major) + "." +
                        std::to_string(version->minor) + "." + std::to_string(version->patch) +
                        ", " + isa_name(dnnl::get_effective_cpu_isa());
  if (!conv_detail::onednn_chosen()) summary += ", off (LAZYLUA_CONV=columns)";
  return summary;
}

}  // namespace lazylua
