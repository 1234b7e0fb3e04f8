# `cmake --install` and the relocatable bundle (scripts/bundle.sh, docs/gpu.md): the binaries in
# bin/, the kernels in lib/ and lib/cuda/, every shared library they need but the C and C++ runtimes
# (CMake's runtime dependency sets, resolved on the build machine) in lib/, all found through RPATH
# $ORIGIN/..., so the tree runs from any folder of a host that has only glibc, libstdc++ and, for
# CUDA, the driver. Components: `runtime` (the daemons, the front end, the benchmarks, the Python
# package's core library and header), `tests` (the unit suites that run on a GPU: kernels, engine,
# schemes), `worker` (the libtorch worker, which needs Debian's libtorch on the host: it is not part
# of the bundle).
include(GNUInstallDirs)
set(SKETCHPS_BUNDLE_EXCLUDES  # library names, as the binaries ask for them
  # the C and C++ runtimes and the dynamic loader come from the host
  "^ld-linux" "^libc\\.so" "^libm\\.so" "^libdl\\.so" "^librt\\.so" "^libpthread\\.so" "^libresolv\\.so"
  "^libstdc\\+\\+\\.so" "^libgcc_s\\.so"
  # the GPU driver comes from the host
  "^libcuda\\.so"
  # installed as targets of their own
  "^libsketchps_kernels\\.so")

set_target_properties(sketchps sketchps-server sketchps-bench PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
set_target_properties(sketchps_kernels PROPERTIES INSTALL_RPATH "$ORIGIN")
install(TARGETS sketchps sketchps-server sketchps-bench sketchps_kernels
        RUNTIME_DEPENDENCY_SET sketchps_runtime_deps
        RUNTIME DESTINATION bin COMPONENT runtime
        LIBRARY DESTINATION lib COMPONENT runtime)
if(TARGET sketchps_kernels_cuda)
  set_target_properties(sketchps_kernels_cuda PROPERTIES INSTALL_RPATH "$ORIGIN/..")
  install(TARGETS sketchps_kernels_cuda LIBRARY DESTINATION lib/cuda COMPONENT runtime)
endif()
# The Python package's core and its header (python/CMakeLists.txt): pip builds sketchps._core against
# them on the node, for its own Python and torch (python/setup.py with SKETCHPS_PREFIX=<prefix>).
if(TARGET sketchps_python_core)
  set_target_properties(sketchps_python_core PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS sketchps_python_core RUNTIME_DEPENDENCY_SET sketchps_runtime_deps
          LIBRARY DESTINATION lib COMPONENT runtime)
  install(FILES ${PROJECT_SOURCE_DIR}/python/include/sketchps/python_core.h DESTINATION include/sketchps
          COMPONENT runtime)
endif()
if(SKETCHPS_BUILD_TESTS)
  set(gpu_suites sketchps_kernels_tests sketchps_engine_tests sketchps_schemes_tests)
  set_target_properties(${gpu_suites} PROPERTIES INSTALL_RPATH "$ORIGIN/../../../lib")
  # A set of their own, so that installing `runtime` needs no test binary built.
  install(TARGETS ${gpu_suites} RUNTIME_DEPENDENCY_SET sketchps_test_deps
          RUNTIME DESTINATION libexec/sketchps/tests COMPONENT tests)
  install(RUNTIME_DEPENDENCY_SET sketchps_test_deps PRE_EXCLUDE_REGEXES ${SKETCHPS_BUNDLE_EXCLUDES}
          DIRECTORIES ${CMAKE_BINARY_DIR}/lib LIBRARY DESTINATION lib COMPONENT tests)
endif()
install(RUNTIME_DEPENDENCY_SET sketchps_runtime_deps
        PRE_EXCLUDE_REGEXES ${SKETCHPS_BUNDLE_EXCLUDES}
        DIRECTORIES ${CMAKE_BINARY_DIR}/lib
        LIBRARY DESTINATION lib COMPONENT runtime)
set_target_properties(sketchps-worker PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
install(TARGETS sketchps-worker RUNTIME DESTINATION bin COMPONENT worker)
