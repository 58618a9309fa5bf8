// csv_reader.cpp - CSV files as RFC 4180 writes them (and spreadsheets
// export them): fields separated by one delimiter character, records by
// LF or CRLF; a field in double quotes may hold the delimiter, line breaks
// and doubled quotes (""). Leniencies, as Python's csv module and pandas
// have: blank lines are skipped, spaces around a field are trimmed, a quote
// inside an unquoted field is an ordinary character.
//
// Each cell becomes a number: numeric columns parse it (a quoted number is
// a number), text columns give the string's category code (1, 2 ... in
// order of first appearance), and a missing cell (empty, NA, NaN) gives NaN.
//
// Integers stay exact, as pandas keeps them (int64 columns): without a dtype,
// a table of integers only is i64; a table with a fraction or a missing cell
// is f32, and an integer cell that f32 cannot hold exactly (16777217) is an
// error naming it, not a silently rounded id. The same holds for an asked
// float dtype (f64 holds integers exactly up to 2^53).
#include "interp/csv_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "interp/file_bytes.h"
#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "tensor/array.h"

namespace lazylua {
namespace {

constexpr const char* kFunction = "data.read_csv";

struct Cell {
  std::string_view text;
  bool quoted = false;
};

// Splits the text into records. A cell's text points into the file, or,
// when it held doubled quotes, into `unescaped_` (kept for the whole read).
class Tokenizer {
 public:
  Tokenizer(std::string_view text, char delimiter, const std::string& path)
      : text_(text), delimiter_(delimiter), path_(path) {}

  // The next record's cells, false at the end. record_line(): where it began.
  bool next(std::vector<Cell>& cells) {
    cells.clear();
    while (position_ < text_.size()) {  // skip blank lines
      const size_t end = line_end(position_);
      if (!blank(text_.substr(position_, end - position_))) break;
      position_ = end + 1;
      line_++;
    }
    if (position_ >= text_.size()) return false;
    record_line_ = line_;
    while (true) {
      skip_spaces();
      if (position_ < text_.size() && text_[position_] == '"') {
        cells.push_back(quoted_cell());
      } else {
        cells.push_back(Cell{plain_cell(), false});
      }
      if (position_ >= text_.size()) return true;
      const char c = text_[position_++];
      if (c == '\n') {
        line_++;
        return true;
      }
      // c is the delimiter: another cell follows
    }
  }

  int64_t record_line() const { return record_line_; }

 private:
  size_t line_end(size_t from) const {
    const size_t end = text_.find('\n', from);
    return end == std::string_view::npos ? text_.size() : end;
  }
  static bool blank(std::string_view line) {
    for (const char c : line) {
      if (c != ' ' && c != '\t' && c != '\r') return false;
    }
    return true;
  }
  void skip_spaces() {
    while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\t') &&
           text_[position_] != delimiter_) {
      position_++;
    }
  }

  // Up to the delimiter or the line's end, trimmed.
  std::string_view plain_cell() {
    const size_t start = position_;
    while (position_ < text_.size() && text_[position_] != delimiter_ && text_[position_] != '\n') {
      position_++;
    }
    std::string_view cell = text_.substr(start, position_ - start);
    while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\t' || cell.back() == '\r')) {
      cell.remove_suffix(1);
    }
    return cell;
  }

  Cell quoted_cell() {
    const int64_t opened_on = line_;
    const size_t start = ++position_;  // after the opening quote
    std::string* unescaped = nullptr;
    size_t piece = start;
    while (true) {
      const size_t quote = text_.find('"', position_);
      if (quote == std::string_view::npos) {
        fail("{}: '{}' line {}: a quoted field is not closed before the end of the file", kFunction,
             path_, opened_on);
      }
      for (size_t i = position_; i < quote; i++) line_ += text_[i] == '\n';
      if (quote + 1 < text_.size() && text_[quote + 1] == '"') {  // "" stands for "
        if (!unescaped) unescaped = &unescaped_.emplace_back();
        unescaped->append(text_.substr(piece, quote + 1 - piece));
        position_ = piece = quote + 2;
        continue;
      }
      position_ = quote + 1;
      std::string_view cell = text_.substr(start, quote - start);
      if (unescaped) {
        unescaped->append(text_.substr(piece, quote - piece));
        cell = *unescaped;
      }
      // Only spaces may stand between the closing quote and the delimiter.
      while (position_ < text_.size() && text_[position_] != delimiter_ &&
             (text_[position_] == ' ' || text_[position_] == '\t' || text_[position_] == '\r')) {
        position_++;
      }
      if (position_ < text_.size() && text_[position_] != delimiter_ && text_[position_] != '\n') {
        fail(
            "{}: '{}' line {}: '{}' after a closing quote (a quote inside a quoted field is "
            "written \"\")",
            kFunction, path_, line_, text_[position_]);
      }
      return Cell{cell, true};
    }
  }

