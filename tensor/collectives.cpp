// collectives.cpp - the collective op and the MPI job it runs in
// (collectives.h).
#include "collectives.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "profiler.h"

#ifdef LAZYLUA_HAVE_MPI
// The C API only: mpi.h would otherwise declare the (removed from the
// standard) C++ bindings, which live in a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace lazylua {

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::sum:
      return "all_reduce_sum";
    case CollectiveOp::max:
      return "all_reduce_max";
    case CollectiveOp::min:
      return "all_reduce_min";
    case CollectiveOp::broadcast:
      return "broadcast";
  }
  return "collective";
}

bool dist_launched() {
  // Open MPI's mpirun sets the first; PMIx and PMI launchers (srun,
  // MPICH's hydra) the others.
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_SIZE");
}

namespace {

struct Job {
  bool initialized = false;  // by us or by the host
  bool we_initialized = false;
  int rank = 0;
  int size = 1;
};
Job job;
CollectiveStats stats;
// The sequence number of the last collective or barrier this process
// recorded (collectives.h): the same count on every rank for the same call.
int64_t last_sequence = 0;

int64_t next_sequence() {
  return ++last_sequence;
}

// A recording line as CollectiveCall::site: FNV-1a of the chunk name
// (the same on every rank running the same script), then the line.
int64_t site_of(const SourceLocation& location) {
  uint32_t hash = 2166136261u;
  for (const char* c = location.chunk; c && *c; c++) {
    hash = (hash ^ static_cast<unsigned char>(*c)) * 16777619u;
  }
  return static_cast<int64_t>((static_cast<uint64_t>(hash) << 32) |
                              static_cast<uint32_t>(location.line));
}

int64_t scalar_word(const Array& scalar) {
  return contiguous(ops::cast(scalar, DType::i64)).data<int64_t>()[0];
}

}  // namespace

namespace ops {
Array collective(const Array& in, CollectiveOp op, int root, const Array& sequence,
                 const Array& site) {
  return collective(in, op, root, CollectiveCall{scalar_word(sequence), scalar_word(site)});
}
}  // namespace ops

CollectiveStats dist_stats() {
  return stats;
}

bool dist_initialized() {
  return job.initialized;
}
int dist_rank() {
  return job.rank;
}
int dist_size() {
  return job.size;
}

#ifndef LAZYLUA_HAVE_MPI

void dist_initialize() {
  if (dist_launched()) {
    fail(
        "dist: this process was started by an MPI launcher, but lazylua was built without MPI "
        "(install libopenmpi-dev and rebuild)");
  }
}
void dist_barrier(Context*) {}
void dist_abort_job(int) {}
namespace ops {
Array collective(const Array& in, CollectiveOp, int, CollectiveCall) {
  return contiguous(in);
}
}  // namespace ops

#else

namespace {

void agree(int64_t kind, DType dtype, int root, const Shape& shape, CollectiveCall call);
constexpr int64_t kExit = 101;

// MPI_Finalize at exit, for a process that ends normally. One that failed
// calls dist_abort_job first (cli.cpp): finalizing would wait for ranks that
// wait for it. So would a rank that ends while another still waits in a
// collective (a script that made a collective on some ranks only): every
// rank first says it is ending, the same handshake as a collective's, and
// when one is doing something else instead, the job ends here, with the
// message the other ranks get too.
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (job.size > 1) {
    try {
      agree(kExit, DType::boolean, 0, Shape{}, CollectiveCall{next_sequence(), 0});
    } catch (const std::exception& error) {
      std::fprintf(stderr, "lazylua: rank %d of %d: %s\n", job.rank, job.size, error.what());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }
  }
  MPI_Finalize();
}

