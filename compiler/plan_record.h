// plan_record.h - an optimized program and its plan as bytes, for the disk
// cache (the CachedPlan message of cache_entry.proto), so that a disk hit in
// a new process runs without the passes and codegen (docs/architecture.md §5, stage 6).
//
// Example (native_executor.cpp):
//   Program canonical = program_from_graph(graph);
//   std::string bytes = serialize_plan(canonical, optimized, plan);   // at build
//   ...                                                               // next process
//   if (deserialize_plan(bytes, canonical, &optimized, &plan)) run(plan);
//
// What is not stored, and why: scan bodies are graphs of live nodes, so an
// instruction names its body by position in scan_bodies(canonical), which a
// process rebuilds from its own graph; locations name the canonical
// instruction recorded at the same place, so messages cite the lines of the
// script at hand; the C source is not kept (the object holds the code).
#pragma once

#include <cstdint>
#include <string>

#include "compiler/plan.h"
#include "compiler/program.h"

namespace lazylua::compiler {

// A hash of everything in `canonical` that compiled code depends on (ops,
// attrs, dtypes, shapes, inputs, constants, donations, outputs, scan bodies
// recursively; not locations), computed differently from Graph::key: stored
// with a plan and compared on load, so a key collision is a miss.
uint64_t canonical_hash(const Program& canonical);

// The bytes of a CachedPlan for `optimized` and `plan`, made from `canonical`
// (program_from_graph of the graph). Throws only std::bad_alloc.
std::string serialize_plan(const Program& canonical, const Program& optimized, const Plan& plan);

// The inverse, checked: false when the bytes do not parse, were made from a
// program with another canonical_hash, or hold an index out of range (a
// plan from a damaged record must never index past a buffer). plan->source
// stays empty and plan->functions unresolved. Throws only std::bad_alloc.
bool deserialize_plan(const std::string& bytes, const Program& canonical, Program* optimized,
                      Plan* plan);

}  // namespace lazylua::compiler
