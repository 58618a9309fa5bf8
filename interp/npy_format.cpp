// npy_format.cpp - NumPy's .npy format: a magic string, a version, a header
// that is a Python dict literal ({'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }) and the raw elements. The header is parsed by a small
// recursive reader, never evaluated; every size it states is checked against
// the bytes actually there before anything is allocated.
#include "interp/npy_format.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "tensor/error.h"

namespace lazylua::npy {
namespace {

static_assert(std::endian::native == std::endian::little,
              ".npy files are written little-endian: add byte swapping for this target");

constexpr std::string_view kMagic = "\x93NUMPY";

// What the header's 'descr' says: how an element is stored, and which
// lazylua dtype it is read as.
enum class Stored { f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, boolean };

struct ElementType {
  Stored stored;
  int size;         // bytes per element in the file
  bool big_endian;  // bytes to swap on reading
  DType dtype;      // what lazylua makes of it
};

struct Header {
  ElementType element;
  bool fortran_order = false;
  Shape shape;
};

// A short excerpt of the header for messages: printable ASCII only.
std::string excerpt(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < 60; i++) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out +=
        c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  if (text.size() > 60) out += "...";
  return out;
}

// Reads the dict literal. Each parse_* throws an Error naming the source.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const char* function, const std::string& source)
      : text_(text), function_(function), source_(source) {}

