# Every public header must compile on its own ("include what you use"): one
# translation unit per header, each including only that header (twice, to
# prove the include guard), compiled
#   * by nvcc for the configured architectures (tilekit_header_check), and
#   * by the host C++ compiler alone (tilekit_header_check_host): host code
#     (a framework's C++ dispatch layer, a .cpp test) may include tilekit
#     headers, so device-only code must sit behind #if defined(__CUDACC__).
# A header that is device-only by design goes in
# TILEKIT_HOST_HEADER_CHECK_EXCLUDE (paths relative to include/).
set(TILEKIT_HOST_HEADER_CHECK_EXCLUDE "" CACHE STRING
  "Public headers (relative to include/) exempt from the host-compiler self-containment check")

file(GLOB_RECURSE _tilekit_public_headers RELATIVE ${PROJECT_SOURCE_DIR}/include
  CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/tilekit/*.cuh)
set(_cuda_sources)
set(_host_sources)
foreach(header IN LISTS _tilekit_public_headers)
  string(MAKE_C_IDENTIFIER ${header} stem)
  set(content "#include <${header}>\n#include <${header}>  // include guard works\n")
  set(src ${CMAKE_CURRENT_BINARY_DIR}/header_check/${stem}.cu)
  file(CONFIGURE OUTPUT ${src} CONTENT "${content}")
  list(APPEND _cuda_sources ${src})
  if(NOT header IN_LIST TILEKIT_HOST_HEADER_CHECK_EXCLUDE)
    set(src ${CMAKE_CURRENT_BINARY_DIR}/header_check/${stem}.cpp)
    file(CONFIGURE OUTPUT ${src} CONTENT "${content}")
    list(APPEND _host_sources ${src})
  endif()
endforeach()

add_library(tilekit_header_check OBJECT ${_cuda_sources})
target_link_libraries(tilekit_header_check PRIVATE tilekit::tilekit tilekit_build_flags)
add_library(tilekit_header_check_host OBJECT ${_host_sources})
target_link_libraries(tilekit_header_check_host PRIVATE tilekit::tilekit tilekit_build_flags)
