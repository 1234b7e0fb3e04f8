#include "launch/binaries.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launch/child.h"

namespace sketchps::launch {
namespace fs = std::filesystem;

const char* ProgramName(Program program) {
  switch (program) {
    case Program::kServer: return "sketchps-server";
    case Program::kWorker: return "sketchps-worker";
    case Program::kFrontEnd: return "sketchps";
    case Program::kBench: return "sketchps-bench";
    case Program::kSim: return "sketchps-sim";
  }
  return "sketchps";
}

const char* ProgramFolder(Program program) {
  switch (program) {
    case Program::kServer: return "server";
    case Program::kWorker: return "worker";
    case Program::kFrontEnd: return "tools";
    case Program::kBench: return "bench";
    case Program::kSim: return "sim";
  }
  return "tools";
}

absl::StatusOr<std::string> FindBinary(Program program, const std::string& bin_dir) {
  const fs::path base = bin_dir.empty() ? fs::path(SelfExecutable()).parent_path() : fs::path(bin_dir);
  const std::string name = ProgramName(program);
  std::vector<fs::path> candidates{base / name, base / ProgramFolder(program) / name};
  if (bin_dir.empty()) candidates.push_back(base.parent_path() / ProgramFolder(program) / name);
  std::vector<std::string> tried;
  for (const auto& c : candidates) {
    if (access(c.c_str(), X_OK) == 0) return c.string();
    tried.push_back(c.string());
  }
  return absl::NotFoundError(absl::StrCat(name, " not found (tried ", absl::StrJoin(tried, ", "), "); use --bin-dir"));
}

}  // namespace sketchps::launch
