// tensor_format.cpp - how tensors print (Torch7 style).
//
// Printing happens in three steps: plan which indices of each dim are shown
// (all, or the edges of a big tensor), turn exactly those elements into text
// with one format shared by the whole tensor, then lay the text out as rows,
// column blocks and 2-D slices. Only shown elements are ever read, so
// printing a huge tensor (or a huge broadcast view) costs what its output
// costs.
#include "tensor_format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

namespace lazylua {
namespace {

// Torch7 splits matrices wider than this into "Columns a to b" blocks.
constexpr size_t kLineWidth = 80;
// Past this many elements the middle of every long dim is elided (PyTorch's
// summarization threshold), keeping kEdgeItems at each end.
constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

// The cell that stands for elided columns; the leading space is the sign
// slot every cell has (see Cells::width).
constexpr std::string_view kEllipsisCell = " ...";

constexpr size_t kNoGap = std::numeric_limits<size_t>::max();

// Which indices of one dim are shown: all of them, or (when summarizing) the
// first and last kEdgeItems with "..." before position `gap_before`.
struct DimPlan {
  std::vector<int64_t> indices;
  size_t gap_before = kNoGap;
};

DimPlan plan_dim(int64_t extent, bool summarize) {
  DimPlan plan;
  if (summarize && extent > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; i++) plan.indices.push_back(i);
    plan.gap_before = static_cast<size_t>(kEdgeItems);
    for (int64_t i = extent - kEdgeItems; i < extent; i++) plan.indices.push_back(i);
  } else {
    for (int64_t i = 0; i < extent; i++) plan.indices.push_back(i);
  }
  return plan;
}

// Element offsets (relative to data<T>()) of the shown elements, row-major
// over the plans: the order the cells are stored in.
std::vector<int64_t> shown_offsets(const Array& a, const std::vector<DimPlan>& plans) {
  size_t count = 1;
  for (const DimPlan& plan : plans) count *= plan.indices.size();
  std::vector<int64_t> offsets;
  offsets.reserve(count);
  std::vector<size_t> position(plans.size(), 0);
  for (size_t n = 0; n < count; n++) {
    int64_t offset = 0;
    for (size_t d = 0; d < plans.size(); d++) {
      offset += plans[d].indices[position[d]] * a.strides[static_cast<int>(d)];
    }
    offsets.push_back(offset);
    for (size_t d = plans.size(); d-- > 0;) {
      if (++position[d] < plans[d].indices.size()) break;
      position[d] = 0;
    }
  }
  return offsets;
}

// The one format every float of a tensor is printed with (Torch7's rules):
// integers when every finite value is one, else 4 decimals, with a common
// power-of-ten factor when the magnitudes are far from 1, or scientific
// notation when they span more than about five orders of magnitude. Unlike
// Torch7, which factors out a scale only when the largest value is < 0.1 or
// >= 1e5, we also do so when the smallest nonzero value is below 1e-4: with
// 4 decimals it would otherwise print as 0.0000.
struct FloatStyle {
  enum class Kind { integer, fixed, scientific };
  Kind kind = Kind::integer;
  int scale_exponent = 0;  // fixed only: values are printed divided by 10^this
};

// A decimal exponent in Torch7's convention: 1 for [1, 10), 0 for [0.1, 1).
int decimal_exponent(double magnitude) {
  return static_cast<int>(std::floor(std::log10(magnitude))) + 1;
}

FloatStyle choose_float_style(const std::vector<double>& values, bool allow_scale) {
  bool all_integers = true;
  double largest = 0, smallest_nonzero = std::numeric_limits<double>::infinity();
  for (double value : values) {
    if (!std::isfinite(value)) continue;  // nan and inf print as words
    const double magnitude = std::fabs(value);
    if (magnitude != std::floor(magnitude)) all_integers = false;
    largest = std::max(largest, magnitude);
    if (magnitude > 0) smallest_nonzero = std::min(smallest_nonzero, magnitude);
  }
  // Past 1e8 integers lose their readability (and f32 its exactness).
  if (all_integers && largest < 1e8) return {FloatStyle::Kind::integer};
  // From here some finite value is nonzero, so both exponents are defined.
  const int exponent_max = decimal_exponent(largest);
  const int exponent_min = decimal_exponent(smallest_nonzero);
  if (exponent_max - exponent_min > 4) return {FloatStyle::Kind::scientific};
  if (largest >= 1e5 || smallest_nonzero < 1e-4) {
    // A lone value gains nothing from a factor on its own line, and a factor
    // near the ends of the double range would itself under- or overflow.
    if (!allow_scale || std::abs(exponent_max) > 300) return {FloatStyle::Kind::scientific};
    // Leaves the largest scaled magnitude in [1, 10).
    return {FloatStyle::Kind::fixed, exponent_max - 1};
  }
  return {FloatStyle::Kind::fixed};
}

// Adding 0.0 turns -0 into 0, so a negative zero prints as "0" (or
// "0.0000") everywhere: a sign on zero confuses more than it informs.
std::string format_float(double value, const FloatStyle& style, double scale) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  switch (style.kind) {
    case FloatStyle::Kind::integer:
      return fmt::format("{}", static_cast<int64_t>(value));
    case FloatStyle::Kind::fixed:
      return fmt::format("{:.4f}", value / scale + 0.0);
    case FloatStyle::Kind::scientific:
      break;
  }
  return fmt::format("{:.4e}", value + 0.0);
}

