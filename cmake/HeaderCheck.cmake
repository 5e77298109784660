# Every public header must compile on its own ("include what you use"): one
# translation unit per header, each including only that header, compiled by
# nvcc for the configured architectures.
file(GLOB_RECURSE _tilekit_public_headers RELATIVE ${PROJECT_SOURCE_DIR}/include
  CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/tilekit/*.cuh)
set(_sources)
foreach(header IN LISTS _tilekit_public_headers)
  string(MAKE_C_IDENTIFIER ${header} stem)
  set(src ${CMAKE_CURRENT_BINARY_DIR}/header_check/${stem}.cu)
  file(CONFIGURE OUTPUT ${src} CONTENT "#include <${header}>\n#include <${header}>  // include guard works\n")
  list(APPEND _sources ${src})
endforeach()
add_library(tilekit_header_check OBJECT ${_sources})
target_link_libraries(tilekit_header_check PRIVATE tilekit::tilekit tilekit_build_flags)
