// codegen_writer.h - private to codegen*.cpp: the writer of one kernel's
// C function, shared by the elementwise, reduction and softmax forms.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/kernel_graph.h"

namespace lazylua::compiler {

// Elements per iteration of a kernel's outer loop (the unit the executor
// hands to threads) and the fewest elements worth a thread.
constexpr int64_t kChunk = 16384;
constexpr int64_t kGrainElements = 32768;
// Elements per partial result of a reduction over everything.
constexpr int64_t kReduceChunk = 65536;
// Values folded at a time by the vectorized folds (a stack buffer).
constexpr int64_t kFoldBlock = 1024;
// The most outputs a column reduction accumulates at once.
constexpr int64_t kColumnBlock = 2048;
// Tiles of transposing loops: kTile values along the transposed dim (512
// contiguous bytes of f32 per source row: page walks dominate otherwise) by
// kTileRow along the written rows. Measured at 4096 x 4096 f32: 9x faster
// than rows, 3.5x a plain copy (16 x 64 tiles: 2x slower than these).
// Dims shorter than kTileMinimum are not worth tiles.
constexpr int64_t kTile = 128;
constexpr int64_t kTileRow = 8;
constexpr int64_t kTileMinimum = 16;

// One dim of a kernel's collapsed index space: adjacent kernel dims that
// every access steps through as one (members, outermost first).
struct LoopDim {
  int64_t extent = 1;
  bool reduced = false;
  std::vector<int> members;
};

class KernelWriter {
 public:
  KernelWriter(const Program& program, const std::vector<int>& slot_of,
               const std::vector<Layout>& layouts, Plan& plan, std::string name_prefix);

  void elementwise(const std::vector<int>& roots);
  void reduce(int instruction);
  void softmax(int instruction);
  void arg_reduce(int instruction);  // codegen_lines.cpp
  void cumsum(int instruction);      // codegen_lines.cpp
  void scatter(int instruction);     // codegen_lines.cpp
  void assemble(int instruction);
  void nothing(const std::vector<int>& roots);

 private:
  // ---- one kernel ----
  void start(const Shape& dims);
  // Argument index of a slot (added on first use); written ones are not const.
  int argument(int slot, bool written);
  std::string pointer(int slot, bool written);
  std::string pointer_of(int instruction, bool written);
  // Collapses the kernel's dims over the accesses of `values` (their reads)
  // and `writes`; `reduced` marks dims reduced; `keep_reduced` keeps a
  // reduced dim alone (and even of extent 1).
  void collapse(const std::vector<int>& values, const std::vector<Affine>& writes,
                const std::vector<bool>& reduced, bool keep_reduced);
  // The coefficient of collapsed dim g in an affine over kernel dims.
  int64_t coefficient(const Affine& affine, int g) const;
  // C expression: affine's constant plus its odometer terms (i<g>).
  std::string base_of(const Affine& affine) const;
  // C expression: base plus its loop-variable terms.
  std::string index_of(const Affine& affine, const std::string& base) const;
  // Statements computing the values (and every node they need): invariant
  // ones go to the prologue, the rest are returned. `bases` receives the
  // base offsets of the reads they make.
  std::string emit_values(const std::vector<int>& values, std::string* bases);
  std::string node_code(int id);
  std::string clamp_code(int id);
  std::string division_code(int id, BinaryOp op, DType compute, const std::string& a,
                            const std::string& b);
  std::string gather_code(int id);
  std::string scatter_code(int id);
  // Sets the error flag of `instruction` where `condition` (a C expression) holds.
  std::string flag(int instruction, KernelError error, const std::string& condition);
  // Collapses the dims of a kernel over lines along `dim` (codegen_lines.cpp).
  void line_dims(int value, const Affine& write, int dim, const std::string& inner);
  // Code visiting positions [begin, end) of collapsed dims [first, last]
  // in row-major order; `row` runs for each run of the last dim [x0, x1).
  std::string walk(int first, int last, const std::string& begin, const std::string& end,
                   const std::string& bases, const std::string& row) const;
  // `movable_write`: the write's constant offset may go into the target's
  // pointer (Step::byte_offsets) rather than into the code.
  void loop(const std::vector<int>& values, const std::vector<int>& targets, const Affine& write,
            int instruction, bool movable_write = false);
  void move_read_pointers(const std::vector<int>& values, int written);
  int transposed_dim(const std::vector<int>& values) const;
  void finish_tiled(const std::string& bases, const std::string& body,
                    const std::vector<int>& targets, const std::vector<std::string>& results,
                    const Affine& write, int instruction);
  // Adds the function and its step.
  void finish(const std::string& body, int64_t iterations, int64_t grain, int instruction);

  const Program& program_;
  const std::vector<int>& slot_of_;
  const std::vector<Layout>& layouts_;
  Plan& plan_;

  std::unique_ptr<KernelGraph> graph_;
  std::vector<LoopDim> dims_;
  std::vector<std::string> loop_variable_;  // per collapsed dim; empty: odometer i<g>
  std::vector<int> arguments_;
  std::vector<bool> written_;
  std::vector<int64_t> byte_offsets_;  // per argument: Step::byte_offsets
  std::vector<bool> emitted_;
  // Instructions whose errors the kernel checks (an error flag each), and
  // the error each reports.
  std::map<int, KernelError> checked_;
  std::string prologue_;
  std::vector<int> same_element_reads_;                             // Step::same_element_reads
  std::string name_prefix_;                                         // of the kernels' C names
  std::unordered_map<std::string, std::string> functions_by_text_;  // C text -> function
};

}  // namespace lazylua::compiler
