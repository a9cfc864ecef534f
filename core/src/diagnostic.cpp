// User-facing errors with a file and place.
#include "tessera/diagnostic.hpp"

namespace tessera {

static std::string with_place(const std::string& file, int line, int column,
                              const std::string& message) {
  std::string where = file;
  if (line > 0) where += ":" + std::to_string(line);
  if (line > 0 && column > 0) where += ":" + std::to_string(column);
  return where + ": " + message;
}

Error::Error(const std::string& file, int line, int column, const std::string& message)
    : std::runtime_error(with_place(file, line, column, message)) {}

}  // namespace tessera
