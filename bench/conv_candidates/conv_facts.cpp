// conv_facts.cpp - what conv_bench establishes besides speed:
//   facts: the libraries' versions, runtime and ISA; whether their results
//          are bit-identical between 1 and 2 threads and between runs
//          (forward for oneDNN and XNNPACK, backward data and weights for
//          oneDNN); their largest difference from a double-precision
//          reference.
//   idle:  what a library's idle thread pool costs the work that follows it
//          (lazylua's pattern: a convolution, then ~1 ms of other 2-thread
//          work on lazylua's own sleeping pool, repeated).
#include <omp.h>

#include <time.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "bench_util.h"

namespace conv_bench {
namespace {

struct Gradients {
  std::vector<float> dx, dw, db;
};

// oneDNN's backward data and backward weights (with bias), data in NCHW as
// lazylua holds it, weights reordered from and to [O, C/groups, kh, kw].
Gradients dnnl_backward(const dnnl::engine& engine, const Layer& l, const float* x,
                        const float* weight, const float* dy) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::stream stream(engine);
  const dnnl::memory::dims src_dims{l.n, l.c, l.h, l.w}, dst_dims{l.n, l.o, l.out_h(), l.out_w()};
  const dnnl::memory::dims wei_dims = dnnl_weight_dims(l);
  const dnnl::memory::desc src_md(src_dims, dt::f32, tag::nchw),
      dst_md(dst_dims, dt::f32, tag::nchw),
      user_wei(wei_dims, dt::f32, l.groups == 1 ? tag::oihw : tag::goihw),
      wei_any(wei_dims, dt::f32, tag::any), bias_md({l.o}, dt::f32, tag::x);
  const dnnl::memory::dims strides{l.stride, l.stride}, dilates{l.dilation - 1, l.dilation - 1},
      pads{l.pad, l.pad};
  const auto algo = dnnl::algorithm::convolution_auto;
  dnnl::convolution_forward::primitive_desc hint(
      {dnnl::prop_kind::forward_training, algo, src_md, wei_any, bias_md, dst_md, strides, dilates,
       pads, pads},
      engine);
  dnnl::convolution_backward_data::primitive_desc data_pd(
      {algo, src_md, wei_any, dst_md, strides, dilates, pads, pads}, engine, hint);
  dnnl::convolution_backward_weights::primitive_desc weights_pd(
      {algo, src_md, wei_any, bias_md, dst_md, strides, dilates, pads, pads}, engine, hint);

  Gradients grads{std::vector<float>(size_t(l.src_size())),
                  std::vector<float>(size_t(l.weight_size())), std::vector<float>(size_t(l.o))};
  dnnl::memory x_mem(src_md, engine, const_cast<float*>(x)),
      dy_mem(dst_md, engine, const_cast<float*>(dy)), dx_mem(src_md, engine, grads.dx.data()),
      user_w(user_wei, engine, const_cast<float*>(weight)),
      user_dw(user_wei, engine, grads.dw.data()), db_mem(bias_md, engine, grads.db.data());
  dnnl::memory w_mem(data_pd.weights_desc(), engine),
      dw_mem(weights_pd.diff_weights_desc(), engine);
  dnnl::reorder(user_w, w_mem).execute(stream, user_w, w_mem);
  dnnl::convolution_backward_data(data_pd).execute(
      stream,
      {{DNNL_ARG_DIFF_DST, dy_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DIFF_SRC, dx_mem}});
  dnnl::convolution_backward_weights(weights_pd)
      .execute(stream, {{DNNL_ARG_SRC, x_mem},
                        {DNNL_ARG_DIFF_DST, dy_mem},
                        {DNNL_ARG_DIFF_WEIGHTS, dw_mem},
                        {DNNL_ARG_DIFF_BIAS, db_mem}});
  dnnl::reorder(dw_mem, user_dw).execute(stream, dw_mem, user_dw);
  stream.wait();
  return grads;
}

// The forward output and the three gradients in double, by the definition.
struct Reference {
  std::vector<double> y, dx, dw, db;
};
Reference reference(const Layer& l, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& dy) {
  Reference r{std::vector<double>(size_t(l.dst_size())), std::vector<double>(size_t(l.src_size())),
              std::vector<double>(size_t(l.weight_size())), std::vector<double>(size_t(l.o))};
  const int64_t cg = l.c / l.groups, og = l.o / l.groups, oh = l.out_h(), ow = l.out_w();
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t o = 0; o < l.o; ++o) {
      const int64_t g = o / og;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const size_t yi = size_t(((n * l.o + o) * oh + oy) * ow + ox);
          double sum = b[size_t(o)];
          const double grad = dy[yi];
          r.db[size_t(o)] += grad;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < l.kh; ++ky) {
              const int64_t iy = oy * l.stride - l.pad + ky * l.dilation;
              if (iy < 0 || iy >= l.h) continue;
              for (int64_t kx = 0; kx < l.kw; ++kx) {
                const int64_t ix = ox * l.stride - l.pad + kx * l.dilation;
                if (ix < 0 || ix >= l.w) continue;
                const size_t xi = size_t(((n * l.c + g * cg + ic) * l.h + iy) * l.w + ix);
                const size_t wi = size_t(((o * cg + ic) * l.kh + ky) * l.kw + kx);
                sum += double(x[xi]) * double(w[wi]);
                r.dx[xi] += grad * double(w[wi]);
                r.dw[wi] += grad * double(x[xi]);
              }
            }
          r.y[yi] = sum;
        }
    }
  return r;
}

