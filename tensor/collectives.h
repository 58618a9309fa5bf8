// collectives.h - data-parallel training across processes: the `collective`
// IR op (an all-reduce or a broadcast among every process of an MPI job)
// and the process group it runs in.
//
// A script started by `mpirun -np N` is one of N ranks. Each rank records
// the same collectives in the same order; a collective is a node like any
// other, so it is part of the graph key and runs inside the compiled plan,
// on the plan's buffers, at the sync. Without a launcher there is one rank:
// dist_size() is 1 and MPI is never initialized.
//
// Ordering. Every rank must make its MPI calls in one order, whatever it
// syncs when (rank 0 may print a loss that rank 1 never reads), and
// whichever tier runs the graph (interpreted while compiling, or
// compiled). So each collective node takes the previous pending collective
// of its context as an extra input that it does not read: running a
// collective runs every earlier one first, in recording order, in every
// tier. The compiler never merges two collectives (cse.cpp), and a plan
// that has run one is never re-run on the reference interpreter.
//
// Checking (docs/distributed.md). Before each call the ranks exchange what they are about to do
// (op, dtype, shape, root, and where: its sequence number and the line that
// recorded it); a difference is the same Lua error on every rank, naming
// both ranks and both calls, instead of corrupt data. The sequence number
// counts the collectives (and barriers) this process recorded, so it is
// the same on every rank for the same call, and a collective one rank
// recorded but dropped (its step failed there before the call) shows as a
// gap. The line catches what no count can: a rank that skipped a call (an
// error, a branch) pairs its next one, of the same shape, with the others'
// skipped one. Both travel as scalar inputs of the node (not attrs), so
// they are not part of the graph key: a step recorded again from the same
// lines reuses its compiled plan.
#pragma once

#include <cstdint>

#include "tensor.h"

namespace lazylua {

// The sub_op of a collective node; attrs[0] is the root of a broadcast.
enum class CollectiveOp : uint8_t { sum, max, min, broadcast };
const char* collective_op_name(CollectiveOp op);  // "all_reduce_sum", "broadcast", ...

// Whether a launcher (mpirun) started this process as a rank of a job.
bool dist_launched();
// Joins the job (MPI_Init) when launched and not yet joined; a no-op
// otherwise. Fails when launched but built without MPI.
void dist_initialize();
bool dist_initialized();  // MPI is initialized (size() may still be 1)
int dist_rank();          // 0-based; 0 without a launcher
int dist_size();          // 1 without a launcher
// Waits for every rank (after running the context's pending collectives,
// so that every rank's calls stay in one order).
void dist_barrier(Context* context);
// Ends the whole job at once (MPI_Abort) when this process is a rank of a
// job of two or more; otherwise does nothing. For a script that failed:
// the other ranks would wait for it forever.
void dist_abort_job(int exit_code);

// What this process's collectives cost so far (MPI calls, the checks
// included): for benchmarks and dist.stats().
struct CollectiveStats {
  int64_t calls = 0;  // collectives run (each: one check, then one reduction or broadcast)
  int64_t bytes = 0;  // tensor bytes they reduced or broadcast
  double seconds = 0;
};
CollectiveStats dist_stats();

// Which call a collective is, exchanged and compared before it runs: the
// process's count of recorded collectives and barriers, and the recording
// line (its chunk name's hash in the upper 32 bits, the line in the lower).
struct CollectiveCall {
  int64_t sequence = 0;
  int64_t site = 0;
};

namespace ops {
// Runs the collective on this rank's `in` and returns the result (a new
// array; `in` is not written). Identity when the job has one rank.
Array collective(const Array& in, CollectiveOp op, int root, CollectiveCall call);
// The same for a collective node: `sequence` and `site` are its scalar
// inputs (0-d i64 arrays).
Array collective(const Array& in, CollectiveOp op, int root, const Array& sequence,
                 const Array& site);
}  // namespace ops

// Records (lazy) or runs (eager) a collective of `a`. A new tensor, with
// no gradient. Refused inside a scan body. The node's inputs: `a`, the
// sequence and site scalars (CollectiveCall), then the ordering input.
Tensor collective(const Tensor& a, CollectiveOp op, int root);

}  // namespace lazylua
