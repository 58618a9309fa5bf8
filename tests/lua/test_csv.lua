-- test_csv.lua - data.read_csv on hand-written files (csv_fixtures/):
-- RFC 4180 quoting (delimiters, doubled quotes and line breaks inside
-- quotes), text columns as category codes, missing values as NaN, and the
-- errors that name the line. Expected tensors are worked out by hand from
-- the fixture text, shown above each check.
local h = dofile("helpers.lua")
local data = require "data"

local nan = 0 / 0
local function fixture(name) return "csv_fixtures/" .. name end
local function strings(got, want)
  assert(type(got) == "table" and h.same_list(got, want), "got " .. h.show(got) .. ", expected " .. h.show(want))
end

h.test("quoted fields: commas, doubled quotes, line breaks; a text column by name", function()
  -- id,name,score
  -- 1,"Smith, John",3.5
  -- 2,"O""Brien",4
  -- 3,"multi<LF>line",NA
  -- 4,plain,
  local t, names, categories = data.read_csv(fixture("quoting.csv"), {header = true, text = {"name"}})
  h.check(t, "f32", {{1, 1, 3.5}, {2, 2, 4}, {3, 3, nan}, {4, 4, nan}})
  strings(names, {"id", "name", "score"})
  assert(h.same_list(categories[2], {"Smith, John", 'O"Brien', "multi\nline", "plain"}),
         h.show(categories[2]))
  assert(categories[1] == nil and categories[3] == nil, "only the text column has categories")
  -- the same column by index, in f64
  local t64, _, by_index = data.read_csv(fixture("quoting.csv"), {header = true, text = {2}, dtype = "f64"})
  h.check(t64, "f64", {{1, 1, 3.5}, {2, 2, 4}, {3, 3, nan}, {4, 4, nan}})
  strings(by_index[2], categories[2])
  -- without text columns the words are an error naming line and column
  h.err(function() data.read_csv(fixture("quoting.csv"), {header = true}) end,
        "quoting.csv' line 2, column 2: 'Smith, John' is not a number", "opts.text")
end)

h.test("text = true finds the text columns; codes in order of first appearance", function()
  -- red;1.5;small / blue;2;large / red;NaN;small / (blank) / green;-1;
  local t, names, categories = data.read_csv(fixture("categories.csv"), {delimiter = ";", text = true})
  h.check(t, "f32", {{1, 1.5, 1}, {2, 2, 2}, {1, nan, 1}, {3, -1, nan}})
  assert(names == nil)
  strings(categories[1], {"red", "blue", "green"})
  strings(categories[3], {"small", "large"})
  assert(categories[2] == nil, "column 2 holds numbers and a NaN: not text")
end)

h.test("integer dtypes: codes are integers, a missing value is an error", function()
  -- "code, with comma","kind" / 7,"b" / "8",a / -9,"b"
  local t, names, categories = data.read_csv(fixture("quoted_header.csv"),
                                             {header = true, text = {"kind"}, dtype = "i64"})
  h.check(t, "i64", {{7, 1}, {8, 2}, {-9, 1}})
  strings(names, {"code, with comma", "kind"})
  strings(categories[2], {"b", "a"})
  local path = os.tmpname()
  h.write_bytes(path, "1,2\n3,NA\n")
  h.err(function() data.read_csv(path, {dtype = "i32"}) end,
        "line 2, column 2: a missing value ('NA')", "i32 cannot hold NaN")
  os.remove(path)
end)

h.test("missing values: empty, NA, NaN; quoted numbers are numbers", function()
  local path = os.tmpname()
  h.write_bytes(path, 'a,b,c\n,NA,NaN\n"1.5",  ,"-2"\n')
  local t = data.read_csv(path, {header = true})
  h.check(t, "f32", {{nan, nan, nan}, {1.5, nan, -2}})
  os.remove(path)
end)

h.test("tab delimiter, CRLF line ends, a tab inside quotes", function()
  local path = os.tmpname()
  h.write_bytes(path, 'x\ty\r\n"a\tb"\t1\r\n"c"\t2\r\n')
  local t, names, categories = data.read_csv(path, {header = true, delimiter = "\t", text = {1}})
  h.check(t, "i64", {{1, 1}, {2, 2}})  -- codes and integers only: an integer table
  strings(names, {"x", "y"})
  strings(categories[1], {"a\tb", "c"})
  os.remove(path)
end)