  Header parse() {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<Shape> shape;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[') {
          fail("{}: {} holds a structured dtype ({}); lazylua reads arrays of numbers and bools",
               function_, source_, excerpt(text_.substr(position_)));
        }
        descr = parse_string();
      } else if (key == "fortran_order") {
        fortran_order = parse_boolean();
      } else if (key == "shape") {
        shape = parse_shape();
      } else {
        bad(fmt::format("an unknown key '{}'", excerpt(key)));
      }
      skip_space();
      if (peek() == ',') {
        position_++;
        continue;
      }
      skip_space();
      if (peek() != '}') bad("',' or '}'");
    }
    position_++;
    skip_space();
    if (position_ != text_.size()) bad("the end of the header after '}'");
    if (!descr || !fortran_order || !shape) {
      fail("{}: {} has a header without {} (it needs descr, fortran_order and shape)", function_,
           source_,
           !descr           ? "'descr'"
           : !fortran_order ? "'fortran_order'"
                            : "'shape'");
    }
    return Header{element_type(*descr), *fortran_order, *shape};
  }

 private:
  [[noreturn]] void bad(const std::string& expected) {
    fail("{}: {} has a header that does not parse: expected {} at byte {} of '{}'", function_,
         source_, expected, position_, excerpt(text_));
  }
  char peek() const { return position_ < text_.size() ? text_[position_] : '\0'; }
  void skip_space() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\n' ||
                                        text_[position_] == '\t' || text_[position_] == '\r')) {
      position_++;
    }
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(fmt::format("'{}'", c));
    position_++;
  }

  std::string parse_string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') bad("a quoted string");
    const size_t end = text_.find(quote, position_ + 1);
    if (end == std::string_view::npos) bad("the end of a string");
    std::string value(text_.substr(position_ + 1, end - position_ - 1));
    position_ = end + 1;
    return value;
  }

  bool parse_boolean() {
    if (text_.substr(position_, 4) == "True") {
      position_ += 4;
      return true;
    }
    if (text_.substr(position_, 5) == "False") {
      position_ += 5;
      return false;
    }
    bad("True or False");
  }

  Shape parse_shape() {
    expect('(');
    std::vector<int64_t> extents;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      int64_t extent = 0;
      const size_t start = position_;
      while (peek() >= '0' && peek() <= '9') {
        if (__builtin_mul_overflow(extent, 10, &extent) ||
            __builtin_add_overflow(extent, peek() - '0', &extent)) {
          fail("{}: {} has a shape extent too large for a tensor ('{}')", function_, source_,
               excerpt(text_.substr(start, 30)));
        }
        position_++;
      }
      if (position_ == start) bad("a non-negative integer in the shape");
      if (peek() == 'L') position_++;  // Python 2 wrote long integers as 3L
      extents.push_back(extent);
      skip_space();
      if (peek() == ',') {
        position_++;
      } else if (peek() != ')') {
        bad("',' or ')' in the shape");
      }
    }
    position_++;
    if (extents.size() > static_cast<size_t>(kMaxDims)) {
      fail("{}: {} holds an array of {} dimensions; tensors have at most {}", function_, source_,
           extents.size(), kMaxDims);
    }
    Shape shape;
    for (const int64_t extent : extents) {
      if (extent > kMaxElements) {
        fail("{}: {} has a shape extent of {}, more than a tensor can hold", function_, source_,
             extent);
      }
      shape.push_back(extent);
    }
    return shape;
  }

  ElementType element_type(const std::string& descr) {
    if (descr.size() < 2) unsupported(descr);
    const char order = descr[0];
    if (order != '<' && order != '>' && order != '|' && order != '=') unsupported(descr);
    const std::string_view code = std::string_view(descr).substr(1);
    struct Row {
      std::string_view code;
      Stored stored;
      int size;
      DType dtype;
    };
    static constexpr Row kRows[] = {
        {"f2", Stored::f16, 2, DType::f32}, {"f4", Stored::f32, 4, DType::f32},
        {"f8", Stored::f64, 8, DType::f64}, {"i1", Stored::i8, 1, DType::i32},
        {"i2", Stored::i16, 2, DType::i32}, {"i4", Stored::i32, 4, DType::i32},
        {"i8", Stored::i64, 8, DType::i64}, {"u1", Stored::u8, 1, DType::i32},
        {"u2", Stored::u16, 2, DType::i32}, {"u4", Stored::u32, 4, DType::i64},
        {"u8", Stored::u64, 8, DType::i64}, {"b1", Stored::boolean, 1, DType::boolean},
    };
    for (const Row& row : kRows) {
      if (row.code != code) continue;
      // '|' (byte order not applicable) only makes sense for one byte.
      if (order == '|' && row.size != 1) unsupported(descr);
      return ElementType{row.stored, row.size, order == '>' && row.size > 1, row.dtype};
    }
    unsupported(descr);
  }

  [[noreturn]] void unsupported(const std::string& descr) {
    const char kind = descr.size() >= 2 ? descr[1] : '?';
    const char* what = kind == 'c'                  ? "complex numbers"
                       : kind == 'O'                ? "Python objects"
                       : kind == 'U' || kind == 'S' ? "strings"
                       : kind == 'M' || kind == 'm' ? "dates or times"
                       : kind == 'V'                ? "raw or structured records"
                                                    : "an element type lazylua does not read";
    fail(
        "{}: {} holds {} (dtype '{}'); lazylua reads f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1 "
        "(little- or big-endian)",
        function_, source_, what, excerpt(descr));
  }

  std::string_view text_;
  const char* function_;
  const std::string& source_;
  size_t position_ = 0;
};

template <typename Unsigned>
Unsigned load_unsigned(const uint8_t* bytes, bool swap) {
  Unsigned value;
  std::memcpy(&value, bytes, sizeof value);
  if (!swap) return value;
  if constexpr (sizeof(Unsigned) == 2) return __builtin_bswap16(value);
  if constexpr (sizeof(Unsigned) == 4) return __builtin_bswap32(value);
  if constexpr (sizeof(Unsigned) == 8) return __builtin_bswap64(value);
  return value;
}