// mpirun stops the other ranks with SIGTERM when one dies. Say so, rather
// than vanish: the rank that failed printed why; this one says it was
// stopped because of it.
char stop_message[160];
void on_stopped(int signal_number) {
  const ssize_t written = write(STDERR_FILENO, stop_message, std::strlen(stop_message));
  (void)written;
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

void install_stop_message() {
  struct sigaction current {};
  if (sigaction(SIGTERM, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  std::snprintf(stop_message, sizeof stop_message,
                "lazylua: rank %d of %d: stopped by the MPI launcher (another rank failed, or "
                "the job was stopped)\n",
                job.rank, job.size);
  struct sigaction action {};
  action.sa_handler = on_stopped;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::boolean:
      return MPI_C_BOOL;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

// max and min of floats as the tensor ops have them: NaN wins (MPI_MAX
// compares, and would keep or drop a NaN depending on its position).
template <typename T, bool is_max>
void nan_propagating(void* in, void* inout, int* length, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *length; i++) {
    const bool take = std::isnan(a[i]) || (is_max ? a[i] > b[i] : a[i] < b[i]);
    if (take) b[i] = a[i];
  }
}

MPI_Op reduce_op(CollectiveOp op, DType dtype) {
  static MPI_Op float_ops[2][2];  // [f64][max]
  static bool made = false;
  if (!made) {
    MPI_Op_create(nan_propagating<float, false>, 1, &float_ops[0][0]);
    MPI_Op_create(nan_propagating<float, true>, 1, &float_ops[0][1]);
    MPI_Op_create(nan_propagating<double, false>, 1, &float_ops[1][0]);
    MPI_Op_create(nan_propagating<double, true>, 1, &float_ops[1][1]);
    made = true;
  }
  const bool is_max = op == CollectiveOp::max;
  switch (dtype) {
    case DType::boolean:
      return is_max ? MPI_LOR : MPI_LAND;
    case DType::f32:
    case DType::f64:
      if (op == CollectiveOp::sum) return MPI_SUM;
      return float_ops[dtype == DType::f64][is_max];
    default:
      return op == CollectiveOp::sum ? MPI_SUM : is_max ? MPI_MAX : MPI_MIN;
  }
}

// What a rank is about to do, exchanged before each call: kind (a
// CollectiveOp, or kBarrier), dtype, root, rank of the shape, its extents,
// then the call (sequence number, site) and this process's last sequence
// number (not compared: see agree).
constexpr int kCallWord = 4 + kMaxDims;
constexpr int kLastSequenceWord = kCallWord + 2;
constexpr int kDescriptorWords = kLastSequenceWord + 1;
constexpr int kComparedWords = kLastSequenceWord;
constexpr int64_t kBarrier = 100;

std::string describe(const int64_t* words) {
  if (words[0] == kBarrier) return "barrier()";
  if (words[0] == kExit) return "no more collectives (its script ended)";
  const auto op = static_cast<CollectiveOp>(words[0]);
  Shape shape;
  for (int k = 0; k < words[3]; k++) shape.push_back(words[4 + k]);
  const std::string what =
      fmt::format("{} of {} {}", collective_op_name(op), dtype_name(static_cast<DType>(words[1])),
                  shape_string(shape));
  return op == CollectiveOp::broadcast ? fmt::format("{} from root {}", what, words[2]) : what;
}

// "its collective 3, recorded at line 12" (the chunk name is not sent: a
// different one is "in another file" than rank 0's).
std::string describe_call(const int64_t* words, const int64_t* rank0_words) {
  const auto site = static_cast<uint64_t>(words[kCallWord + 1]);
  const auto rank0_site = static_cast<uint64_t>(rank0_words[kCallWord + 1]);
  std::string text = fmt::format("its collective {}", words[kCallWord]);
  if (static_cast<uint32_t>(site) != 0) {
    text += fmt::format(", recorded at line {}", static_cast<uint32_t>(site));
    if ((site >> 32) != (rank0_site >> 32)) text += " of another file";
  }
  return text;
}

// Every rank learns what every other is about to do; when they differ, each
// raises the same error (so a script can catch it on every rank alike).
void agree(int64_t kind, DType dtype, int root, const Shape& shape, CollectiveCall call) {
  int64_t mine[kDescriptorWords] = {kind, static_cast<int64_t>(dtype), root, shape.rank()};
  for (int k = 0; k < shape.rank(); k++) mine[4 + k] = shape[k];
  mine[kCallWord] = call.sequence;
  mine[kCallWord + 1] = call.site;
  mine[kLastSequenceWord] = last_sequence;
  std::vector<int64_t> all(static_cast<size_t>(kDescriptorWords) * job.size);
  MPI_Allgather(mine, kDescriptorWords, MPI_INT64_T, all.data(), kDescriptorWords, MPI_INT64_T,
                MPI_COMM_WORLD);
  for (int r = 1; r < job.size; r++) {
    const int64_t* theirs = &all[static_cast<size_t>(r) * kDescriptorWords];
    if (std::equal(theirs, theirs + kComparedWords, all.data())) continue;
    // Every rank counts on from the same number after this, so that the
    // job can go on (the script may catch the error): the largest count
    // any rank reached.
    for (int q = 0; q < job.size; q++) {
      last_sequence = std::max(last_sequence,
                               all[static_cast<size_t>(q) * kDescriptorWords + kLastSequenceWord]);
    }
    if (!std::equal(theirs, theirs + kCallWord, all.data())) {
      fail(
          "dist: the ranks disagree on a collective: rank 0 does {}, rank {} does {} ({} on rank "
          "0, {} on rank {})",
          describe(all.data()), r, describe(theirs), describe_call(all.data(), all.data()),
          describe_call(theirs, all.data()), r);
    }
    fail(
        "dist: the ranks disagree on a collective: rank 0 does {} as {}, rank {} does {} as {}: "
        "every rank must make the same collectives in the same order, each from the same line (a "
        "rank that skipped one, by an error or a branch, would pair its next one with the others' "
        "skipped one)",
        describe(all.data()), describe_call(all.data(), all.data()), r, describe(theirs),
        describe_call(theirs, all.data()));
  }
}

// MPI counts are ints: a larger tensor goes in pieces.
constexpr int64_t kMaxCount = int64_t{1} << 30;

// A sum that is bit-identical on every rank with three or more: each
// element is reduced by one rank (reduce-scatter), then gathered. (An
// all-reduce may add in a different order on different ranks; with two, a
// + b == b + a, so MPI_Allreduce is exact.)
void sum_same_everywhere(const char* in, char* out, int64_t count, DType dtype) {
  const MPI_Datatype type = mpi_type(dtype);
  const int64_t element = dtype_size(dtype);
  if (job.size == 2) {
    MPI_Allreduce(in, out, static_cast<int>(count), type, MPI_SUM, MPI_COMM_WORLD);
    return;
  }
  std::vector<int> counts(job.size), offsets(job.size);
  for (int r = 0, offset = 0; r < job.size; r++) {
    counts[r] = static_cast<int>(count / job.size + (r < count % job.size ? 1 : 0));
    offsets[r] = offset;
    offset += counts[r];
  }
  MPI_Reduce_scatter(in, out + offsets[job.rank] * element, counts.data(), type, MPI_SUM,
                     MPI_COMM_WORLD);
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, counts.data(), offsets.data(), type,
                 MPI_COMM_WORLD);
}

}  // namespace

void dist_initialize() {
  if (job.initialized || !dist_launched()) return;
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    // Serialized: only one thread at a time calls MPI (the one syncing);
    // compile threads never do.
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      fail("dist: MPI_Init_thread failed");
    }
    job.we_initialized = true;
    std::atexit(finalize_at_exit);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &job.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &job.size);
  job.initialized = true;
  if (job.we_initialized && job.size > 1) install_stop_message();
}

