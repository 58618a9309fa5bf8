// sandbox_patterns.cpp - the sandbox's bounded string.find/match/gmatch/gsub.
#include "interp/sandbox_patterns.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace lazylua {
namespace {

int byte(char c) {
  return static_cast<unsigned char>(c);
}

// Whether byte c is in the class "%letter" (Lua's pattern classes, with
// the same <ctype.h> functions Lua's matcher uses); an upper-case letter is
// the complement, any other character stands for itself.
bool class_letter_matches(int c, int letter) {
  bool result;
  // A table, one class a row:
  // clang-format off
  switch (std::tolower(letter)) {
    case 'a': result = std::isalpha(c); break;
    case 'c': result = std::iscntrl(c); break;
    case 'd': result = std::isdigit(c); break;
    case 'g': result = std::isgraph(c); break;
    case 'l': result = std::islower(c); break;
    case 'p': result = std::ispunct(c); break;
    case 's': result = std::isspace(c); break;
    case 'u': result = std::isupper(c); break;
    case 'w': result = std::isalnum(c); break;
    case 'x': result = std::isxdigit(c); break;
    default: return letter == c;
  }
  // clang-format on
  return std::isupper(letter) ? !result : result;
}

// Whether byte c is in the set "[...]" from `open` (its '[') to `close`
// (its ']'): "^" negates, "x-y" is a range, "%x" a class or an escape.
bool set_matches(int c, const char* open, const char* close) {
  const char* p = open + 1;
  const bool negated = *p == '^';
  if (negated) p++;
  for (; p < close; p++) {
    if (*p == '%') {
      p++;
      if (class_letter_matches(c, byte(*p))) return !negated;
    } else if (p + 2 < close && p[1] == '-') {
      if (byte(p[0]) <= c && c <= byte(p[2])) return !negated;
      p += 2;
    } else if (byte(*p) == c) {
      return !negated;
    }
  }
  return negated;
}

// Whether byte c matches the single-character class [begin, end): ".",
// "%x", "[set]" or a character.
bool class_matches(int c, const char* begin, const char* end) {
  switch (*begin) {
    case '.':
      return true;
    case '%':
      return class_letter_matches(c, byte(begin[1]));
    case '[':
      return set_matches(c, begin, end - 1);
    default:
      return byte(*begin) == c;
  }
}

// The end of the single-character class starting at p, or nullptr if it is
// malformed ('%' at the end, a '[' with no ']'; the first character of a
// set, after an optional '^', is never its closing ']').
const char* class_end(const char* p, const char* end) {
  const char first = *p++;
  if (first == '%') return p == end ? nullptr : p + 1;
  if (first != '[') return p;
  if (p < end && *p == '^') p++;
  do {
    if (p == end) return nullptr;
    if (*p++ == '%') {
      if (p == end) return nullptr;
      p++;
    }
  } while (p == end || *p != ']');
  return p + 1;
}

struct PatternItem {
  enum Kind { plain, close_capture, single, balance, back_reference, malformed } kind;
  const char* class_begin = nullptr;  // single: the class and its quantifier (0: none)
  const char* class_end = nullptr;
  char quantifier = 0;
};

// Splits the pattern into the items Lua's matcher steps through. Stops at
// the first malformed item: the matcher raises its error when it gets there.
std::vector<PatternItem> pattern_items(const char* p, const char* end) {
  std::vector<PatternItem> items;
  while (p < end) {
    if (*p == '(' || (*p == '$' && p + 1 == end)) {
      items.push_back({PatternItem::plain});
      p++;
      continue;
    }
    if (*p == ')') {
      items.push_back({PatternItem::close_capture});
      p++;
      continue;
    }
    if (*p == '%' && p + 1 < end) {
      if (p[1] == 'b') {
        if (end - p < 4) break;
        items.push_back({PatternItem::balance});
        p += 4;
        continue;
      }
      if (p[1] == 'f') {
        p += 2;
        const char* set_end = p < end && *p == '[' ? class_end(p, end) : nullptr;
        if (!set_end) break;
        items.push_back({PatternItem::plain});
        p = set_end;
        continue;
      }
      if (std::isdigit(byte(p[1]))) {
        items.push_back({PatternItem::back_reference});
        p += 2;
        continue;
      }
    }
    const char* item_end = class_end(p, end);
    if (!item_end) break;
    const char quantifier =
        item_end < end && std::strchr("*+-?", *item_end) != nullptr ? *item_end : 0;
    items.push_back({PatternItem::single, p, item_end, quantifier});
    p = quantifier ? item_end + 1 : item_end;
  }
  if (p < end) items.push_back({PatternItem::malformed});
  return items;
}

// The longest run of subject bytes in the item's class: how many
// positions a repetition of it can try from any start.
double longest_run(const PatternItem& item, const char* subject, size_t length) {
  if (*item.class_begin == '.') return static_cast<double>(length);
  bool member[256];
  for (int c = 0; c < 256; c++) member[c] = class_matches(c, item.class_begin, item.class_end);
  size_t longest = 0, current = 0;
  for (size_t i = 0; i < length; i++) {
    current = member[byte(subject[i])] ? current + 1 : 0;
    longest = std::max(longest, current);
  }
  return static_cast<double>(longest);
}

// The bound for items whose repetitions each try at most runs[i] + 1
// positions. cost is the worst work of matching items i.. from one
// position, built from the last item back: a repetition tries the rest
// once per position it can stop at; '?' twice. A repetition followed only
// by closing captures cannot fail once reached (the rest is empty), so it
// is tried once per match and scans each subject byte at most once in all.
double bound_for(const std::vector<PatternItem>& items, const std::vector<double>& runs,
                 double length, double starts) {
  double cost = 1;
  bool only_closing_after = true;
  bool trailing_repetition = false;
  for (size_t i = items.size(); i-- > 0;) {
    const PatternItem& item = items[i];
    switch (item.kind) {
      case PatternItem::malformed:
        cost = 1;  // the matcher stops here with an error
        break;
      case PatternItem::plain:
      case PatternItem::close_capture:
        cost += 1;
        break;
      case PatternItem::balance:
      case PatternItem::back_reference:
        cost += length + 1;
        break;
      case PatternItem::single:
        if (item.quantifier == 0) {
          cost += 1;
        } else if (only_closing_after) {
          trailing_repetition = item.quantifier != '?';
          cost += 1;
        } else if (item.quantifier == '?') {
          cost = 1 + 2 * cost;
        } else {
          cost = (runs[i] + 1) * (cost + 1);
        }
        break;
    }
    if (item.kind != PatternItem::close_capture) only_closing_after = false;
  }
  return starts * cost + (trailing_repetition ? 2 * (length + 1) : 0);
}

}  // namespace

