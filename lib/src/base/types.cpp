#include "collx/types.hpp"

#include <stdexcept>
#include <string>

namespace collx {

void detail::throw_not_a_type(DataType type) {
  throw std::out_of_range("collx: " + std::to_string(static_cast<int>(type)) +
                          " is not a DataType");
}

}  // namespace collx
