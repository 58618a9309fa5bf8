// einsum.cpp - Einstein summation (torch.einsum), lowered to the
// differentiable ops of autograd.h so it is lazy and has gradients:
//   1. a label repeated within an operand takes the diagonal ('ii->i');
//   2. every dim expands to its label's size (size 1 broadcasts);
//   3. labels no one else needs are summed out;
//   4. operands combine left to right as one batched matmul each: shared
//      labels still needed are the batch, shared labels no longer needed are
//      contracted, the others are the rows and the columns;
//   5. the result is permuted into the output's order.
#include <algorithm>
#include <array>

#include "shape_ops.h"

namespace lazylua::shape_ops {
namespace {

// Labels: 'A'-'Z' are 0-25, 'a'-'z' 26-51 (so sorting them sorts the
// letters as ASCII does); the dims an ellipsis stands for are 52 + i, the
// ellipsis dims right-aligned across operands as broadcasting aligns them.
constexpr int kLetterLabels = 52;
constexpr int kEllipsis = -1;

char label_letter(int label) {
  return static_cast<char>(label < 26 ? 'A' + label : 'a' + label - 26);
}

std::string label_name(int label) {
  if (label >= kLetterLabels) return "...";
  return std::string(1, label_letter(label));
}

// One term of the equation: its labels, with kEllipsis where "..." was.
std::vector<int> parse_term(const std::string& term, const std::string& equation) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); i++) {
    const char c = term[i];
    if (c >= 'a' && c <= 'z') {
      labels.push_back(26 + c - 'a');
    } else if (c >= 'A' && c <= 'Z') {
      labels.push_back(c - 'A');
    } else if (c == '.') {
      if (term.compare(i, 3, "...") != 0) {
        fail("einsum: '.' must be part of an ellipsis '...' in '{}'", equation);
      }
      if (ellipsis) fail("einsum: more than one '...' in the term '{}' of '{}'", term, equation);
      ellipsis = true;
      labels.push_back(kEllipsis);
      i += 2;
    } else {
      fail("einsum: invalid character '{}' in '{}' (subscripts are letters, ',', '->' and '...')",
           c, equation);
    }
  }
  return labels;
}

std::vector<std::string> split_terms(const std::string& text) {
  std::vector<std::string> terms(1);
  for (char c : text) {
    if (c == ',') {
      terms.emplace_back();
    } else {
      terms.back().push_back(c);
    }
  }
  return terms;
}

// A tensor with one label per dim.
struct Labeled {
  Tensor value;
  std::vector<int> labels;
};

bool contains(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

int position_of(const std::vector<int>& labels, int label) {
  return static_cast<int>(std::find(labels.begin(), labels.end(), label) - labels.begin());
}

// Sums out every label of x not in `keep` (highest dim first, so the
// positions of the others stay valid).
void sum_out_unneeded(Labeled& x, const std::vector<int>& keep) {
  for (int d = static_cast<int>(x.labels.size()) - 1; d >= 0; d--) {
    if (contains(keep, x.labels[d])) continue;
    x.value = autograd::reduce(ReduceOp::sum, x.value, d, false);
    x.labels.erase(x.labels.begin() + d);
  }
}

// x permuted so its labels are `order` (the same set).
Tensor arranged(const Labeled& x, const std::vector<int>& order) {
  std::vector<int> permutation;
  bool identity = true;
  for (size_t i = 0; i < order.size(); i++) {
    permutation.push_back(position_of(x.labels, order[i]));
    identity = identity && permutation.back() == static_cast<int>(i);
  }
  return identity ? x.value : permuted(x.value, permutation);
}

int64_t product_of(const std::vector<int>& labels, const std::array<int64_t, 128>& sizes) {
  int64_t product = 1;
  for (int label : labels) product *= sizes[label];
  return product;
}

// a and b (each label once) as one batched matmul; the result's labels are
// batch, a's own, b's own.
Labeled multiply(const Labeled& a, const Labeled& b, const std::vector<int>& needed_later,
                 const std::array<int64_t, 128>& sizes) {
  std::vector<int> batch, contracted, rows, cols;
  for (int label : a.labels) {
    if (!contains(b.labels, label)) {
      rows.push_back(label);
    } else if (contains(needed_later, label)) {
      batch.push_back(label);
    } else {
      contracted.push_back(label);
    }
  }
  for (int label : b.labels) {
    if (!contains(a.labels, label)) cols.push_back(label);
  }
  auto concat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  const int64_t batch_size = product_of(batch, sizes), inner = product_of(contracted, sizes);
  const Shape left_shape{batch_size, product_of(rows, sizes), inner};
  const Shape right_shape{batch_size, inner, product_of(cols, sizes)};
  const DType type = promote(a.value->dtype, b.value->dtype);
  auto as_type = [type](const Tensor& t) { return t->dtype == type ? t : autograd::cast(t, type); };
  const Tensor left = reshaped(as_type(arranged(a, concat(batch, rows, contracted))), left_shape);
  const Tensor right = reshaped(as_type(arranged(b, concat(batch, contracted, cols))), right_shape);
  Labeled out;
  out.labels = concat(batch, rows, cols);
  if (out.labels.size() > static_cast<size_t>(kMaxDims)) {
    fail("einsum: an intermediate result would have {} dimensions (at most {})", out.labels.size(),
         kMaxDims);
  }
  Shape out_shape;
  for (int label : out.labels) out_shape.push_back(sizes[label]);
  out.value = reshaped(autograd::matmul(left, right), out_shape);
  return out;
}

}  // namespace

