#include "validate.hpp"

#include <string>

namespace collx::detail {

void ArgCheck::fail(ErrorCode code, std::string_view message) const {
  throw Error(code, to_string(collective_), rank_, message);
}

void ArgCheck::bad_type(DataType type) const {
  fail(ErrorCode::invalid_argument,
       "type: invalid DataType value " + std::to_string(static_cast<int>(type)));
}

void ArgCheck::bad_op(DataType type, ReduceOp op) const {
  if (static_cast<unsigned>(op) >= kReduceOpCount) {
    fail(ErrorCode::invalid_argument,
         "op: invalid ReduceOp value " + std::to_string(static_cast<int>(op)));
  }
  fail(ErrorCode::unsupported, "op: " + std::string(to_string(op)) + " is not defined for " +
                                   std::string(to_string(type)) + " (avg needs a floating type)");
}

void ArgCheck::bad_count(std::size_t count, DataType type, int nranks) const {
  fail(ErrorCode::invalid_argument,
       "count: " + std::to_string(count) + " elements of " + std::string(to_string(type)) +
           (nranks == 1 ? "" : " for each of " + std::to_string(nranks) + " ranks") +
           " exceed the largest possible buffer");
}

void ArgCheck::null_buffer(std::string_view name) const {
  fail(ErrorCode::invalid_argument, std::string(name) + ": null pointer with a non-zero count");
}

void ArgCheck::overlap(std::string_view a_name, std::string_view b_name) const {
  fail(ErrorCode::invalid_argument,
       std::string(a_name) + " and " + std::string(b_name) +
           " overlap without being the same buffer (pass the same pointer, or collx::in_place, "
           "for an in-place call)");
}

void ArgCheck::bad_rank(int value, int size, std::string_view name) const {
  fail(ErrorCode::invalid_argument, std::string(name) + ": " + std::to_string(value) +
                                        " is not a rank of a communicator of " +
                                        std::to_string(size));
}

}  // namespace collx::detail
