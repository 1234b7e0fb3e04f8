# Project-wide compile options, exposed as INTERFACE targets that every library links PRIVATE.
add_library(sketchps_warnings INTERFACE)
target_compile_options(sketchps_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)
# clang checks the lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...) and fails
# the build on a violation; CI builds the `fuzz` preset with clang, so every push is checked.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  target_compile_options(sketchps_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety -Werror=thread-safety>)
endif()

# Optimization: a Release build compiles at -O2, and the code where a round's arithmetic runs (the
# kernels, the engine, the schemes, the payload codecs) at -O3 (sketchps_hot_code). The control
# plane (RPC services, configuration, launchers, tools) spends its time in RPCs and waits, and -O3
# cost a fifth more compile time there: minutes of every CI run on 2 cores.
string(REPLACE "-O3" "-O2" CMAKE_CXX_FLAGS_RELEASE "${CMAKE_CXX_FLAGS_RELEASE}")
function(sketchps_hot_code)
  foreach(target IN LISTS ARGN)
    target_compile_options(${target} PRIVATE $<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:-O3>)
  endforeach()
endfunction()

add_library(sketchps_sanitizers INTERFACE)
if(SKETCHPS_SANITIZE)
  target_compile_options(sketchps_sanitizers INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${SKETCHPS_SANITIZE} -fno-omit-frame-pointer>)
  target_link_options(sketchps_sanitizers INTERFACE -fsanitize=${SKETCHPS_SANITIZE})
endif()
# Fuzzing: libFuzzer's coverage instrumentation in every library (the harnesses link the fuzzer).
if(SKETCHPS_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SKETCHPS_FUZZ needs clang (libFuzzer); use the `fuzz` preset (clang++-14)")
  endif()
  target_compile_options(sketchps_sanitizers INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()

# sketchps_add_library(name [sources...] [HEADERS headers...]): a static library in the current
# folder, aliased sketchps::name, that sees the repository root as its include root (includes read
# "common/status.h", "kernels/count_sketch.h", ...). HEADERS are its public headers, what its
# dependents may include (cmake/SketchpsLayers.cmake checks it); by default the headers of the first
# source's folder, with those of its internal/ subfolder as private ones.
function(sketchps_add_library name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "HEADERS")
  add_library(sketchps_${name} STATIC ${ARG_UNPARSED_ARGUMENTS})
  add_library(sketchps::${name} ALIAS sketchps_${name})
  target_include_directories(sketchps_${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(sketchps_${name} PRIVATE sketchps_warnings PUBLIC sketchps_sanitizers)
  if(NOT ARG_HEADERS)
    list(GET ARG_UNPARSED_ARGUMENTS 0 first)
    get_filename_component(first ${first} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    get_filename_component(folder ${first} DIRECTORY)
    file(GLOB ARG_HEADERS CONFIGURE_DEPENDS ${folder}/*.h)
    file(GLOB private CONFIGURE_DEPENDS ${folder}/internal/*.h)
  endif()
  sketchps_declare_headers(sketchps_${name} PUBLIC ${ARG_HEADERS} PRIVATE ${private})
endfunction()
