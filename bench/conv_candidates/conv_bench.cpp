// conv_bench.cpp - the candidate convolution libraries for lazylua, measured
// on the convolution layers of resnet18 and mobilenet_v2 (layers.txt):
//
//   conv_bench table LAYERS BATCH THREADS BUDGET_MS LIB  one TSV row per layer
//                                                     (LIB: onednn or xnnpack)
//   conv_bench facts LAYERS                           determinism, accuracy, ISA
//   conv_bench idle  LAYERS THREADS                   cost of an idle pool that spins
//
// Built and run by run.sh (see README.md). Every time is the median of many
// steady runs of one call, each timed alone, as lazylua_layers.lua does.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "bench_util.h"

namespace conv_bench {
namespace {

// oneDNN's reorder between two plain layouts, as a timed step.
double reorder_ms(const dnnl::engine& engine, dnnl::stream& stream, const dnnl::memory::dims& dims,
                  dnnl::memory::format_tag from, dnnl::memory::format_tag to, double budget) {
  dnnl::memory a({dims, dnnl::memory::data_type::f32, from}, engine);
  dnnl::memory b({dims, dnnl::memory::data_type::f32, to}, engine);
  std::memset(a.get_data_handle(), 0, a.get_desc().get_size());
  dnnl::reorder step(a, b);
  return median_ms(
      [&] {
        step.execute(stream, a, b);
        stream.wait();
      },
      budget);
}

// One TSV row per layer: the times of every variant of one library (each
// library runs in a process of its own: an OpenMP pool that spins after
// oneDNN's calls would slow XNNPACK's threads down). A oneDNN variant that falls back to the
// reference implementation ("ref:", seconds per call) is not timed: its time is nan, its name says
// why.
int table(const char* path, int64_t batch, int threads, double budget, const std::string& library) {
  check(library == "onednn" || library == "xnnpack", "the library is onednn or xnnpack");
  const bool onednn = library == "onednn";
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  pthreadpool_t pool = onednn ? nullptr : pthreadpool_create(size_t(threads));
  check(onednn || xnn_initialize(nullptr) == xnn_status_success, "xnn_initialize failed");
  std::map<std::string, std::string> done;  // identical layers are measured once
  std::printf("model\tindex\tkind\tflops\t%s\n",
              onednn ? "nchw\tnchw_relu\tnchw_sum_relu\tnchw_bn_sum_relu\tany\tany_in\tany_out\t"
                       "any_relu\tany_sum_relu\tany_bn_sum_relu\tb16c\tb16c_in\tb16c_out\t"
                       "b16c_relu\tb16c_sum_relu\tb16c_bn_sum_relu\tnhwc_in\tnhwc_out\t"
                       "nchw_impl\tnchw_bn_impl\tany_impl\tb16c_impl\tb16c_bn_impl"
                     : "xnn\txnn_relu");
  for (Layer l : read_layers(path)) {
    l.n = batch;
    auto found = done.find(l.key());
    if (found == done.end()) {
      Inputs in(l);
      std::string row;
      auto add = [&](double ms) { row += (row.empty() ? "" : "\t") + std::to_string(ms); };
      auto conv_only = [&](Layout layout, Epilogue e, std::string* impl) {
        DnnlConv conv(engine, l, layout, e, in.x.data(), in.weight.data(), in.bias.data());
        const std::string name = conv.impl();
        if (impl) *impl = name;
        add(name.rfind("ref", 0) == 0 ? NAN : median_ms([&] { conv.run(stream); }, budget));
      };
      auto with_reorders = [&](Layout layout, std::string* impl) {
        DnnlConv conv(engine, l, layout, Epilogue::none, in.x.data(), in.weight.data(),
                      in.bias.data());
        *impl = conv.impl();
        add(impl->rfind("ref", 0) == 0 ? NAN : median_ms([&] { conv.run(stream); }, budget));
        add(median_ms([&] { conv.reorder_in(stream); }, budget));
        add(median_ms([&] { conv.reorder_out(stream); }, budget));
      };
      if (onednn) {
        std::string nchw_impl, nchw_bn_impl, any_impl, b16c_impl, b16c_bn_impl;
        conv_only(Layout::nchw, Epilogue::none, &nchw_impl);
        conv_only(Layout::nchw, Epilogue::relu, nullptr);
        conv_only(Layout::nchw, Epilogue::sum_relu, nullptr);
        conv_only(Layout::nchw, Epilogue::bn_sum_relu, &nchw_bn_impl);
        with_reorders(Layout::any, &any_impl);
        conv_only(Layout::any, Epilogue::relu, nullptr);
        conv_only(Layout::any, Epilogue::sum_relu, nullptr);
        conv_only(Layout::any, Epilogue::bn_sum_relu, nullptr);
        with_reorders(Layout::nchw16c, &b16c_impl);
        conv_only(Layout::nchw16c, Epilogue::relu, nullptr);
        conv_only(Layout::nchw16c, Epilogue::sum_relu, nullptr);
        conv_only(Layout::nchw16c, Epilogue::bn_sum_relu, &b16c_bn_impl);
        // The layout changes an NHWC library (XNNPACK) costs lazylua.
        using tag = dnnl::memory::format_tag;
        add(reorder_ms(engine, stream, {l.n, l.c, l.h, l.w}, tag::nchw, tag::nhwc, budget));
        add(reorder_ms(engine, stream, {l.n, l.o, l.out_h(), l.out_w()}, tag::nhwc, tag::nchw,
                       budget));
        row += "\t" + nchw_impl + "\t" + nchw_bn_impl + "\t" + any_impl + "\t" + b16c_impl + "\t" +
               b16c_bn_impl;
      } else {
        for (const bool relu : {false, true}) {
          XnnConv conv(l, in.x_nhwc.data(), in.weight.data(), in.bias.data(), pool, relu);
          add(median_ms([&] { conv.run(pool); }, budget));
        }
      }
      found = done.emplace(l.key(), row).first;
    }
    std::printf("%s\t%d\t%s\t%.0f\t%s\n", l.model.c_str(), l.index, l.kind().c_str(), l.flops(),
                found->second.c_str());
    std::fflush(stdout);
  }
  if (pool) pthreadpool_destroy(pool);
  return 0;
}

}  // namespace

int facts(const char* path);
int idle(const char* path, int threads);

}  // namespace conv_bench

int main(int argc, char** argv) {
  using namespace conv_bench;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "table" && argc == 7)
    return table(argv[2], std::atol(argv[3]), std::atoi(argv[4]), std::atof(argv[5]), argv[6]);
  if (mode == "facts" && argc == 3) return facts(argv[2]);
  if (mode == "idle" && argc == 4) return idle(argv[2], std::atoi(argv[3]));
  std::fprintf(stderr,
               "usage: conv_bench table LAYERS BATCH THREADS BUDGET_MS onednn|xnnpack\n"
               "       conv_bench facts LAYERS\n"
               "       conv_bench idle LAYERS THREADS\n");
  return 2;
}