  std::string_view text_;
  char delimiter_;
  const std::string& path_;
  size_t position_ = 0;
  int64_t line_ = 1;
  int64_t record_line_ = 1;
  std::deque<std::string> unescaped_;  // a deque: growing it moves no string
};

// A number in C syntax without locale: "1", "-2.5e3", "+4", "nan", "inf".
std::optional<double> parse_number(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

// An integer field exactly (from its digits, so values beyond 2^53 stay
// exact), or a number that is a whole value in int64's range ("1e3").
std::optional<int64_t> parse_integer(std::string_view text, double value) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  int64_t integer = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), integer);
  if (error == std::errc() && end == text.data() + text.size()) return integer;
  if (std::floor(value) == value && std::fabs(value) < 9.2e18) return static_cast<int64_t>(value);
  return std::nullopt;
}

// A cell written as an integer ("42", "-7", "+3", "0012"; not "1e3" or
// "4.0"): its value, or nullopt (written otherwise, or beyond int64).
std::optional<int64_t> written_integer(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  int64_t integer = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), integer);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return integer;
}

// A cell of digits only, after an optional sign: an integer, perhaps beyond
// int64.
bool digits_only(std::string_view text) {
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) text.remove_prefix(1);
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whether the integer cell `text` (digits_only), parsed to `value` (rounded
// to double), is exact in the float dtype: the exact decimal form of what
// the dtype stores is the cell's digits.
bool integer_exact_in(std::string_view text, double value, DType dtype) {
  // Below 2^24 (f32) and 2^53 (f64) every integer is exact: the usual case,
  // decided without formatting.
  const double exact_below = dtype == DType::f32 ? 16777216.0 : 9007199254740992.0;
  // (Strictly below: a value of exactly 2^53 may be 2^53 + 1 rounded.)
  if (std::fabs(value) < exact_below) return true;
  const double stored =
      dtype == DType::f32 ? static_cast<double>(static_cast<float>(value)) : value;
  if (!std::isfinite(stored)) return false;
  std::string_view digits = text;
  const bool negative = !digits.empty() && digits.front() == '-';
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  return fmt::format("{:.0f}", stored) == fmt::format("{}{}", negative ? "-" : "", digits);
}

bool is_missing(std::string_view text) {
  return text.empty() || text == "NA" || text == "NaN";
}

// A cell as an error message shows it: at most 40 bytes, anything but
// printable ASCII escaped (a binary file's garbage, a 100 MB cell).
std::string cell_text(std::string_view cell) {
  constexpr size_t kShown = 40;
  std::string text;
  for (size_t i = 0; i < cell.size() && i < kShown; i++) {
    const unsigned char c = static_cast<unsigned char>(cell[i]);
    if (c >= 0x20 && c < 0x7f) {
      text += static_cast<char>(c);
    } else {
      text += fmt::format("\\x{:02x}", c);
    }
  }
  if (cell.size() > kShown) text += fmt::format("... ({} bytes)", cell.size());
  return text;
}

// The columns opts.text names (a list of indices or header names), as a
// flag per 0-based column.
std::vector<bool> text_columns(lua_State* L, int arg, const std::vector<std::string>& names,
                               bool has_header) {
  std::vector<bool> chosen(names.size(), false);
  const lua_Integer count = static_cast<lua_Integer>(lua_rawlen(L, arg));
  for (lua_Integer i = 1; i <= count; i++) {
    lua_rawgeti(L, arg, i);
    if (lua_isinteger(L, -1)) {
      const lua_Integer column = lua_tointeger(L, -1);
      lua_pop(L, 1);
      if (column < 1)
        fail("{}: opts.text[{}] is column {}; columns count from 1", kFunction, i, column);
      if (static_cast<size_t>(column) > chosen.size()) chosen.resize(static_cast<size_t>(column));
      chosen[static_cast<size_t>(column - 1)] = true;
    } else if (lua_type(L, -1) == LUA_TSTRING) {
      const std::string name = lua_tostring(L, -1);
      lua_pop(L, 1);
      if (!has_header) {
        fail("{}: opts.text names column '{}', but the file has no header (header = true?)",
             kFunction, name);
      }
      size_t found = 0;
      while (found < names.size() && names[found] != name) found++;
      if (found == names.size())
        fail("{}: opts.text names column '{}', not in the header", kFunction, name);
      chosen[found] = true;
    } else {
      const char* type = luaL_typename(L, -1);
      lua_pop(L, 1);
      fail("{}: opts.text[{}] is a {}; columns are named by index or header name", kFunction, i,
           type);
    }
  }
  return chosen;
}

// Where a cell is, for a message about it.
struct CellPlace {
  int64_t line;
  size_t column;     // 1-based
  std::string text;  // as cell_text shows it
};

// A .csv.gz file may decompress to at most this many times its own size
// (but always to kMinimumGzipLimit): real tables compress 3 to 10 times,
// one-hot columns about 35, while a gzip bomb of one repeated byte reaches
// DEFLATE's 1032. The same bound Apache POI puts on zip entries (a minimum
// inflate ratio of 0.01). A larger ratio is refused before it costs memory;
// such a file can be read once gunzipped (a plain file has no limit: its
// size is real).
constexpr uint64_t kMaxGzipRatio = 100;
constexpr uint64_t kMinimumGzipLimit = uint64_t{64} << 20;

// The file's bytes, gunzipped within the limit above.
HostBytes read_csv_bytes(const std::string& path) {
  struct stat info {};
  // The size sets the limit only; read_file_bytes makes every other check
  // (and reports a file that cannot be opened).
  const uint64_t compressed = ::stat(path.c_str(), &info) == 0 && info.st_size > 0
                                  ? static_cast<uint64_t>(info.st_size)
                                  : 0;
  const uint64_t limit =
      std::max(kMinimumGzipLimit,
               compressed > UINT64_MAX / kMaxGzipRatio ? UINT64_MAX : compressed * kMaxGzipRatio);
  const OutputLimit gzip_limit = [limit](const uint8_t*, size_t) {
    return static_cast<size_t>(std::min<uint64_t>(limit, SIZE_MAX));
  };
  try {
    return read_file_bytes(path, kFunction, gzip_limit);
  } catch (const Error& error) {
    // read_file_bytes says the limit comes from the content (true of IDX);
    // here it comes from the file's size, and the way out is to gunzip it.
    if (std::string_view(error.what()).find("decompresses to more than") ==
        std::string_view::npos) {
      throw;
    }
  }
  fail(
      "{}: '{}' decompresses to more than {} bytes (a .csv.gz file may grow {} times, and to "
      "64 MiB at least): refused as a likely gzip bomb; gunzip it first to read it",
      kFunction, path, limit, kMaxGzipRatio);
}

}  // namespace

