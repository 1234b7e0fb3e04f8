# tests/bench: the load generator (bench/loadgen.h).
# Included from tests/CMakeLists.txt (this file runs in that directory's scope).
#   bench/<Catch test name>    sketchps_bench_tests: synthetic gradients, figures, Prometheus
#                              reader, and short real runs against two sketchps-server processes
sketchps_add_test_suite(bench sketchps::loadgen)
if(TARGET sketchps_bench_tests)
  add_dependencies(sketchps_bench_tests sketchps-server)
  target_compile_definitions(sketchps_bench_tests PRIVATE SKETCHPS_SERVER_BIN="$<TARGET_FILE:sketchps-server>")
endif()