Tensor einsum(const std::string& text, const std::vector<Tensor>& operands) {
  std::string equation;
  for (char c : text) {
    if (c != ' ') equation.push_back(c);
  }
  if (operands.empty()) fail("einsum: expects at least one operand after the equation");
  const size_t arrow = equation.find("->");
  const bool explicit_output = arrow != std::string::npos;
  const std::vector<std::string> input_terms =
      split_terms(explicit_output ? equation.substr(0, arrow) : equation);
  if (input_terms.size() != operands.size()) {
    fail("einsum: '{}' has {} input terms but {} operands were given", text, input_terms.size(),
         operands.size());
  }

  // Labels of every operand, with each ellipsis expanded to its dims.
  std::vector<std::vector<int>> parsed;
  int ellipsis_dims = 0;
  for (size_t k = 0; k < operands.size(); k++) {
    parsed.push_back(parse_term(input_terms[k], text));
    const int rank = operands[k]->shape.rank();
    const int named = static_cast<int>(parsed[k].size()) - (contains(parsed[k], kEllipsis) ? 1 : 0);
    if (contains(parsed[k], kEllipsis) ? named > rank : named != rank) {
      fail("einsum: operand {} has {} dimensions (shape {}) but the term '{}' names {}", k + 1,
           rank, shape_string(operands[k]->shape), input_terms[k], named);
    }
    if (contains(parsed[k], kEllipsis)) ellipsis_dims = std::max(ellipsis_dims, rank - named);
  }
  std::vector<Labeled> inputs;
  for (size_t k = 0; k < operands.size(); k++) {
    Labeled x{operands[k], {}};
    const int rank = operands[k]->shape.rank();
    for (int label : parsed[k]) {
      if (label != kEllipsis) {
        x.labels.push_back(label);
        continue;
      }
      const int covered = rank - static_cast<int>(parsed[k].size()) + 1;
      for (int i = ellipsis_dims - covered; i < ellipsis_dims; i++) {
        x.labels.push_back(kLetterLabels + i);
      }
    }
    inputs.push_back(std::move(x));
  }

  // The output's labels: given, or (implicit) the ellipsis dims and then the
  // letters that appear once, in order.
  std::array<int, 128> count{};
  for (const Labeled& x : inputs) {
    for (int label : x.labels) count[label]++;
  }
  std::vector<int> output;
  if (explicit_output) {
    const std::string output_term = equation.substr(arrow + 2);
    if (output_term.find("->") != std::string::npos || output_term.find(',') != std::string::npos) {
      fail("einsum: the output of '{}' must be one term", text);
    }
    for (int label : parse_term(output_term, text)) {
      if (label == kEllipsis) {
        for (int i = 0; i < ellipsis_dims; i++) output.push_back(kLetterLabels + i);
        continue;
      }
      if (count[label] == 0) {
        fail("einsum: output subscript '{}' of '{}' appears in no input", label_letter(label),
             text);
      }
      if (contains(output, label)) {
        fail("einsum: output subscript '{}' of '{}' appears more than once", label_letter(label),
             text);
      }
      output.push_back(label);
    }
  } else {
    for (int i = 0; i < ellipsis_dims; i++) output.push_back(kLetterLabels + i);
    for (int label = 0; label < kLetterLabels; label++) {
      if (count[label] == 1) output.push_back(label);
    }
  }

  // Each label's size: all its dims agree, or are 1 (broadcast).
  std::array<int64_t, 128> sizes;
  sizes.fill(-1);
  for (size_t k = 0; k < inputs.size(); k++) {
    for (size_t d = 0; d < inputs[k].labels.size(); d++) {
      const int label = inputs[k].labels[d];
      const int64_t extent = inputs[k].value->shape[static_cast<int>(d)];
      if (sizes[label] == -1 || sizes[label] == 1) {
        sizes[label] = extent;
      } else if (extent != 1 && extent != sizes[label]) {
        fail("einsum: subscript '{}' has size {} in operand {} but {} elsewhere", label_name(label),
             extent, k + 1, sizes[label]);
      }
    }
  }

  // 1-3: diagonals, broadcasts, and sums of what only this operand has.
  for (size_t k = 0; k < inputs.size(); k++) {
    Labeled& x = inputs[k];
    for (size_t d = 0; d < x.labels.size(); d++) {
      const int label = x.labels[d];
      for (size_t e = x.labels.size() - 1; e > d; e--) {
        if (x.labels[e] != label) continue;
        const Shape& shape = x.value->shape;
        if (shape[static_cast<int>(d)] != shape[static_cast<int>(e)]) {
          fail("einsum: subscript '{}' is repeated in operand {} over dims of sizes {} and {}",
               label_name(label), k + 1, shape[static_cast<int>(d)], shape[static_cast<int>(e)]);
        }
        x.value = diagonal(x.value, 0, static_cast<int>(d), static_cast<int>(e));
        x.labels.erase(x.labels.begin() + static_cast<std::ptrdiff_t>(e));
        x.labels.erase(x.labels.begin() + static_cast<std::ptrdiff_t>(d));
        x.labels.push_back(label);
        d = static_cast<size_t>(-1);  // the dims moved: look again from the start
        break;
      }
    }
    Shape full;
    for (int label : x.labels) full.push_back(sizes[label]);
    if (full != x.value->shape) x.value = autograd::expand(x.value, full);
  }
  for (size_t k = 0; k < inputs.size(); k++) {
    std::vector<int> keep = output;
    for (size_t j = 0; j < inputs.size(); j++) {
      if (j != k) keep.insert(keep.end(), inputs[j].labels.begin(), inputs[j].labels.end());
    }
    sum_out_unneeded(inputs[k], keep);
  }

  // 4: left to right, one matmul per operand.
  Labeled result = inputs[0];
  for (size_t k = 1; k < inputs.size(); k++) {
    std::vector<int> needed_later = output;
    for (size_t j = k + 1; j < inputs.size(); j++) {
      needed_later.insert(needed_later.end(), inputs[j].labels.begin(), inputs[j].labels.end());
    }
    std::vector<int> keep = needed_later;
    keep.insert(keep.end(), inputs[k].labels.begin(), inputs[k].labels.end());
    sum_out_unneeded(result, keep);
    keep = needed_later;
    keep.insert(keep.end(), result.labels.begin(), result.labels.end());
    sum_out_unneeded(inputs[k], keep);
    result = multiply(result, inputs[k], needed_later, sizes);
  }

  // 5: what is left of the output's labels, in its order.
  sum_out_unneeded(result, output);
  const Tensor out = arranged(result, output);
  return out.get() == operands[0].get() ? autograd::clone(out) : out;
}

}  // namespace lazylua::shape_ops