// The shown elements as text, in the order of shown_offsets().
struct Cells {
  std::vector<std::string> text;
  std::string scale_header;  // e.g. "1e-05 *"; empty when there is no factor
  // Every cell is right-aligned to this width: the widest text without its
  // minus sign, plus one slot for a sign. Positive cells thus start with a
  // space, and with the one-space separator columns sit two spaces apart.
  size_t width = 0;
};

template <typename T>
Cells make_cells(const Array& a, const std::vector<int64_t>& offsets, bool allow_scale) {
  Cells cells;
  cells.text.reserve(offsets.size());
  if constexpr (std::is_same_v<T, bool>) {
    // Read bytes, not bools: a stray byte value must print, not be UB.
    const auto* data = static_cast<const uint8_t*>(a.raw_data());
    for (int64_t offset : offsets) cells.text.push_back(data[offset] ? "true" : "false");
  } else if constexpr (std::is_integral_v<T>) {
    const T* data = a.data<T>();
    for (int64_t offset : offsets) cells.text.push_back(fmt::format("{}", data[offset]));
  } else {
    const T* data = a.data<T>();
    std::vector<double> values;
    values.reserve(offsets.size());
    for (int64_t offset : offsets) values.push_back(static_cast<double>(data[offset]));
    const FloatStyle style = choose_float_style(values, allow_scale);
    // Always in e-notation ("1e+05 *", not %g's "100000 *"), so the header
    // reads as a power of ten at a glance.
    if (style.scale_exponent != 0) {
      cells.scale_header = fmt::format("1e{:+03d} *", style.scale_exponent);
    }
    const double scale = std::pow(10.0, style.scale_exponent);
    for (double value : values) cells.text.push_back(format_float(value, style, scale));
  }
  for (const std::string& text : cells.text) {
    const size_t unsigned_length = text.size() - (text.starts_with('-') ? 1 : 0);
    cells.width = std::max(cells.width, unsigned_length + 1);
  }
  return cells;
}

void append_cell(std::string& out, const std::string& text, size_t width) {
  if (text.size() < width) out.append(width - text.size(), ' ');
  out += text;
}

// One printed column: a shown column's position in the plan, or the gap.
constexpr size_t kGapColumn = kNoGap;

// Greedy split of the columns into blocks that fit kLineWidth; a block
// always holds at least one real column so that progress is guaranteed.
std::vector<std::pair<size_t, size_t>> column_blocks(const std::vector<size_t>& columns,
                                                     size_t cell_width, size_t indent) {
  std::vector<std::pair<size_t, size_t>> blocks;
  size_t start = 0;
  while (start < columns.size()) {
    size_t end = start, line = indent;
    bool has_real_column = false;
    while (end < columns.size()) {
      const bool gap = columns[end] == kGapColumn;
      const size_t added = (end > start ? 1 : 0) + (gap ? kEllipsisCell.size() : cell_width);
      if (has_real_column && line + added > kLineWidth) break;
      line += added;
      has_real_column = has_real_column || !gap;
      end++;
    }
    blocks.emplace_back(start, end);
    start = end;
  }
  return blocks;
}