void dist_barrier(Context* context) {
  if (!job.initialized || job.size == 1) return;
  context->run_pending_collectives();
  agree(kBarrier, DType::boolean, 0, Shape{},
        CollectiveCall{next_sequence(), site_of(context->current_location())});
  MPI_Barrier(MPI_COMM_WORLD);
}

void dist_abort_job(int exit_code) {
  if (!job.initialized || job.size < 2) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
}

namespace ops {

Array collective(const Array& in, CollectiveOp op, int root, CollectiveCall call) {
  if (!job.initialized || job.size == 1) return contiguous(in);
  const double start = MPI_Wtime();
  agree(static_cast<int64_t>(op), in.dtype, root, in.shape, call);
  const Array source = contiguous(in);
  Array out = Array::empty(in.shape, in.dtype, collective_op_name(op));
  const int64_t count = in.numel();
  const int64_t element = dtype_size(in.dtype);
  const char* from = static_cast<const char*>(source.raw_data());
  char* to = static_cast<char*>(out.raw_data());
  profiler::Span span("collective", collective_op_name(op));
  if (span.on()) span.set_work(count * element, 0);
  for (int64_t done = 0; done < count; done += kMaxCount) {
    const int64_t piece = std::min(kMaxCount, count - done);
    const char* piece_in = from + done * element;
    char* piece_out = to + done * element;
    if (op == CollectiveOp::broadcast) {
      if (job.rank == root) std::memcpy(piece_out, piece_in, piece * element);
      MPI_Bcast(piece_out, static_cast<int>(piece * element), MPI_BYTE, root, MPI_COMM_WORLD);
    } else if (op == CollectiveOp::sum) {
      sum_same_everywhere(piece_in, piece_out, piece, in.dtype);
    } else {
      MPI_Allreduce(piece_in, piece_out, static_cast<int>(piece), mpi_type(in.dtype),
                    reduce_op(op, in.dtype), MPI_COMM_WORLD);
    }
  }
  stats.calls++;
  stats.bytes += count * element;
  stats.seconds += MPI_Wtime() - start;
  return out;
}

}  // namespace ops

