// error.cpp - internal assertion failures.
#include "error.h"

namespace lazylua {

void internal_error(const char* file, int line, const char* condition) {
  throw InternalError(fmt::format("internal error in lazylua ({}:{}: {}); please report it", file,
                                  line, condition));
}

}  // namespace lazylua
