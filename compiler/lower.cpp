// lower.cpp - the lowering driver (lower.h): optimize, fuse, choose donors,
// codegen, plan memory, in that order, each timed and told at LAZYLUA_DEBUG=2.
#include "compiler/lower.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "compiler/codegen.h"
#include "compiler/fuse.h"
#include "compiler/passes.h"
#include "tensor/interrupt.h"

namespace lazylua::compiler {
namespace {

// What fusion decided, in a few words: its steps by what runs them, and
// how many values get a slot.
std::string fusion_summary(const Fusion& fusion) {
  std::map<std::string, int> runners;
  for (const FusedStep& step : fusion.steps) runners[runner_name(step.lowering)]++;
  std::string steps;
  for (const auto& [runner, count] : runners) {
    steps += fmt::format("{}{} {}", steps.empty() ? "" : ", ", count, runner);
  }
  const auto slots = std::count(fusion.materialized.begin(), fusion.materialized.end(), true);
  return fmt::format("{} steps ({}), {} slots", fusion.steps.size(), steps.empty() ? "-" : steps,
                     slots);
}

std::string donor_summary(const Program& program, const std::vector<int>& donor) {
  const auto donated = std::count(program.donated.begin(), program.donated.end(), true);
  if (donated == 0) return std::string("no donated inputs");
  const auto taken = std::count_if(donor.begin(), donor.end(), [](int d) { return d >= 0; });
  return fmt::format("{} of {} donated inputs take an output", taken, donated);
}

}  // namespace

void print_stage(const std::string& prefix, const char* stage, double seconds,
                 const std::string& what) {
  // The top-level program's lines say "lower", a scan body's name its kernels.
  const std::string who = prefix == kKernelPrefix ? "" : " " + prefix;
  fmt::print(stderr, "[lazylua] lower{}: {}: {} ({:.2f} ms)\n", who, stage, what, seconds * 1e3);
}

Lowered lower(const Program& canonical, const LowerOptions& options) {
  auto start = std::chrono::steady_clock::now();
  // Ends a stage: its line, and (in sync mode) an interrupt stops the
  // lowering here rather than after the remaining stages.
  auto stage_done = [&](const char* stage, const auto& what) {
    const auto now = std::chrono::steady_clock::now();
    if (options.debug_level >= 2) {
      print_stage(options.prefix, stage, std::chrono::duration<double>(now - start).count(),
                  what());
    }
    check_interrupt();
    start = std::chrono::steady_clock::now();
  };

  Lowered lowered;
  lowered.program = options.optimize ? optimize(canonical, options.debug_level) : canonical;
  stage_done("optimize", [&] {
    return fmt::format("{} -> {} instructions", canonical.instructions.size(),
                       lowered.program.instructions.size());
  });

  const Fusion fusion = fuse_program(lowered.program);
  stage_done("fuse", [&] { return fusion_summary(fusion); });

  const std::vector<int> donor = choose_donors(lowered.program, fusion);
  stage_done("choose donors", [&] { return donor_summary(lowered.program, donor); });

  // A scan body goes through these same stages, named by its step.
  const ScanLowering lower_scan = [&options](const Ref<ScanBody>& body, const std::string& prefix) {
    LowerOptions inner = options;
    inner.optimize = true;
    inner.prefix = prefix;
    inner.standalone = false;
    Lowered body_lowered = lower(program_from_scan_body(*body), inner);
    return ScanPlan{body, std::move(body_lowered.program), std::move(body_lowered.plan)};
  };
  lowered.plan =
      generate_plan(lowered.program, fusion, donor, options.prefix, options.standalone, lower_scan);
  stage_done("codegen", [&] {
    const Plan& plan = lowered.plan;
    return fmt::format("{} steps, {} kernels, {} functions, {} bytes of C", plan.steps.size(),
                       plan.kernel_count, plan.function_count, plan.source.size());
  });

  lowered.plan.memory = plan_memory(lowered.plan);
  stage_done("plan memory", [&] { return lowered.plan.memory.summary(); });
  return lowered;
}

}  // namespace lazylua::compiler