double pattern_work_bound(const char* subject, size_t subject_length, const char* pattern,
                          size_t pattern_length, bool anchor_allowed) {
  try {
    const char* end = pattern + pattern_length;
    const bool anchored = anchor_allowed && pattern_length > 0 && *pattern == '^';
    const std::vector<PatternItem> items = pattern_items(anchored ? pattern + 1 : pattern, end);
    const double length = static_cast<double>(subject_length);
    // gsub and gmatch may try a position twice (after an empty match).
    const double starts = anchored ? 1 : 2 * (length + 1);
    // First with every run as long as the subject; only a pattern that
    // fails that quick check pays for scanning the subject's runs.
    std::vector<double> runs(items.size(), length);
    const double quick = bound_for(items, runs, length, starts);
    if (quick <= kMaxPatternSteps) return quick;
    for (size_t i = 0; i < items.size(); i++) {
      if (items[i].kind == PatternItem::single && items[i].quantifier) {
        runs[i] = longest_run(items[i], subject, subject_length);
      }
    }
    return bound_for(items, runs, length, starts);
  } catch (...) {
    return HUGE_VAL;  // out of memory for a few items: refuse
  }
}

namespace {

enum class StringFunction { find, match, gmatch, gsub };
constexpr const char* kNames[] = {"find", "match", "gmatch", "gsub"};

// The characters that make string.find use the matcher rather than a plain
// search (Lua's SPECIALS).
constexpr const char* kSpecials = "^$*+?.([%-";

// Upvalues: Lua's own function and the StringFunction. The arguments are
// checked here as Lua's function checks them, so that a bad one is
// reported under the name the script called (Lua's function, called from
// here, could not name itself).
int bounded_string_function(lua_State* L) {
  const auto function = static_cast<StringFunction>(lua_tointeger(L, lua_upvalueindex(2)));
  size_t subject_length = 0, pattern_length = 0;
  const char* subject = luaL_checklstring(L, 1, &subject_length);
  const char* pattern = luaL_checklstring(L, 2, &pattern_length);
  if (function == StringFunction::gsub) {
    const int replacement = lua_type(L, 3);
    luaL_argexpected(L,
                     replacement == LUA_TNUMBER || replacement == LUA_TSTRING ||
                         replacement == LUA_TFUNCTION || replacement == LUA_TTABLE,
                     3, "string/function/table");
  }
  luaL_optinteger(L, function == StringFunction::gsub ? 4 : 3, 0);
  const char* pattern_end = pattern + pattern_length;
  const bool plain_find = function == StringFunction::find &&
                          (lua_toboolean(L, 4) ||
                           std::find_first_of(pattern, pattern_end, kSpecials,
                                              kSpecials + std::strlen(kSpecials)) == pattern_end);
  // A plain find is memchr and memcmp: a compare of the whole pattern at
  // each start, many bytes a step.
  const double bound =
      plain_find ? static_cast<double>(subject_length) * static_cast<double>(pattern_length) / 16
                 : pattern_work_bound(subject, subject_length, pattern, pattern_length,
                                      function != StringFunction::gmatch);
  if (bound > kMaxPatternSteps) {
    char message[320];
    std::snprintf(message, sizeof message,
                  "string.%s: the pattern may take too long on a subject of %zu bytes (up to "
                  "%.3g matching steps; the sandbox allows %.3g): anchor it with '^' or make "
                  "its repetitions ('*', '+', '-') unambiguous",
                  kNames[static_cast<int>(function)], subject_length, bound, kMaxPatternSteps);
    return luaL_error(L, "%s", message);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

}  // namespace

void install_pattern_limits(lua_State* L) {
  lua_getglobal(L, "string");
  for (int i = 0; i < 4; i++) {
    lua_getfield(L, -1, kNames[i]);
    lua_pushinteger(L, i);
    lua_pushcclosure(L, bounded_string_function, 2);
    lua_setfield(L, -2, kNames[i]);
  }
  lua_pop(L, 1);
}

}  // namespace lazylua
