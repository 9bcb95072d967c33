// The engine-independent pieces of sql::Database: reading integer cells, lock names.
#include "bdn/sql/database.h"

#include <charconv>

namespace bdn::sql {

int64_t Rows::Int(size_t row, int col) const {
  const auto& cell = Cell(row, col);
  if (!cell) return 0;
  int64_t v = 0;
  std::from_chars(cell->data(), cell->data() + cell->size(), v);
  return v;
}

bool IsValidLockName(std::string_view name) {
  if (name.empty() || name.size() > 200) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '~' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status CheckLockName(std::string_view name) {
  if (IsValidLockName(name)) return Status::Ok();
  return InvalidArgumentError("lock \"" + std::string(name) + "\": not a valid name");
}

}  // namespace bdn::sql