// The largest |a - ref| over the largest |ref|.
double relative_error(const float* a, const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// Bit-identity of one result across thread counts and runs, over all layers.
struct Tally {
  int layers = 0, same_threads = 0, same_runs = 0;
  double worst_thread_diff = 0, worst_error = 0;
  std::set<std::string> differing;  // the kinds of layer whose bits depend on the threads
  void add(const Layer& l, const std::vector<float>& one, const std::vector<float>& two,
           const std::vector<float>& two_again) {
    ++layers;
    const size_t bytes = one.size() * sizeof(float);
    if (std::memcmp(one.data(), two.data(), bytes) == 0)
      ++same_threads;
    else
      differing.insert(l.kind() + (l.stride > 1 ? " s" + std::to_string(l.stride) : "") + " C" +
                       std::to_string(l.c) + "@" + std::to_string(l.h));
    if (std::memcmp(two.data(), two_again.data(), bytes) == 0) ++same_runs;
    double diff = 0, scale = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      diff = std::max(diff, double(std::abs(one[i] - two[i])));
      scale = std::max(scale, double(std::abs(two[i])));
    }
    worst_thread_diff = std::max(worst_thread_diff, scale > 0 ? diff / scale : diff);
  }
  void print(const char* what, int batch) const {
    std::printf(
        "%-27s b%d  1 vs 2 threads bit-identical in %2d/%2d layers (worst %.1e)  "
        "2 runs bit-identical in %2d/%2d",
        what, batch, same_threads, layers, worst_thread_diff, same_runs, layers);
    if (worst_error > 0) std::printf("  max err vs double %.1e", worst_error);
    std::printf("\n");
    if (!differing.empty()) {
      std::printf("%34s differ:", "");
      for (const auto& kind : differing) std::printf(" %s;", kind.c_str());
      std::printf("\n");
    }
  }
};

uint64_t digest(uint64_t hash, const std::vector<float>& values) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i)
    hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    default:
      return "other";
  }
}

}  // namespace