// Appends one matrix whose cells start at `first_cell`, row-major over the
// shown rows and columns; every line is prefixed with `indent`.
void append_matrix(std::string& out, const Cells& cells, size_t first_cell, const DimPlan& rows,
                   const DimPlan& cols, const std::string& indent) {
  std::vector<size_t> columns;
  for (size_t c = 0; c < cols.indices.size(); c++) {
    if (c == cols.gap_before) columns.push_back(kGapColumn);
    columns.push_back(c);
  }
  const auto blocks = column_blocks(columns, cells.width, indent.size());
  for (size_t b = 0; b < blocks.size(); b++) {
    const auto [start, end] = blocks[b];
    if (b > 0) out += '\n';
    if (blocks.size() > 1) {
      // 1-based, real column numbers of the first and last shown column.
      size_t first = start, last = end - 1;
      if (columns[first] == kGapColumn) first++;
      if (columns[last] == kGapColumn) last--;
      out += indent;
      out += fmt::format("Columns {} to {}\n", cols.indices[columns[first]] + 1,
                         cols.indices[columns[last]] + 1);
    }
    if (!cells.scale_header.empty()) out += indent + cells.scale_header + '\n';
    for (size_t r = 0; r < rows.indices.size(); r++) {
      if (r == rows.gap_before) out += indent + std::string(kEllipsisCell) + '\n';
      out += indent;
      for (size_t i = start; i < end; i++) {
        if (i > start) out += ' ';
        if (columns[i] == kGapColumn) {
          out += kEllipsisCell;
        } else {
          append_cell(out, cells.text[first_cell + r * cols.indices.size() + columns[i]],
                      cells.width);
        }
      }
      out += '\n';
    }
  }
}

// Rank >= 3: every 2-D slice under a "(i,j,.,.) = " header (1-based, with
// Torch7's trailing space), a blank line between slices, "..." for slices
// elided in a summarized tensor.
void append_slices(std::string& out, const Cells& cells, const std::vector<DimPlan>& plans) {
  const size_t leading = plans.size() - 2;
  const DimPlan& rows = plans[leading];
  const DimPlan& cols = plans[leading + 1];
  const size_t slice_cells = rows.indices.size() * cols.indices.size();
  size_t slice_count = 1;
  for (size_t d = 0; d < leading; d++) slice_count *= plans[d].indices.size();

  std::vector<size_t> position(leading, 0);
  for (size_t slice = 0; slice < slice_count; slice++) {
    if (slice > 0) out += '\n';
    out += '(';
    for (size_t d = 0; d < leading; d++) {
      out += fmt::format("{},", plans[d].indices[position[d]] + 1);
    }
    out += ".,.) = \n";
    append_matrix(out, cells, slice * slice_cells, rows, cols, " ");

    // Advance the odometer; only the one dim that steps (not wraps) can
    // cross an elided run.
    for (size_t d = leading; d-- > 0;) {
      if (++position[d] < plans[d].indices.size()) {
        if (position[d] == plans[d].gap_before) out += "\n...\n";
        break;
      }
      position[d] = 0;
    }
  }
}

}  // namespace

std::string format_tensor(const Array& a) {
  const std::string dtype = dtype_name(a.dtype);
  const int64_t count = a.numel();
  if (count == 0) return fmt::format("[{} tensor of size {}]", dtype, shape_footer_string(a.shape));
  if (!a.defined()) return fmt::format("[{} tensor without data]", dtype);

  const bool summarize = count > kSummarizeAbove;
  std::vector<DimPlan> plans;
  for (int d = 0; d < a.rank(); d++) plans.push_back(plan_dim(a.shape[d], summarize));
  const std::vector<int64_t> offsets = shown_offsets(a, plans);
  const bool allow_scale = a.rank() > 0;
  const Cells cells = visit_dtype(
      a.dtype, [&](auto tag) { return make_cells<decltype(tag)>(a, offsets, allow_scale); });

  std::string out;
  if (a.rank() == 0) {
    append_cell(out, cells.text[0], cells.width);
    return out + fmt::format("\n[{} tensor with no dimension]", dtype);
  }
  if (a.rank() == 1) {
    append_matrix(out, cells, 0, plan_dim(1, false), plans[0], "");
  } else if (a.rank() == 2) {
    append_matrix(out, cells, 0, plans[0], plans[1], "");
  } else {
    append_slices(out, cells, plans);
  }
  return out + fmt::format("[{} tensor of size {}]", dtype, shape_footer_string(a.shape));
}

}  // namespace lazylua