// Element i of the file's data as the C++ type Target.
template <typename Target>
void convert_elements(const uint8_t* in, int64_t count, const ElementType& element, Target* out,
                      const char* function, const std::string& source) {
  const bool swap = element.big_endian;
  const size_t size = static_cast<size_t>(element.size);
  for (int64_t i = 0; i < count; i++) {
    const uint8_t* bytes = in + static_cast<size_t>(i) * size;
    switch (element.stored) {
      case Stored::boolean:
        out[i] = static_cast<Target>(bytes[0] != 0);  // NumPy reads any non-zero byte as True
        break;
      case Stored::u8:
        out[i] = static_cast<Target>(bytes[0]);
        break;
      case Stored::i8:
        out[i] = static_cast<Target>(static_cast<int8_t>(bytes[0]));
        break;
      case Stored::u16:
        out[i] = static_cast<Target>(load_unsigned<uint16_t>(bytes, swap));
        break;
      case Stored::i16:
        out[i] = static_cast<Target>(static_cast<int16_t>(load_unsigned<uint16_t>(bytes, swap)));
        break;
      case Stored::u32:
        out[i] = static_cast<Target>(load_unsigned<uint32_t>(bytes, swap));
        break;
      case Stored::i32:
        out[i] = static_cast<Target>(static_cast<int32_t>(load_unsigned<uint32_t>(bytes, swap)));
        break;
      case Stored::u64: {
        const uint64_t value = load_unsigned<uint64_t>(bytes, swap);
        if (value > static_cast<uint64_t>(INT64_MAX)) {
          fail("{}: {} holds the u8 value {} (element {}), beyond i64's range", function, source,
               value, i + 1);
        }
        out[i] = static_cast<Target>(value);
        break;
      }
      case Stored::i64:
        out[i] = static_cast<Target>(static_cast<int64_t>(load_unsigned<uint64_t>(bytes, swap)));
        break;
      case Stored::f16:
        out[i] = static_cast<Target>(half_to_float(load_unsigned<uint16_t>(bytes, swap)));
        break;
      case Stored::f32:
        out[i] = static_cast<Target>(std::bit_cast<float>(load_unsigned<uint32_t>(bytes, swap)));
        break;
      case Stored::f64:
        out[i] = static_cast<Target>(std::bit_cast<double>(load_unsigned<uint64_t>(bytes, swap)));
        break;
    }
  }
}

uint32_t little_endian(const uint8_t* bytes, int count) {
  uint32_t value = 0;
  for (int i = count - 1; i >= 0; i--) value = value << 8 | bytes[i];
  return value;
}

}  // namespace

float half_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  const uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
  // zero or subnormal: mantissa * 2^-24, exact in float
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

namespace {

// Where a .npy file's parts lie, as its header announces them.
struct Layout {
  Header header;
  int64_t count = 0;      // elements
  size_t data_start = 0;  // the first data byte
  size_t data_bytes = 0;  // the data's length
};

// The layout the .npy bytes [data, data + size) announce. `whole`: they are
// the whole file, and ending before the header does is an error; else they
// are its first bytes, and that gives nullopt. Every other fault is an Error.
std::optional<Layout> read_layout(const uint8_t* data, size_t size, const char* function,
                                  const std::string& source, bool whole) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.substr(0, kMagic.size()) != kMagic.substr(0, std::min(size, kMagic.size()))) {
    fail("{}: {} is not a .npy file (it does not start with \\x93NUMPY)", function, source);
  }
  if (size < 10) {
    if (!whole) return std::nullopt;
    fail("{}: {} is truncated: {} bytes, no complete .npy header", function, source, size);
  }
  const int major = data[6], minor = data[7];
  if (major < 1 || major > 3) {
    fail("{}: {} has .npy format version {}.{}; lazylua reads versions 1.0, 2.0 and 3.0", function,
         source, major, minor);
  }
  // Version 1.0 gives the header's length in 2 bytes, 2.0 and 3.0 in 4.
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (size < 8 + length_bytes) {
    if (!whole) return std::nullopt;
    fail("{}: {} is truncated: {} bytes, no complete .npy header", function, source, size);
  }
  const size_t header_length = little_endian(data + 8, static_cast<int>(length_bytes));
  const size_t header_start = 8 + length_bytes;
  if (header_length > kMaxHeaderBytes) {
    fail("{}: {} announces a header of {} bytes; at most {} are accepted", function, source,
         header_length, kMaxHeaderBytes);
  }
  if (size - header_start < header_length) {
    if (!whole) return std::nullopt;
    fail("{}: {} is truncated in its header ({} of {} header bytes)", function, source,
         size - header_start, header_length);
  }
  Layout layout;
  layout.header = HeaderParser(bytes.substr(header_start, header_length), function, source).parse();
  try {
    layout.count = checked_numel(layout.header.shape, function);
  } catch (const Error&) {
    fail("{}: {} announces an array of shape {}, too large for a tensor", function, source,
         shape_string(layout.header.shape));
  }
  layout.data_start = header_start + header_length;
  layout.data_bytes =
      static_cast<size_t>(layout.count) * static_cast<size_t>(layout.header.element.size);
  return layout;
}

}  // namespace