#endif  // LAZYLUA_HAVE_MPI

namespace {

void check_collective(const Tensor& a, CollectiveOp op, int root) {
  if (a->context->scan_depth > 0) {
    fail(
        "dist: a collective cannot run inside a tensor.scan body (the body is recorded once); "
        "reduce the scan's results after it");
  }
  if (op == CollectiveOp::sum && a->dtype == DType::boolean) {
    fail("dist.all_reduce: cannot sum a bool tensor (use op \"max\" for any, \"min\" for all)");
  }
  if (op == CollectiveOp::broadcast && (root < 0 || root >= dist_size())) {
    fail("dist.broadcast: root {} is not a rank of this job (ranks 0 to {})", root,
         dist_size() - 1);
  }
}

}  // namespace

Tensor collective(const Tensor& a, CollectiveOp op, int root) {
  check_collective(a, op, root);
  Context* context = a->context.get();
  const SourceLocation location = context->current_location();
  const CollectiveCall call{next_sequence(), site_of(location)};
  if (context->eager) {
    const Array data = a->data.defined() && !a->pending && !a->is_lazy_view()
                           ? a->data
                           : observe(a, SyncCause::eager_op);
    return make_tensor(context, ops::collective(data, op, root, call));
  }
  // The call as scalar inputs (run inputs, not part of the graph key; made
  // as scalar nodes even for 0 and 1, which make_scalar would turn into
  // constants, which are).
  auto call_word = [&](int64_t value) {
    NodeRef node = make_node(Op::scalar, 0, DType::i64, Shape{}, {}, {}, location);
    node->scalar = ops::Scalar::from_integer(value);
    return node;
  };
  std::vector<NodeRef> inputs{value_of(a), call_word(call.sequence), call_word(call.site)};
  // The ordering input (collectives.h): read by no kernel.
  if (!context->pending_collectives.empty()) inputs.push_back(context->pending_collectives.back());
  context->metrics.ops_recorded++;
  NodeRef node = make_node(Op::collective, static_cast<uint8_t>(op), a->dtype, a->shape,
                           std::move(inputs), {root}, location);
  context->pending_collectives.push_back(node);
  return Tensor(new TensorImpl(context, std::move(node)));
}

}  // namespace lazylua
