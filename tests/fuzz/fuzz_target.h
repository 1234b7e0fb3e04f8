// The fuzz harnesses' common ground (tests/fuzz/*_fuzz.cc): every place where bytes from the
// network or from a file become structured data has one harness.
//
// Each harness defines LLVMFuzzerTestOneInput and is built one of two ways (tests/fuzz/CMakeLists.txt):
//   - SKETCHPS_FUZZ=ON (clang, the `fuzz` preset): a libFuzzer binary under ASan and UBSan, which
//     scripts/fuzz.sh runs for a bounded time starting from the committed corpus;
//   - otherwise: linked with replay_main.cc, a ctest test that replays the corpus and a fixed number
//     of deterministic mutations of it in every test run.
// A harness returns 0 for every input. It checks invariants that must hold whatever the input
// (an accepted value re-encodes to itself, no status without a message, ...); a broken one calls
// Fail, which prints the harness, the invariant and aborts, so both drivers report it as a crash.
// A harness calls NoteAccepted() when the input made it through the decoder: the replay driver
// checks that corpus files named ok-* are accepted and files named bad-* are not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/spdlog.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace sketchps::fuzz {

[[noreturn]] inline void Fail(const char* harness, const std::string& what) {
  std::fprintf(stderr, "%s: invariant broken: %s\n", harness, what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void Require(bool ok, const char* harness, const std::string& what) {
  if (!ok) Fail(harness, what);
}

// Refusals name their problem: a non-OK status always carries a message.
inline void RequireNamed(const absl::Status& status, const char* harness) {
  if (!status.ok() && status.message().empty()) Fail(harness, "a status without a message: " + status.ToString());
}

// Harnesses run quietly: no daemon log lines and no protobuf parse warnings per input.
inline const bool kQuiet = [] {
  spdlog::set_level(spdlog::level::off);
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return true;
}();

// Inputs accepted so far in this process (the replay driver reads it).
inline int& AcceptedCount() {
  static int count = 0;
  return count;
}
inline void NoteAccepted() { ++AcceptedCount(); }

// File harnesses: byte-level mutations almost never keep a CRC valid, so the first byte chooses
// what the rest is: 'F' the file's bytes as they are; anything else the payload, which the harness
// frames with a valid header and CRC (FrameBytes), so the fuzzer reaches the content checks too.
template <std::size_t N>
std::string FileBytes(const std::uint8_t* data, std::size_t size, const char (&magic)[N],
                      std::string (*frame)(const char (&)[N], const std::string&)) {
  if (size == 0) return {};
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  return data[0] == 'F' ? rest : frame(magic, rest);
}

inline std::string_view AsText(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace sketchps::fuzz
