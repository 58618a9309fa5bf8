// plan_record.cpp - optimized programs and plans to and from CachedPlan
// records (cache_entry.proto); see plan_record.h for what is stored.
#include "compiler/plan_record.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "compiler/cache_entry.pb.h"
#include "compiler/toolchain.h"
#include "tensor/scan.h"

namespace lazylua::compiler {
namespace {

using Bodies = std::vector<ScanBody*>;

// The scan bodies a program reaches, each once, in a fixed order: each body
// of its instructions in order, followed by the bodies its graph reaches.
// Two programs with one canonical_hash list bodies of the same structure.
void add_body(ScanBody* body, Bodies& bodies) {
  if (!body || std::find(bodies.begin(), bodies.end(), body) != bodies.end()) return;
  bodies.push_back(body);
  for (const Node* node : body->graph.nodes) add_body(node->body.get(), bodies);
}

Bodies scan_bodies(const Program& canonical) {
  Bodies bodies;
  for (const Instruction& instruction : canonical.instructions) {
    add_body(instruction.body.get(), bodies);
  }
  return bodies;
}

// --- canonical_hash: the fields as bytes, hashed with FNV-1a ----------------

void put_word(std::string& bytes, uint64_t word) {
  char raw[sizeof word];
  std::memcpy(raw, &word, sizeof word);
  bytes.append(raw, sizeof raw);
}

void put_shape(std::string& bytes, const Shape& shape) {
  put_word(bytes, static_cast<uint64_t>(shape.rank()));
  for (int64_t size : shape) put_word(bytes, static_cast<uint64_t>(size));
}

void put_program(std::string& bytes, const Program& program) {
  put_word(bytes, program.instructions.size());
  for (const Instruction& instruction : program.instructions) {
    put_word(bytes, static_cast<uint64_t>(instruction.op) << 16 |
                        static_cast<uint64_t>(instruction.sub_op) << 8 |
                        static_cast<uint64_t>(instruction.dtype));
    put_shape(bytes, instruction.shape);
    // Only the attrs the op reads: the others may hold anything.
    const int input_rank =
        instruction.inputs.empty() ? 0 : program.instructions[instruction.inputs[0]].shape.rank();
    const int attrs = std::min(attr_count(instruction.op, input_rank), kMaxDims);
    for (int k = 0; k < attrs; k++)
      put_word(bytes, static_cast<uint64_t>(instruction.attrs.values[k]));
    put_word(bytes, instruction.inputs.size());
    for (int input : instruction.inputs) put_word(bytes, static_cast<uint64_t>(input));
    put_word(bytes, static_cast<uint64_t>(instruction.input_index));
    uint64_t value_bits;
    std::memcpy(&value_bits, &instruction.constant.value, sizeof value_bits);
    put_word(bytes, value_bits);
    put_word(bytes, static_cast<uint64_t>(instruction.constant.integer));
    put_word(bytes, instruction.constant.is_integer);
    const ScanBody* body = instruction.body.get();
    put_word(bytes, body != nullptr);
    if (!body) continue;
    for (int64_t count :
         {int64_t{body->carries}, int64_t{body->xs}, int64_t{body->captured}, int64_t{body->ys},
          body->length, int64_t{body->reverse}, body->total_bytes}) {
      put_word(bytes, static_cast<uint64_t>(count));
    }
    for (size_t k = 0; k < body->output_shapes.size(); k++) {
      put_word(bytes, static_cast<uint64_t>(body->output_dtypes.at(k)));
      put_shape(bytes, body->output_shapes[k]);
      put_word(bytes, static_cast<uint64_t>(body->output_offsets.at(k)));
    }
    put_program(bytes, program_from_scan_body(*body));
  }
  for (int output : program.outputs) put_word(bytes, static_cast<uint64_t>(output));
  put_word(bytes, static_cast<uint64_t>(program.input_count));
  for (bool donated : program.donated) put_word(bytes, donated);
}

// --- Writing ------------------------------------------------------------------

template <typename Values, typename Field>
void put_all(const Values& values, Field* field) {
  for (auto value : values) field->Add(value);
}

void write_program(const Program& program, const Program& canonical, const Bodies& bodies,
                   cache::ProgramRecord* record) {
  std::map<std::pair<const char*, int>, int> located;  // first canonical instruction per place
  for (size_t j = 0; j < canonical.instructions.size(); j++) {
    const SourceLocation& location = canonical.instructions[j].location;
    located.emplace(std::make_pair(location.chunk, location.line), static_cast<int>(j));
  }
  for (const Instruction& instruction : program.instructions) {
    cache::InstructionRecord* out = record->add_instructions();
    out->set_op(static_cast<uint32_t>(instruction.op));
    out->set_sub_op(instruction.sub_op);
    out->set_dtype(static_cast<uint32_t>(instruction.dtype));
    put_all(instruction.shape, out->mutable_shape());
    put_all(instruction.attrs.values, out->mutable_attrs());
    put_all(instruction.inputs, out->mutable_inputs());
    out->set_input_index(instruction.input_index);
    out->set_constant_value(instruction.constant.value);
    out->set_constant_integer(instruction.constant.integer);
    out->set_constant_is_integer(instruction.constant.is_integer);
    if (instruction.body) {
      auto found = std::find(bodies.begin(), bodies.end(), instruction.body.get());
      if (found == bodies.end()) throw Error("a scan body the graph does not reach");
      out->set_body(static_cast<int32_t>(found - bodies.begin()));
    }
    auto place = located.find({instruction.location.chunk, instruction.location.line});
    if (place != located.end()) out->set_location_of(place->second);
  }
  put_all(program.outputs, record->mutable_outputs());
  record->set_input_count(program.input_count);
  put_all(program.donated, record->mutable_donated());
}

void write_plan(const Plan& plan, const Bodies& bodies, cache::PlanRecord* record) {
  for (const Slot& slot : plan.slots) {
    cache::SlotRecord* out = record->add_slots();
    out->set_dtype(static_cast<uint32_t>(slot.dtype));
    put_all(slot.shape, out->mutable_shape());
    out->set_instruction(slot.instruction);
    out->set_input_index(slot.input_index);
  }
  for (const Step& step : plan.steps) {
    cache::StepRecord* out = record->add_steps();
    out->set_kind(static_cast<uint32_t>(step.kind));
    out->set_function(step.function);
    out->set_iterations(step.iterations);
    out->set_grain(step.grain);
    put_all(step.slots, out->mutable_slots());
    put_all(step.byte_offsets, out->mutable_byte_offsets());
    out->set_instruction(step.instruction);
    put_all(step.written, out->mutable_written());
    put_all(step.roots, out->mutable_roots());
    put_all(step.same_element_reads, out->mutable_same_element_reads());
    out->set_can_fail(step.can_fail);
    out->set_transposed_inputs(step.transposed_inputs);
    for (const EpilogueStage& stage : step.epilogue) {
      out->add_epilogue(static_cast<int32_t>(stage.kind));
      out->add_epilogue(stage.value_first ? 1 : 0);
      out->add_epilogue(stage.operand);
    }
    put_all(step.parts, out->mutable_parts());
    if (step.kind != Step::Kind::scan) continue;
    const ScanPlan& scan = *step.scan;
    auto found = std::find(bodies.begin(), bodies.end(), scan.body.get());
    if (found == bodies.end()) throw Error("a scan body the graph does not reach");
    cache::ScanPlanRecord* scan_record = out->mutable_scan();
    scan_record->set_body(static_cast<int32_t>(found - bodies.begin()));
    write_program(scan.program, program_from_scan_body(*scan.body), bodies,
                  scan_record->mutable_program());
    write_plan(scan.plan, bodies, scan_record->mutable_plan());
  }
  put_all(plan.outputs, record->mutable_outputs());
  record->set_kernel_count(plan.kernel_count);
  record->set_function_count(plan.function_count);
  record->set_summary(plan.summary);
}

// --- Reading, every index checked ---------------------------------------------

// A record that does not describe a valid program or plan.
struct Damaged {};

void check(bool condition) {
  if (!condition) throw Damaged{};
}

bool in_range(int64_t index, size_t size) {
  return index >= 0 && static_cast<uint64_t>(index) < size;
}

template <typename Field>
Shape read_shape(const Field& field) {
  check(field.size() <= kMaxDims);
  Shape shape;
  for (int64_t size : field) {
    check(size >= 0);
    shape.push_back(size);
  }
  return shape;
}

DType read_dtype(uint32_t value) {
  check(value < static_cast<uint32_t>(kDTypeCount));
  return static_cast<DType>(value);
}

template <typename Field>
std::vector<int> read_indices(const Field& field, size_t size) {
  std::vector<int> indices;
  indices.reserve(static_cast<size_t>(field.size()));
  for (int index : field) {
    check(in_range(index, size));
    indices.push_back(index);
  }
  return indices;
}

Program read_program(const cache::ProgramRecord& record, const Program& canonical,
                     const Bodies& bodies) {
  Program program;
  check(record.input_count() >= 0 && record.donated_size() == record.input_count());
  program.input_count = record.input_count();
  program.donated.assign(record.donated().begin(), record.donated().end());
  program.instructions.reserve(static_cast<size_t>(record.instructions_size()));
  for (const cache::InstructionRecord& in : record.instructions()) {
    Instruction instruction;
    check(in.op() < static_cast<uint32_t>(kOpCount) && in.sub_op() <= 255);
    instruction.op = static_cast<Op>(in.op());
    instruction.sub_op = static_cast<uint8_t>(in.sub_op());
    instruction.dtype = read_dtype(in.dtype());
    instruction.shape = read_shape(in.shape());
    check(in.attrs_size() <= kMaxDims);
    std::copy(in.attrs().begin(), in.attrs().end(), instruction.attrs.values);
    instruction.inputs = read_indices(in.inputs(), program.instructions.size());
    check(in.input_index() >= -1 && in.input_index() < program.input_count);
    check((instruction.op != Op::parameter && instruction.op != Op::scalar) ||
          in.input_index() >= 0);
    instruction.input_index = in.input_index();
    instruction.constant = {in.constant_value(), in.constant_integer(), in.constant_is_integer()};
    check(in.has_body() == (instruction.op == Op::scan));
    if (in.has_body()) {
      check(in_range(in.body(), bodies.size()));
      instruction.body = bodies[static_cast<size_t>(in.body())];
    }
    if (in.has_location_of()) {
      check(in_range(in.location_of(), canonical.instructions.size()));
      instruction.location = canonical.instructions[static_cast<size_t>(in.location_of())].location;
    }
    program.instructions.push_back(std::move(instruction));
  }
  program.outputs = read_indices(record.outputs(), program.instructions.size());
  return program;
}

Plan read_plan(const cache::PlanRecord& record, const Program& program, const Bodies& bodies) {
  Plan plan;
  const size_t instructions = program.instructions.size();
  for (const cache::SlotRecord& in : record.slots()) {
    Slot slot;
    slot.dtype = read_dtype(in.dtype());
    slot.shape = read_shape(in.shape());
    check(in.instruction() >= -1 && in.instruction() < static_cast<int64_t>(instructions));
    check(in.input_index() >= -1 && in.input_index() < program.input_count);
    slot.instruction = in.instruction();
    slot.input_index = in.input_index();
    plan.slots.push_back(slot);
  }
  const size_t slots = plan.slots.size();
  for (const cache::StepRecord& in : record.steps()) {
    Step step;
    check(in.kind() <= static_cast<uint32_t>(Step::Kind::scan));
    step.kind = static_cast<Step::Kind>(in.kind());
    step.function = in.function();
    check(step.kind != Step::Kind::kernel || !step.function.empty());
    check(in.iterations() >= 0 && in.grain() >= 1);
    step.iterations = in.iterations();
    step.grain = in.grain();
    step.slots = read_indices(in.slots(), slots);
    check(in.byte_offsets_size() == 0 || in.byte_offsets_size() == in.slots_size());
    step.byte_offsets.assign(in.byte_offsets().begin(), in.byte_offsets().end());
    check(in.instruction() >= -1 && in.instruction() < static_cast<int64_t>(instructions));
    // Every step but a kernel computes one instruction from its slots.
    check(step.kind == Step::Kind::kernel || (in.instruction() >= 0 && !step.slots.empty()));
    step.instruction = in.instruction();
    step.written = read_indices(in.written(), slots);
    step.roots = read_indices(in.roots(), instructions);
    step.same_element_reads = read_indices(in.same_element_reads(), slots);
    step.can_fail = in.can_fail();
    check(in.transposed_inputs() <= 255);
    step.transposed_inputs = static_cast<uint8_t>(in.transposed_inputs());
    step.parts.assign(in.parts().begin(), in.parts().end());
    check(in.has_scan() == (step.kind == Step::Kind::scan));
    check(step.kind == Step::Kind::scan || step.parts.empty());
    if (step.kind != Step::Kind::kernel && step.kind != Step::Kind::scan) {
      // Input slots, the epilogue's operands, then the output slot
      // (run_plan reads them so).
      const Instruction& computed = program.instructions[static_cast<size_t>(step.instruction)];
      const int inputs = static_cast<int>(computed.inputs.size());
      int operands = 0;
      check(in.epilogue_size() % 3 == 0 && in.epilogue_size() <= 3 * ConvEpilogue::kMaxStages);
      check(in.epilogue_size() == 0 ||
            (step.kind == Step::Kind::library && computed.op == Op::conv));
      for (int k = 0; k < in.epilogue_size(); k += 3) {
        EpilogueStage stage;
        check(in.epilogue(k) >= 0 && in.epilogue(k) <= static_cast<int>(ConvEpilogue::Kind::silu));
        stage.kind = static_cast<ConvEpilogue::Kind>(in.epilogue(k));
        stage.value_first = in.epilogue(k + 1) != 0;
        stage.operand = in.epilogue(k + 2);
        const bool has_operand =
            stage.kind == ConvEpilogue::Kind::maximum || stage.kind == ConvEpilogue::Kind::minimum;
        if (!has_operand) {
          check(stage.operand == -1);  // relu, silu
        } else if (stage.operand >= 0) {
          check(stage.operand == inputs + operands);
          operands++;
        } else {
          check(stage.operand >= EpilogueStage::kConstantMinusZero && stage.operand < 0);
        }
        step.epilogue.push_back(stage);
      }
      check(step.slots.size() == static_cast<size_t>(inputs + operands + 1));
      check(step.kind != Step::Kind::matmul || step.slots.size() == 3);
    }
    if (in.has_scan()) {
      const cache::ScanPlanRecord& scan_record = in.scan();
      check(in_range(scan_record.body(), bodies.size()));
      auto scan = std::make_shared<ScanPlan>();
      scan->body = bodies[static_cast<size_t>(scan_record.body())];
      const ScanBody& body = *scan->body;
      const int inputs = body.carries + body.xs + body.captured;
      // The inputs, the packed value, then one slot per part (run_scan).
      check(step.slots.size() == static_cast<size_t>(inputs) + 1 + step.parts.size());
      for (int part : step.parts) check(part >= 0 && part < body.carries + body.ys);
      scan->program = read_program(scan_record.program(), program_from_scan_body(body), bodies);
      check(scan->program.input_count == inputs);
      check(scan->program.outputs.size() == static_cast<size_t>(body.carries + body.ys));
      scan->plan = read_plan(scan_record.plan(), scan->program, bodies);
      step.scan = std::move(scan);
    }
    plan.steps.push_back(std::move(step));
  }
  plan.outputs = read_indices(record.outputs(), slots);
  check(plan.outputs.size() == program.outputs.size());
  plan.kernel_count = record.kernel_count();
  plan.function_count = record.function_count();
  plan.summary = record.summary();
  plan.memory = plan_memory(plan);  // not stored: derived from the slots and steps
  return plan;
}

}  // namespace

uint64_t canonical_hash(const Program& canonical) {
  std::string bytes;
  bytes.reserve(canonical.instructions.size() * 128);
  put_program(bytes, canonical);
  return fnv1a_64(bytes.data(), bytes.size());
}

std::string serialize_plan(const Program& canonical, const Program& optimized, const Plan& plan) {
  const Bodies bodies = scan_bodies(canonical);
  cache::CachedPlan record;
  record.set_canonical_hash(canonical_hash(canonical));
  try {
    write_program(optimized, canonical, bodies, record.mutable_program());
    write_plan(plan, bodies, record.mutable_plan());
  } catch (const Error&) {
    return "";  // a plan we cannot express: stored without one, never loaded
  }
  return record.SerializeAsString();
}

bool deserialize_plan(const std::string& bytes, const Program& canonical, Program* optimized,
                      Plan* plan) {
  cache::CachedPlan record;
  if (!record.ParseFromString(bytes) || record.canonical_hash() != canonical_hash(canonical)) {
    return false;
  }
  try {
    const Bodies bodies = scan_bodies(canonical);
    Program program = read_program(record.program(), canonical, bodies);
    check(program.input_count == canonical.input_count);
    check(program.outputs.size() == canonical.outputs.size());
    Plan result = read_plan(record.plan(), program, bodies);
    *optimized = std::move(program);
    *plan = std::move(result);
    return true;
  } catch (const Damaged&) {
    return false;
  } catch (const Error&) {  // Shape::push_back past kMaxDims, checked above
    return false;
  }
}

}  // namespace lazylua::compiler
