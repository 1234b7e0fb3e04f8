# tests/bench, the load generator's part (bench/loadgen/) and its scaling model (bench/scaling/model.py).
# Included from tests/CMakeLists.txt after the `bench` suite (sketchps_bench_tests, which links
# sketchps::loadgen); this file runs in that directory's scope.
#   bench/<Catch test name>    the loadgen's synthetic gradients, figures, Prometheus reader, option
#                              checks and counter assembly (unit), and short real runs against two
#                              sketchps-server processes, byte counts against the schemes' formulas
#                              (tagged [processes])
#   bench/scaling_model        model.py's fits and crossovers on synthetic data with known parameters
#   bench/sim_map              bench/sim/map.py's gaps, verdicts, deciding cells and plots on known rows
#   bench/gpu_tools            bench/gpu/fmnist_subset.py and gpu_report.py (the GPU acceptance run's
#                              data subset and tables) on inputs with known answers, no GPU
if(TARGET sketchps_bench_tests)
  add_dependencies(sketchps_bench_tests sketchps-server)
  target_compile_definitions(sketchps_bench_tests PRIVATE SKETCHPS_SERVER_BIN="$<TARGET_FILE:sketchps-server>")
endif()
find_program(SKETCHPS_BENCH_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH REQUIRED)
add_test(NAME bench/scaling_model
         COMMAND ${SKETCHPS_BENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bench/scaling_model_test.py)
set_tests_properties(bench/scaling_model PROPERTIES LABELS "unit;bench" TIMEOUT 120)
add_test(NAME bench/sim_map COMMAND ${SKETCHPS_BENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bench/sim_map_test.py)
set_tests_properties(bench/sim_map PROPERTIES LABELS "unit;bench" TIMEOUT 120)
add_test(NAME bench/gpu_tools COMMAND ${SKETCHPS_BENCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bench/gpu_tools_test.py)
set_tests_properties(bench/gpu_tools PROPERTIES LABELS "unit;bench" TIMEOUT 120)
