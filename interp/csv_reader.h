// csv_reader.h - data.read_csv's native part: RFC 4180 CSV (quoted fields,
// doubled quotes, line breaks inside quotes) into a 2-D tensor, with text
// columns as category codes and missing values as NaN.
#pragma once

struct lua_State;

namespace lazylua {

// read_csv(path, delimiter, header, dtype|nil, text|nil)
//   -> tensor, names|nil, categories
// text: nil, true (every column holding a cell that is neither a number nor
// missing), or a list of columns by 1-based index or header name.
// categories: column index -> list of its strings, code i being the i-th.
int read_csv(lua_State* L);

}  // namespace lazylua
