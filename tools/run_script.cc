#include "tools/run_script.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "launch/child.h"

namespace sketchps::tools {
namespace fs = std::filesystem;

std::string PackagePythonPath(const ScriptOptions& script) {
  const std::string package = script.python_path.empty()
                                  ? (fs::path(launch::SelfExecutable()).parent_path().parent_path() / "python").string()
                                  : script.python_path;
  const char* existing = std::getenv("PYTHONPATH");
  return existing && *existing ? absl::StrCat(package, ":", existing) : package;
}

namespace {

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::vector<std::string> ScriptArgv(const ScriptOptions& script) {
  std::vector<std::string> argv{script.python, script.path};
  argv.insert(argv.end(), script.args.begin(), script.args.end());
  return argv;
}

std::vector<std::string> ScriptEnv(const ScriptOptions& script, const launch::WorkerLaunch& w) {
  std::vector<std::string> env{absl::StrCat("RANK=", w.rank),
                               absl::StrCat("LOCAL_RANK=", w.rank),
                               absl::StrCat("WORLD_SIZE=", w.world_size),
                               "SKETCHPS_JOB=" + w.job_path,
                               "SKETCHPS_METRICS_OUT=" + w.metrics_out,
                               "PYTHONPATH=" + PackagePythonPath(script)};
  if (!w.servers.empty()) env.push_back("SKETCHPS_SERVERS=" + absl::StrJoin(w.servers, ","));
  if (!w.listen.empty()) {
    env.insert(env.end(), {"SKETCHPS_LISTEN=" + w.listen, "SKETCHPS_PORT_FILE=" + w.port_file,
                           "SKETCHPS_PEERS_FILE=" + w.peers_file});
  }
  env.push_back(w.tls_dir.empty() ? "SKETCHPS_INSECURE=1" : "SKETCHPS_TLS_DIR=" + w.tls_dir);
  if (w.peer_timeout_seconds > 0) env.push_back(absl::StrCat("SKETCHPS_PEER_TIMEOUT_SECONDS=", w.peer_timeout_seconds));
  return env;
}

absl::StatusOr<std::vector<std::string>> DescribeScript(const ScriptOptions& script, const std::string& job_yaml,
                                                        std::uint32_t workers) {
  if (access(script.path.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--script ", script.path, ": cannot read the file"));
  }
  char dir_template[] = "/tmp/sketchps-describe-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return absl::InternalError("--script: cannot make a temporary folder");
  const fs::path dir(dir_template);
  std::ofstream(dir / "job.yaml") << job_yaml;
  std::vector<std::string> env{"SKETCHPS_DESCRIBE=" + (dir / "keys.txt").string(),
                               "SKETCHPS_JOB=" + (dir / "job.yaml").string(),
                               "RANK=0",
                               absl::StrCat("WORLD_SIZE=", workers),
                               "PYTHONPATH=" + PackagePythonPath(script),
                               "OMP_NUM_THREADS=1"};
  SKETCHPS_ASSIGN_OR_RETURN(launch::Child child,
                            launch::Child::Start("script", ScriptArgv(script), (dir / "describe.log").string(), env));
  const absl::Time deadline = absl::Now() + absl::Minutes(5);
  std::optional<int> status;
  while (!(status = child.Poll()) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  if (!status) status = child.Stop(absl::Seconds(5));
  const bool wrote = fs::exists(dir / "keys.txt");
  const std::string keys = wrote ? ReadAll(dir / "keys.txt") : "";
  const std::string tail = child.LogTail(10);
  fs::remove_all(dir);
  if (*status != 0 || !wrote) {
    return absl::InvalidArgumentError(absl::StrCat("--script ", script.path, ": describing its model ",
                                                   *status != 0 ? absl::StrCat("failed with exit code ", *status)
                                                                : "wrote nothing (does it make a "
                                                                  "sketchps.torch.DistributedOptimizer?)",
                                                   "; last output lines:\n", tail));
  }
  std::vector<std::string> overrides;
  for (absl::string_view line : absl::StrSplit(keys, '\n', absl::SkipWhitespace())) {
    overrides.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return overrides;
}

}  // namespace sketchps::tools