int facts(const char* path) {
  const dnnl_version_t* version = dnnl_version();
  std::printf("oneDNN %d.%d.%d, CPU runtime %s, effective ISA %s, max threads %d\n", version->major,
              version->minor, version->patch,
              version->cpu_runtime == DNNL_RUNTIME_OMP          ? "OpenMP"
              : version->cpu_runtime == DNNL_RUNTIME_TBB        ? "TBB"
              : version->cpu_runtime == DNNL_RUNTIME_THREADPOOL ? "threadpool"
                                                                : "other",
              isa_name(dnnl::get_effective_cpu_isa()), omp_get_max_threads());
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  check(xnn_initialize(nullptr) == xnn_status_success, "xnn_initialize failed");
  pthreadpool_t pool1 = pthreadpool_create(1), pool2 = pthreadpool_create(2);
  dnnl::stream stream(engine);
  uint64_t hash = 1469598103934665603ull;
  for (const int64_t batch : {1, 8}) {
    Tally plain, blocked, blocked16, xnn, back_data, back_weights, back_bias;
    std::set<std::string> seen;
    for (Layer l : read_layers(path)) {
      l.n = batch;
      if (!seen.insert(l.key()).second) continue;
      const std::vector<float> x = random_values(l.src_size(), 1),
                               w = random_values(l.weight_size(), 2), b = random_values(l.o, 3),
                               dy = random_values(l.dst_size(), 4);
      std::vector<float> x_nhwc(x.size());
      nchw_to_nhwc(x.data(), x_nhwc.data(), l.n, l.c, l.h * l.w);
      auto forward = [&](Layout layout, int threads) {
        omp_set_num_threads(threads);
        DnnlConv conv(engine, l, layout, Epilogue::none, x.data(), w.data(), b.data());
        conv.run(stream);
        const float* out = conv.output(stream);
        return std::vector<float>(out, out + l.dst_size());
      };
      auto xnn_forward = [&](pthreadpool_t pool) {
        XnnConv conv(l, x_nhwc.data(), w.data(), b.data(), pool);
        conv.run(pool);
        std::vector<float> out(size_t(l.dst_size()));
        nhwc_to_nchw(conv.output_nhwc().data(), out.data(), l.n, l.o, l.out_h() * l.out_w());
        return out;
      };
      auto backward = [&](int threads) {
        omp_set_num_threads(threads);
        return dnnl_backward(engine, l, x.data(), w.data(), dy.data());
      };
      const auto p1 = forward(Layout::nchw, 1), p2 = forward(Layout::nchw, 2),
                 p2b = forward(Layout::nchw, 2);
      const auto k1 = forward(Layout::any, 1), k2 = forward(Layout::any, 2),
                 k2b = forward(Layout::any, 2);
      const auto b1 = forward(Layout::nchw16c, 1), b2 = forward(Layout::nchw16c, 2),
                 b2b = forward(Layout::nchw16c, 2);
      const auto x1 = xnn_forward(pool1), x2 = xnn_forward(pool2), x2b = xnn_forward(pool2);
      const auto g1 = backward(1), g2 = backward(2), g2b = backward(2);
      plain.add(l, p1, p2, p2b);
      blocked.add(l, k1, k2, k2b);
      blocked16.add(l, b1, b2, b2b);
      xnn.add(l, x1, x2, x2b);
      back_data.add(l, g1.dx, g2.dx, g2b.dx);
      back_weights.add(l, g1.dw, g2.dw, g2b.dw);
      back_bias.add(l, g1.db, g2.db, g2b.db);
      for (const auto* v : {&p2, &k2, &b2, &x2, &g2.dx, &g2.dw, &g2.db}) hash = digest(hash, *v);
      if (batch == 1) {
        const Reference r = reference(l, x, w, b, dy);
        auto worst = [](Tally& t, double e) { t.worst_error = std::max(t.worst_error, e); };
        worst(plain, relative_error(p2.data(), r.y));
        worst(blocked, relative_error(k2.data(), r.y));
        worst(blocked16, relative_error(b2.data(), r.y));
        worst(xnn, relative_error(x2.data(), r.y));
        worst(back_data, relative_error(g2.dx.data(), r.dx));
        worst(back_weights, relative_error(g2.dw.data(), r.dw));
        worst(back_bias, relative_error(g2.db.data(), r.db));
      }
    }
    plain.print("oneDNN forward, NCHW", int(batch));
    blocked.print("oneDNN forward, its layout", int(batch));
    blocked16.print("oneDNN forward, nChw16c", int(batch));
    xnn.print("XNNPACK forward, NHWC", int(batch));
    back_data.print("oneDNN backward data", int(batch));
    back_weights.print("oneDNN backward weights", int(batch));
    back_bias.print("oneDNN backward bias", int(batch));
  }
  std::printf("digest of every 2-thread result: %016llx\n", (unsigned long long)hash);
  pthreadpool_destroy(pool1);
  pthreadpool_destroy(pool2);
  return 0;
}

namespace {

// Busy arithmetic that the compiler cannot remove.
double spin_work(int64_t iterations) {
  double a = 1.0;
  for (int64_t i = 0; i < iterations; ++i) {
    a = a * 1.0000001 + 1e-9;
    asm volatile("" : "+x"(a));  // a dependent chain the compiler must keep
  }
  return a;
}

// lazylua's pattern of other work: two threads (the caller and one worker
// that sleeps on a condition variable between jobs, as lazylua's pool does),
// each doing the same amount of busy arithmetic.
class SleepingPair {
 public:
  explicit SleepingPair(int64_t iterations)
      : iterations_(iterations), worker_([this] { loop(); }) {}
  ~SleepingPair() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    worker_.join();
  }
  void run() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++job_;
    }
    wake_.notify_one();
    sink_ += spin_work(iterations_);
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return done_ == job_; });
  }
  double sink() const { return sink_; }

 private:
  void loop() {
    int64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || job_ != seen; });
        if (stop_) return;
        seen = job_;
      }
      const double value = spin_work(iterations_);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        worker_sink_ += value;
        done_ = seen;
      }
      done_cv_.notify_one();
    }
  }
  int64_t iterations_;
  std::mutex mutex_;
  std::condition_variable wake_, done_cv_;
  int64_t job_ = 0, done_ = 0;
  bool stop_ = false;
  double sink_ = 0, worker_sink_ = 0;
  std::thread worker_;
};

double cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return double(now.tv_sec) * 1e3 + double(now.tv_nsec) * 1e-6;
}

}  // namespace

int idle(const char* path, int threads) {
  // Iterations of spin_work that take 1 ms on one core (the fastest of a
  // few tries: another process may take the core during one).
  int64_t iterations = 1 << 20;
  double fastest = 1e30;
  for (int attempt = 0; attempt < 20; ++attempt) {
    const double start = now_ms();
    spin_work(iterations);
    fastest = std::min(fastest, now_ms() - start);
  }
  iterations = int64_t(double(iterations) / fastest);
  SleepingPair other(iterations);
  const double budget = 400;
  // Measured first, before any library has started a thread.
  const double work = median_ms([&] { other.run(); }, budget);
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("other work alone (2 threads, sleeping pool): %.3f ms; OMP_WAIT_POLICY=%s\n", work,
              wait_policy ? wait_policy : "(unset)");
  omp_set_num_threads(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  check(xnn_initialize(nullptr) == xnn_status_success, "xnn_initialize failed");
  pthreadpool_t pool = pthreadpool_create(size_t(threads));
  std::printf("%-34s %-8s %9s %9s %9s %6s %9s\n", "layer (batch 1)", "library", "conv ms",
              "+work ms", "sum ms", "ratio", "idle CPU");
  std::printf(
      "(+work: a call then the other work; sum: the call alone + the work alone; ratio:"
      " +work / sum;\n idle CPU: ms of CPU the process burns in the 20 ms the caller"
      " sleeps after a call)\n");
  for (const Layer& l : read_layers(path)) {
    const bool wanted = (l.model == "resnet18" && l.index == 6) ||
                        (l.model == "mobilenet_v2" && (l.index == 7 || l.index == 8));
    if (!wanted) continue;
    const std::vector<float> x = random_values(l.src_size(), 1),
                             w = random_values(l.weight_size(), 2), b = random_values(l.o, 3);
    std::vector<float> x_nhwc(x.size());
    nchw_to_nhwc(x.data(), x_nhwc.data(), l.n, l.c, l.h * l.w);
    char name[64];
    std::snprintf(name, sizeof name, "%s #%d %s C%ld %ldx%ld", l.model.c_str(), l.index,
                  l.kind().c_str(), long(l.c), long(l.h), long(l.w));
    auto report = [&](const char* library, auto&& conv) {
      const double pair = median_ms(
          [&] {
            conv();
            other.run();
          },
          budget);
      const double alone = median_ms(conv, budget);
      // CPU time the process burns while the caller sleeps 20 ms after a
      // call: the library's idle threads spinning (independent of the load).
      std::vector<double> burnt;
      for (int i = 0; i < 15; ++i) {
        conv();
        const double start = cpu_ms();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        burnt.push_back(cpu_ms() - start);
      }
      std::sort(burnt.begin(), burnt.end());
      std::printf("%-34s %-8s %9.3f %9.3f %9.3f %6.2f %9.2f\n", name, library, alone, pair,
                  alone + work, pair / (alone + work), burnt[burnt.size() / 2]);
    };
    {
      DnnlConv conv(engine, l, Layout::nchw, Epilogue::none, x.data(), w.data(), b.data());
      report("oneDNN", [&] { conv.run(stream); });
    }
    {
      XnnConv conv(l, x_nhwc.data(), w.data(), b.data(), pool);
      report("XNNPACK", [&] { conv.run(pool); });
    }
    {
      // Its workers go to sleep at once after the call instead of spinning.
      XnnConv conv(l, x_nhwc.data(), w.data(), b.data(), pool, false, XNN_FLAG_YIELD_WORKERS);
      report("XNN+yield", [&] { conv.run(pool); });
    }
  }
  pthreadpool_destroy(pool);
  return other.sink() > 0 ? 0 : 1;
}

}  // namespace conv_bench
