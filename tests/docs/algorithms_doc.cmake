# docs_algorithms: runs the command docs/ALGORITHMS.md's header gives (MODEL: collx-model) into
# OUT and fails, with the difference, when the committed file (COMMITTED, by default
# docs/ALGORITHMS.md) is not its output.
if(NOT COMMITTED)
  set(COMMITTED ${SOURCE}/docs/ALGORITHMS.md)
endif()
execute_process(
  COMMAND ${MODEL} --algorithms-doc ${SOURCE}/docs/algorithms --alpha-us 2 --bandwidth-gbps 12.5
          --gamma-gbps 10 --copy-gbps 20 -p 2 8 64 512 4096
  OUTPUT_FILE ${OUT}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "collx-model --algorithms-doc failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${COMMITTED} ${OUT}
                RESULT_VARIABLE differs)
if(differs)
  execute_process(COMMAND diff -u ${COMMITTED} ${OUT})
  message(FATAL_ERROR "docs/ALGORITHMS.md is stale: run the command in its header and commit "
                      "the file (generated: ${OUT})")
endif()
