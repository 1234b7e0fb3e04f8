# Third-party packages, all from Debian 12 (scripts/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(Boost 1.74 REQUIRED)          # header-only parts: Boost.Math
find_package(Eigen3 3.4 REQUIRED NO_MODULE)  # header-only: Eigen::bfloat16 (common/bf16.cc)
find_package(OpenMP REQUIRED)
if(SKETCHPS_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)  # job text hashes (job/job_spec.cc)
find_package(prometheus-cpp CONFIG REQUIRED)  # no version argument: Debian ships no version file