int read_csv(lua_State* L) {
  using binding::type_error;
  if (lua_type(L, 1) != LUA_TSTRING) type_error(L, 1, kFunction, "string");
  const std::string path = lua_tostring(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING || lua_rawlen(L, 2) != 1) {
    fail("{}: the delimiter must be one character", kFunction);
  }
  const char delimiter = lua_tostring(L, 2)[0];
  if (delimiter == '"' || delimiter == '\n' || delimiter == '\r') {
    fail("{}: the delimiter cannot be a quote or a line break", kFunction);
  }
  const bool has_header = lua_toboolean(L, 3);
  if (!lua_isnoneornil(L, 4) && lua_type(L, 4) != LUA_TSTRING)
    type_error(L, 4, kFunction, "dtype name");
  // No dtype: i64 for a table of integers, else f32 (decided after reading).
  const bool dtype_asked = !lua_isnoneornil(L, 4);
  const DType asked_dtype = dtype_asked ? parse_dtype(lua_tostring(L, 4)) : DType::f32;
  const bool auto_text = lua_type(L, 5) == LUA_TBOOLEAN && lua_toboolean(L, 5);
  if (!lua_isnoneornil(L, 5) && lua_type(L, 5) != LUA_TTABLE && lua_type(L, 5) != LUA_TBOOLEAN) {
    fail("{}: opts.text must be true or a list of columns, got {}", kFunction, luaL_typename(L, 5));
  }

  const HostBytes file = read_csv_bytes(path);
  std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  // A UTF-8 byte order mark (spreadsheets write one) is not part of the
  // first cell: kept, it would be glued to the first column's name.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);

  std::vector<Cell> cells;
  std::vector<std::string> names;
  int64_t columns = -1, first_line = 0;
  auto check_width = [&](const Tokenizer& tokens) {
    if (columns < 0) {
      columns = static_cast<int64_t>(cells.size());
      first_line = tokens.record_line();
    } else if (static_cast<int64_t>(cells.size()) != columns) {
      fail("{}: '{}' line {}: {} values, expected {} (as in line {})", kFunction, path,
           tokens.record_line(), cells.size(), columns, first_line);
    }
  };
  // Pass 1, only for text = true: which columns hold words.
  std::vector<bool> is_text;
  {
    Tokenizer tokens(text, delimiter, path);
    if (has_header && tokens.next(cells)) {
      for (const Cell& cell : cells) names.emplace_back(cell.text);
      check_width(tokens);
    }
    if (auto_text) {
      while (tokens.next(cells)) {
        check_width(tokens);
        if (is_text.size() < cells.size()) is_text.resize(cells.size());
        for (size_t c = 0; c < cells.size(); c++) {
          if (!is_text[c] && !is_missing(cells[c].text) && !parse_number(cells[c].text)) {
            is_text[c] = true;
          }
        }
      }
    }
  }
  if (lua_type(L, 5) == LUA_TTABLE) is_text = text_columns(L, 5, names, has_header);
  if (columns >= 0 && static_cast<int64_t>(is_text.size()) > columns) {
    fail("{}: opts.text names column {}; the file has {}", kFunction, is_text.size(), columns);
  }

  // Pass 2: the values. `integers` holds each cell's integer value when the
  // table may be integer (an integer dtype, or none asked).
  const bool integer_dtype = dtype_asked && is_integral(asked_dtype);
  const bool bool_dtype = dtype_asked && asked_dtype == DType::boolean;
  const bool float_dtype = dtype_asked && is_floating(asked_dtype);
  std::vector<double> values;
  std::vector<int64_t> integers;
  bool all_integers = true;  // no dtype asked: every cell so far is an integer
  std::optional<CellPlace> first_fraction, first_inexact;
  // The first cell that is no integer makes the table f32: its integers are
  // not needed any more (nor their memory, 8 bytes a cell).
  auto not_an_integer = [&](int64_t line, size_t column, std::string_view cell) {
    if (dtype_asked || !all_integers) return;
    all_integers = false;
    first_fraction = CellPlace{line, column, cell_text(cell)};
    std::vector<int64_t>().swap(integers);
  };
  auto keep_integer = [&](int64_t value) {
    if (integer_dtype || (!dtype_asked && all_integers)) integers.push_back(value);
  };
  std::vector<std::unordered_map<std::string_view, int64_t>> codes(is_text.size());
  std::vector<std::vector<std::string_view>> categories(is_text.size());
  Tokenizer tokens(text, delimiter, path);
  if (has_header) tokens.next(cells);
  while (tokens.next(cells)) {
    check_width(tokens);
    for (size_t c = 0; c < cells.size(); c++) {
      const std::string_view cell = cells[c].text;
      const int64_t line = tokens.record_line();
      if (is_missing(cell)) {
        if (integer_dtype || bool_dtype) {
          fail(
              "{}: '{}' line {}, column {}: a missing value ('{}'); {} cannot hold NaN (read "
              "with dtype f32 or f64)",
              kFunction, path, line, c + 1, cell_text(cell), dtype_name(asked_dtype));
        }
        not_an_integer(line, c + 1, cell);
        values.push_back(std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      if (c < is_text.size() && is_text[c]) {
        auto [entry, added] =
            codes[c].try_emplace(cell, static_cast<int64_t>(categories[c].size()) + 1);
        if (added) categories[c].push_back(cell);
        values.push_back(static_cast<double>(entry->second));
        keep_integer(entry->second);
        continue;
      }
      const std::optional<double> value = parse_number(cell);
      if (!value) {
        fail(
            "{}: '{}' line {}, column {}: '{}' is not a number (list the column in opts.text "
            "to read it as categories)",
            kFunction, path, line, c + 1, cell_text(cell));
      }
      if (integer_dtype) {
        const std::optional<int64_t> integer = parse_integer(cell, *value);
        if (!integer ||
            (asked_dtype == DType::i32 && (*integer < INT32_MIN || *integer > INT32_MAX))) {
          fail("{}: '{}' line {}, column {}: '{}' is not an integer in the range of {}", kFunction,
               path, line, c + 1, cell_text(cell), dtype_name(asked_dtype));
        }
        keep_integer(*integer);
      } else if (!dtype_asked) {
        const std::optional<int64_t> integer = written_integer(cell);
        if (!integer && digits_only(cell)) {
          fail(
              "{}: '{}' line {}, column {}: the integer {} is beyond the range of i64 (list its "
              "column in opts.text to read it as categories)",
              kFunction, path, line, c + 1, cell_text(cell));
        }
        if (integer) {
          keep_integer(*integer);
        } else {
          not_an_integer(line, c + 1, cell);
        }
        if (!first_inexact && digits_only(cell) && !integer_exact_in(cell, *value, DType::f32)) {
          first_inexact = CellPlace{line, c + 1, cell_text(cell)};
        }
      } else if (float_dtype && digits_only(cell) && !integer_exact_in(cell, *value, asked_dtype)) {
        fail(
            "{}: '{}' line {}, column {}: the integer {} has no exact {} value ({} holds "
            "integers exactly up to {}); read with dtype = \"{}\"",
            kFunction, path, line, c + 1, cell_text(cell), dtype_name(asked_dtype),
            dtype_name(asked_dtype), asked_dtype == DType::f32 ? "2^24" : "2^53",
            asked_dtype == DType::f32 ? "f64\" or \"i64" : "i64");
      }
      values.push_back(*value);
    }
  }
  // A table of integers only is i64; anything else (or nothing) f32, whose
  // rounding no integer cell may suffer.
  const bool integer_table = !dtype_asked && all_integers && !values.empty();
  const DType dtype = dtype_asked ? asked_dtype : integer_table ? DType::i64 : DType::f32;
  if (!dtype_asked && !integer_table && first_inexact) {
    fail(
        "{}: '{}' line {}, column {}: the integer {} has no exact f32 value (f32 holds integers "
        "exactly up to 2^24), and the table is read as f32 because of '{}' in line {}, column "
        "{}; read with dtype = \"f64\" (exact up to 2^53)",
        kFunction, path, first_inexact->line, first_inexact->column, first_inexact->text,
        first_fraction->text, first_fraction->line, first_fraction->column);
  }

  const int64_t width = std::max<int64_t>(columns, 0);
  const int64_t rows = width == 0 ? 0 : static_cast<int64_t>(values.size()) / width;
  Array out = Array::empty(Shape{rows, width}, dtype, kFunction);
  const bool from_integers = is_integral(dtype);
  visit_dtype(dtype, [&](auto zero) {
    using Out = decltype(zero);
    Out* data = out.data<Out>();
    for (size_t i = 0; i < values.size(); i++) {
      if constexpr (std::is_same_v<Out, bool>) {
        data[i] = values[i] != 0;
      } else if (from_integers) {
        data[i] = static_cast<Out>(integers[i]);
      } else {
        data[i] = static_cast<Out>(values[i]);
      }
    }
  });
  push_tensor(L, std::move(out));
  if (has_header) {
    lua_safe::create_table(L, static_cast<int64_t>(names.size()), 0);
    for (size_t i = 0; i < names.size(); i++) {
      lua_safe::push_string(L, names[i]);
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
  } else {
    lua_pushnil(L);
  }
  lua_safe::create_table(L, 0, 0);
  for (size_t c = 0; c < is_text.size(); c++) {
    if (!is_text[c]) continue;
    lua_safe::create_table(L, static_cast<int64_t>(categories[c].size()), 0);
    for (size_t i = 0; i < categories[c].size(); i++) {
      lua_safe::push_string(L, categories[c][i]);
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_safe::set_index(L, -2, static_cast<lua_Integer>(c + 1));
  }
  return 3;
}

}  // namespace lazylua
