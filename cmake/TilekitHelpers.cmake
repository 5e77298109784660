# Helpers for tilekit's own targets (tests, examples, benchmarks).

# tilekit_add_test(<name> <sources...> [LIBS <libs...>] [DEFINITIONS <defs...>] [SUFFIX <suffix>])
# A GoogleTest binary registered with ctest. Discovery runs at test time
# (PRE_TEST), so building never executes a binary that touches the GPU.
# DEFINITIONS: compile definitions of this binary only; SUFFIX: appended to its
# ctest names (a second build of a source must not register the same names).
function(tilekit_add_test name)
  cmake_parse_arguments(ARG "" "SUFFIX" "LIBS;DEFINITIONS" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE tilekit::tilekit tilekit_build_flags tilekit_test_common GTest::gtest_main ${ARG_LIBS})
  if(ARG_DEFINITIONS)
    target_compile_definitions(${name} PRIVATE ${ARG_DEFINITIONS})
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 TEST_SUFFIX "${ARG_SUFFIX}"
    PROPERTIES TIMEOUT 300)
endfunction()

# tilekit_add_example(<name> <sources...>)
# Examples verify their own result and exit non-zero when it is wrong; without
# an sm_90 GPU they print why and exit 0. The run_examples target runs them all.
function(tilekit_add_example name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE tilekit::tilekit tilekit_build_flags)
  set_property(GLOBAL APPEND PROPERTY TILEKIT_EXAMPLES ${name})
endfunction()

# tilekit_add_bench(<name> <sources...> [LIBS <libs...>])
function(tilekit_add_bench name)
  cmake_parse_arguments(ARG "" "" "LIBS" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE tilekit::tilekit tilekit_build_flags tilekit_bench_harness ${ARG_LIBS})
endfunction()