size_t announced_length(const uint8_t* prefix, size_t size, const char* function,
                        const std::string& source) {
  const std::optional<Layout> layout = read_layout(prefix, size, function, source, false);
  if (!layout) return SIZE_MAX;
  return layout->data_bytes > SIZE_MAX - layout->data_start
             ? SIZE_MAX
             : layout->data_start + layout->data_bytes;
}

Array decode(const uint8_t* data, size_t size, const char* function, const std::string& source) {
  const Layout layout = *read_layout(data, size, function, source, true);
  const Header& header = layout.header;
  const int64_t count = layout.count;
  const size_t data_start = layout.data_start;
  const size_t expected = layout.data_bytes;
  const size_t held = size - data_start;
  if (held != expected) {
    fail("{}: {} announces {} elements of shape {} ({} bytes of data), the file holds {} bytes",
         function, source, count, shape_string(header.shape), expected, held);
  }

  // Fortran order: the elements of shape (a, b, c) column-major are those
  // of shape (c, b, a) row-major; read them so, then view them reversed.
  Shape stored_shape = header.shape;
  if (header.fortran_order) std::reverse(stored_shape.begin(), stored_shape.end());
  Array out = Array::empty(stored_shape, header.element.dtype, function);
  visit_dtype(header.element.dtype, [&](auto zero) {
    using Target = decltype(zero);
    convert_elements(data + data_start, count, header.element, out.data<Target>(), function,
                     source);
  });
  if (!header.fortran_order || header.shape.rank() < 2) return out;
  Strides strides = Strides::filled(header.shape.rank(), 1);
  for (int d = 1; d < header.shape.rank(); d++) strides[d] = strides[d - 1] * header.shape[d - 1];
  return contiguous(out.view_as(header.shape, strides, 0));
}

std::string encode(const Array& array) {
  const char* descr = "<f4";
  switch (array.dtype) {
    case DType::boolean:
      descr = "|b1";
      break;
    case DType::i32:
      descr = "<i4";
      break;
    case DType::i64:
      descr = "<i8";
      break;
    case DType::f32:
      descr = "<f4";
      break;
    case DType::f64:
      descr = "<f8";
      break;
  }
  std::string shape;
  for (int d = 0; d < array.rank(); d++) {
    shape += fmt::format("{}{}", d ? ", " : "", array.shape[d]);
  }
  if (array.rank() == 1) shape += ",";  // Python's one-element tuple: (3,)
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  // NumPy pads the header with spaces and a newline so the data starts on a
  // 64-byte boundary (magic, version, length and header together).
  const size_t length_bytes = header.size() + 1 + 10 > 65535 ? 4 : 2;
  const size_t unpadded = 8 + length_bytes + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';

  const Array data = contiguous(array);
  const size_t data_bytes = static_cast<size_t>(data.numel()) * dtype_size(data.dtype);
  std::string out;
  out.reserve(8 + length_bytes + header.size() + data_bytes);
  out += kMagic;
  out += static_cast<char>(length_bytes == 2 ? 1 : 2);
  out += '\0';
  for (size_t i = 0; i < length_bytes; i++) {
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  out += header;
  if (data_bytes > 0) out.append(static_cast<const char*>(data.raw_data()), data_bytes);
  return out;
}

}  // namespace lazylua::npy
