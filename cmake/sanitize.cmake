# COLLX_SANITIZE: build the project's own code (library, kernels, apps, tests) with compiler
# sanitizers. Empty (default): none. "address,undefined": AddressSanitizer and
# UndefinedBehaviorSanitizer together. "thread": ThreadSanitizer (it cannot be combined with
# address). Third-party code (MPI, GoogleTest, OpenBLAS) stays as installed: its bugs are not
# reported, and its allocations are only seen through the interceptors.
#
#   cmake -S . -B build-asan -DCOLLX_SANITIZE=address,undefined -DCOLLX_LTO=OFF ...
#   ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan -L unit
#
# Undefined behaviour stops the program (-fno-sanitize-recover) so that a test fails on it
# rather than printing a line nobody reads. -g1 (line tables) makes every report name file:line.
# run-tests.sh runs a subset in $BUILD_DIR-asan (README, "The two commands").
set(COLLX_SANITIZE "" CACHE STRING
    "Sanitizers for project code: empty, address,undefined (or either alone), or thread")
set_property(CACHE COLLX_SANITIZE PROPERTY STRINGS "" "address,undefined" "address" "undefined"
             "thread")

if(COLLX_SANITIZE)
  string(REPLACE "," ";" collx_sanitizers "${COLLX_SANITIZE}")
  foreach(s IN LISTS collx_sanitizers)
    if(NOT s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "COLLX_SANITIZE=${COLLX_SANITIZE}: ${s} is not one of address, "
                          "undefined, thread")
    endif()
  endforeach()
  if("thread" IN_LIST collx_sanitizers AND "address" IN_LIST collx_sanitizers)
    message(FATAL_ERROR "COLLX_SANITIZE=${COLLX_SANITIZE}: thread and address cannot be combined")
  endif()
  # No link-time optimisation (faster links, clearer stacks): a normal variable, which the
  # option() in lib/CMakeLists.txt leaves alone (policy CMP0077).
  set(COLLX_LTO OFF)
  set(collx_sanitize_flags -fsanitize=${COLLX_SANITIZE} -fno-omit-frame-pointer -g1)
  if("undefined" IN_LIST collx_sanitizers)
    list(APPEND collx_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  # C and C++ (not CUDA: nvcc does not take these flags) of every target defined after this
  # point, which is all of the project's.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${collx_sanitize_flags}>")
  add_link_options(-fsanitize=${COLLX_SANITIZE})
  message(STATUS "collx: sanitizers ${COLLX_SANITIZE}")
endif()
