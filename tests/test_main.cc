// The one Catch2 main of all test binaries (compiled once: it is the slowest TU of the tree).
//
// Beyond Catch's own main: a run whose filter matches no test case fails (WarnAbout::NoTests), and a
// binary with a test case name containing ';', '[' or ']' refuses to run its tests. CMake's discovery
// splits names at ';' and joins them across an unclosed '[' (tests/CMakeLists.txt); the resulting
// filters would match nothing. Listing is never refused: a refused listing reads, to CMake's
// discovery, as a suite of no tests, which every lane would then leave out without a word (the
// common suite was, for a day); listed, every test of the suite runs and fails with the message.
// tests/structure/test_test_names.py checks the names on the sources.
//
// Every test process, and the daemons it starts, runs with the kernels' device memory checks on
// (kernels/backend.h): a kernel handed a host pointer fails with an error naming it, on the CPU as
// it would on a GPU. SKETCHPS_KERNELS_CHECK_POINTERS=0 in the environment turns them off.
#define CATCH_CONFIG_RUNNER
#include <stdlib.h>

#include <iostream>
#include <string>

#include <catch2/catch.hpp>

int main(int argc, char* argv[]) {
  setenv("SKETCHPS_KERNELS_CHECK_POINTERS", "1", /*overwrite=*/0);
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  auto& data = session.configData();
  data.warnings = static_cast<Catch::WarnAbout::What>(data.warnings | Catch::WarnAbout::NoTests);
  const bool listing = data.listTests || data.listTestNamesOnly || data.listTags || data.listReporters;
  for (const auto& test : Catch::getAllTestCasesSorted(session.config())) {
    if (listing) break;
    if (test.name.find_first_of(";[]") != std::string::npos) {
      std::cerr << "test case name contains ';', '[' or ']' (CMake's test discovery would mangle it): " << test.name
                << "\n";
      return 1;
    }
  }
  return session.run();
}
