// Compiled by the layering tests (tests/CMakeLists.txt): a header of the policy layer, which
// the policy layer and the layers above it may include and the layers below it may not.
#include "config.hpp"
#include "selector.hpp"

int main() {
  return 0;
}