h.test("errors name the line: ragged rows after a multi-line record, unterminated quotes", function()
  -- a,b / "x<LF>y",2 / 3: the short record starts on line 4
  h.err(function() data.read_csv(fixture("ragged_quoted.csv"), {header = true, text = {1}}) end,
        "ragged_quoted.csv' line 4: 1 values, expected 2 (as in line 1)")
  -- a,b / 1,"open / 2,3
  h.err(function() data.read_csv(fixture("unterminated.csv"), {header = true}) end,
        "unterminated.csv' line 2: a quoted field is not closed before the end of the file")
  h.err(function() data.read_csv(fixture("after_quote.csv")) end,
        "after_quote.csv' line 1: 'c' after a closing quote")
end)

h.test("bad text options", function()
  h.err(function() data.read_csv(fixture("quoting.csv"), {header = true, text = {"nope"}}) end,
        "opts.text names column 'nope', not in the header")
  h.err(function() data.read_csv(fixture("categories.csv"), {delimiter = ";", text = {"a"}}) end,
        "the file has no header")
  h.err(function() data.read_csv(fixture("quoting.csv"), {header = true, text = {4}}) end,
        "opts.text names column 4; the file has 3")
  h.err(function() data.read_csv(fixture("quoting.csv"), {header = true, text = {0}}) end,
        "columns count from 1")
  h.err(function() data.read_csv(fixture("quoting.csv"), {text = "name"}) end,
        "opts.text must be true or a list of columns, got string")
  h.err(function() data.read_csv(fixture("quoting.csv"), {delimiter = '"'}) end,
        "cannot be a quote")
end)

-- Integers stay exact (as pandas keeps integer columns int64). The values
-- below are the file's digits; 2^24 = 16777216 is the last integer from
-- which f32 holds every integer, 2^53 = 9007199254740992 for f64.
local function csv_file(text)
  local path = os.tmpname()
  h.write_bytes(path, text)
  return path
end

h.test("integers only: an i64 table, exact beyond 2^24 and 2^53", function()
  local path = csv_file("id,label\n16777217,3\n9007199254740993,-1\n+12,007\n")
  local t = data.read_csv(path, {header = true})
  assert(t:dtype() == "i64", "dtype " .. t:dtype())
  local rows = t:tolist()
  assert(rows[1][1] == 16777217 and rows[2][1] == 9007199254740993 and rows[2][2] == -1,
         h.show(rows))
  h.eq(rows, {{16777217, 3}, {9007199254740993, -1}, {12, 7}})
  -- asked for: f32 and f64 refuse the integers they would round
  h.err(function() data.read_csv(path, {header = true, dtype = "f32"}) end,
        "line 2, column 1: the integer 16777217 has no exact f32 value", 'dtype = "f64" or "i64"')
  h.err(function() data.read_csv(path, {header = true, dtype = "f64"}) end,
        "line 3, column 1: the integer 9007199254740993 has no exact f64 value", 'dtype = "i64"')
  os.remove(path)
  -- beyond int64: no i64 table, and no float holds it exactly
  path = csv_file("1\n99999999999999999999\n")
  h.err(function() data.read_csv(path) end,
        "line 2, column 1: the integer 99999999999999999999 is beyond the range of i64")
  os.remove(path)
end)

h.test("a fraction or a missing value makes the table f32; integers it would round are refused", function()
  -- the first column's ids beside a float column: f32 would make 16777217 16777216
  local path = csv_file("id,score\n16777216,0.5\n16777217,1.5\n")
  h.err(function() data.read_csv(path, {header = true}) end,
        "line 3, column 1: the integer 16777217 has no exact f32 value",
        "because of '0.5' in line 2, column 2", 'dtype = "f64"')
  h.check(data.read_csv(path, {header = true, dtype = "f64"}), "f64",
          {{16777216, 0.5}, {16777217, 1.5}})
  os.remove(path)
  -- negative too; a missing cell is what makes this table a float one
  path = csv_file("-16777217,1\n2,NA\n")
  h.err(function() data.read_csv(path) end, "line 1, column 1: the integer -16777217",
        "because of 'NA' in line 2, column 2")
  os.remove(path)
  -- integers f32 holds exactly: read as before
  path = csv_file("16777216,-16777216,0.25\n1,2,3\n")
  h.check(data.read_csv(path), "f32", {{16777216, -16777216, 0.25}, {1, 2, 3}})
  -- a cell written as a float ("1e3", "4.0") is no integer: the table is f32
  os.remove(path)
  path = csv_file("1e3,4.0\n")
  h.check(data.read_csv(path), "f32", {{1000, 4}})
  os.remove(path)
  -- the interpreter goes on after the errors
  h.check(tensor.new({1, 2}) + 1, nil, {2, 3})
end)

h.done("test_csv")
