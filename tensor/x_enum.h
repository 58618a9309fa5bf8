// x_enum.h - an enum class, its number of values and their names, all from
// one X-macro list, so that a new row is the only edit:
//
//   #define LAZYLUA_COLOURS(X) X(red) X(green)
//   LAZYLUA_X_ENUM(Colour, int, LAZYLUA_COLOURS)
//   // enum class Colour : int {red, green};
//   // kColourCount == 2, kColourNames[1] == "green"
#pragma once

#define LAZYLUA_X_ENUM_VALUE(name) name,
#define LAZYLUA_X_ENUM_NAME(name) #name,
#define LAZYLUA_X_ENUM_ONE(name) +1

#define LAZYLUA_X_ENUM(Type, Underlying, LIST)                      \
  enum class Type : Underlying { LIST(LAZYLUA_X_ENUM_VALUE) };      \
  inline constexpr int k##Type##Count = 0 LIST(LAZYLUA_X_ENUM_ONE); \
  inline constexpr const char* k##Type##Names[] = {LIST(LAZYLUA_X_ENUM_NAME)};
