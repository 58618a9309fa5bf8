// sandbox_patterns.h - a bound on the work of Lua pattern matching in the
// embedding sandbox.
//
// Lua's matcher backtracks: `("a"):rep(3000):find(".-.-.-.-b")` runs for
// hours inside one C call, and no hook (so no lazylua_interrupt) reaches
// it. The sandbox's string.find, match, gmatch and gsub first bound the
// worst-case work of the pattern on the subject from the pattern's
// structure and the subject's longest runs of each quantified class, and
// refuse, with an error naming the function, a call whose bound passes
// kMaxPatternSteps; the others run Lua's own functions unchanged. The bound
// is sound (never below what the matcher can do), so any call that runs
// ends within about a second and an interrupt then stops the script.
#pragma once

#include <lua.hpp>

#include <cstddef>

namespace lazylua {

// Matcher steps (one character compared against one pattern item) a single
// call may need at worst: about a second on a slow machine at 10 ns a step,
// and in practice far less (the bound is pessimistic).
constexpr double kMaxPatternSteps = 1.0e8;

// The worst-case number of steps Lua's matcher takes to run `pattern` over
// `subject` (from every start position unless the pattern is anchored;
// `anchor_allowed` is false for gmatch, where '^' is not an anchor). A
// malformed pattern is bounded up to the point where the matcher reports
// it.
double pattern_work_bound(const char* subject, size_t subject_length, const char* pattern,
                          size_t pattern_length, bool anchor_allowed);

// Replaces string.find, string.match, string.gmatch and string.gsub of L
// (also the string methods: the string metatable's __index is the same
// table) by the bounded versions.
void install_pattern_limits(lua_State* L);

}  // namespace lazylua
