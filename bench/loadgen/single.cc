#include "bench/loadgen/single.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/loadgen/config_run.h"
#include "bench/loadgen/server_fleet.h"
#include "common/status.h"
#include "launch/binaries.h"

namespace sketchps::bench {
namespace fs = std::filesystem;
namespace {

struct SingleArg {
  std::string mode, scheme;
  std::uint32_t workers = 0;
};

absl::StatusOr<SingleArg> ParseSingle(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  SingleArg a;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[2], &a.workers)) {
    return absl::InvalidArgumentError(absl::StrCat("--single '", text, "' is not mode:scheme:P"));
  }
  a.mode = parts[0];
  a.scheme = parts[1];
  return a;
}

absl::StatusOr<std::string> MakeTempDir() {
  std::string tmpl = (fs::temp_directory_path() / "sketchps-loadgen-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a work directory in ", fs::temp_directory_path().string()));
  }
  return tmpl;
}

// The configuration `arg` names, with the other flags' values.
absl::StatusOr<ConfigSpec> SpecFor(const LoadgenOptions& o, const SingleArg& arg) {
  LoadgenOptions one = o;
  one.modes = {arg.mode};
  one.schemes = {arg.scheme};
  one.workers = {arg.workers};
  std::vector<ConfigSpec> specs = SweepConfigs(one);
  if (specs.size() != 1) return absl::InvalidArgumentError(absl::StrCat("--single: no such configuration"));
  ConfigSpec spec = std::move(specs[0]);
  if (spec.mode == "ps") {
    SKETCHPS_ASSIGN_OR_RETURN(spec.server_bin, launch::FindBinary(launch::Program::kServer, o.bin_dir));
  }
  spec.work_dir = o.work_dir;
  if (spec.work_dir.empty()) {
    SKETCHPS_ASSIGN_OR_RETURN(spec.work_dir, MakeTempDir());
  }
  spec.progress = [](const std::string& line) { std::fprintf(stderr, "loadgen: %s\n", line.c_str()); };
  return spec;
}

absl::StatusOr<nlohmann::json> Measure(const ConfigSpec& spec) {
  SKETCHPS_ASSIGN_OR_RETURN(const Measurement m, RunConfiguration(spec));
  SKETCHPS_ASSIGN_OR_RETURN(const Figures f, Derive(m));
  return ToJson(m, f);
}

void Write(const nlohmann::json& out, const std::string& path) {
  if (path.empty()) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::ofstream(path + ".tmp") << out.dump(2) << "\n";
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
  if (ec) std::fprintf(stderr, "loadgen: --out %s: %s\n", path.c_str(), ec.message().c_str());
}

}  // namespace

int RunSingle(const LoadgenOptions& o) {
  auto arg = ParseSingle(o.single);
  if (!arg.ok()) {
    std::fprintf(stderr, "sketchps loadgen: %s\n", std::string(arg.status().message()).c_str());
    return 2;
  }
  nlohmann::json out{{"mode", arg->mode}, {"scheme", arg->scheme}, {"workers", arg->workers}};
  auto spec = SpecFor(o, *arg);
  auto result = spec.ok() ? Measure(*spec) : absl::StatusOr<nlohmann::json>(spec.status());
  if (result.ok()) {
    out["result"] = *std::move(result);
    std::error_code ec;
    if (o.work_dir.empty()) fs::remove_all(spec->work_dir, ec);
  } else {
    out["error"] = std::string(result.status().message());
    std::fprintf(stderr, "loadgen: %s %s P=%u: error: %s\n", arg->mode.c_str(), arg->scheme.c_str(), arg->workers,
                 std::string(result.status().message()).c_str());
  }
  Write(out, o.out);
  return result.ok() ? 0 : 1;
}

}  // namespace sketchps::bench
