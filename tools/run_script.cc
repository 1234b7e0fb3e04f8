#include "tools/run_script.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "launch/child.h"
#include "launch/ports.h"
#include "yaml-cpp/yaml.h"

namespace sketchps::tools {
namespace fs = std::filesystem;

bool HoldsBuiltPackage(const std::string& folder) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(fs::path(folder) / "sketchps", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("_core", 0) == 0 && entry.path().extension() == ".so") return true;
  }
  return false;
}

std::string PackagePythonPath(const ScriptOptions& script) {
  std::string package = script.python_path;
  if (package.empty()) {
    const std::string beside = (fs::path(launch::SelfExecutable()).parent_path().parent_path() / "python").string();
    if (HoldsBuiltPackage(beside)) package = beside;
  }
  if (package.empty()) return "";  // the environment's PYTHONPATH, inherited, stays as it is
  const char* existing = std::getenv("PYTHONPATH");
  return existing && *existing ? absl::StrCat(package, ":", existing) : package;
}

namespace {

void AddPythonPath(const ScriptOptions& script, std::vector<std::string>* env) {
  if (const std::string path = PackagePythonPath(script); !path.empty()) env->push_back("PYTHONPATH=" + path);
}

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
  std::vector<std::string> env{absl::StrCat("RANK=", w.rank), absl::StrCat("LOCAL_RANK=", w.rank),
                               absl::StrCat("WORLD_SIZE=", w.world_size), "SKETCHPS_JOB=" + w.job_path,
                               "SKETCHPS_METRICS_OUT=" + w.metrics_out};
  AddPythonPath(script, &env);
  if (script.master_port > 0) {
    env.insert(env.end(), {"MASTER_ADDR=127.0.0.1", absl::StrCat("MASTER_PORT=", script.master_port)});
  }
  if (!w.servers.empty()) env.push_back("SKETCHPS_SERVERS=" + absl::StrJoin(w.servers, ","));
  if (!w.state_dir.empty()) env.push_back("SKETCHPS_STATE_DIR=" + w.state_dir);
  if (!w.checkpoint_key_file.empty()) env.push_back("SKETCHPS_CHECKPOINT_KEY_FILE=" + w.checkpoint_key_file);
  if (w.state_every_rounds > 0) env.push_back(absl::StrCat("SKETCHPS_STATE_EVERY_ROUNDS=", w.state_every_rounds));
  if (!w.listen.empty()) {
    env.insert(env.end(), {"SKETCHPS_LISTEN=" + w.listen, "SKETCHPS_PORT_FILE=" + w.port_file,
                           "SKETCHPS_PEERS_FILE=" + w.peers_file});
  }
  env.push_back(w.tls_dir.empty() ? "SKETCHPS_INSECURE=1" : "SKETCHPS_TLS_DIR=" + w.tls_dir);
  if (w.peer_timeout_seconds > 0) env.push_back(absl::StrCat("SKETCHPS_PEER_TIMEOUT_SECONDS=", w.peer_timeout_seconds));
  return env;
}

absl::StatusOr<std::vector<std::string>> DescribeScript(const ScriptOptions& script, const std::string& job_yaml) {
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
                               "LOCAL_RANK=0",
                               "WORLD_SIZE=1",
                               "OMP_NUM_THREADS=1"};
  AddPythonPath(script, &env);
  if (auto port = launch::FreeLocalPort(); port.ok()) {
    env.insert(env.end(), {"MASTER_ADDR=127.0.0.1", absl::StrCat("MASTER_PORT=", *port)});
  }
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

namespace {

// "key=value" split at the first '='.
std::pair<std::string, std::string> SplitAssignment(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos) return {assignment, ""};
  return {assignment.substr(0, eq), assignment.substr(eq + 1)};
}

YAML::Node ParseValue(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception&) {
    return YAML::Node(text);
  }
}

bool SameValue(const YAML::Node& a, const YAML::Node& b) {
  if (a.IsNull() || b.IsNull()) return a.IsNull() == b.IsNull();
  if (a.IsScalar() && b.IsScalar()) {
    double x = 0, y = 0;
    if (YAML::convert<double>::decode(a, x) && YAML::convert<double>::decode(b, y)) {
      return x == y || std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y));
    }
    return a.Scalar() == b.Scalar();
  }
  if (a.IsSequence() && b.IsSequence() && a.size() == b.size()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!SameValue(a[i], b[i])) return false;
    }
    return true;
  }
  return YAML::Dump(a) == YAML::Dump(b);
}

std::string Shown(const YAML::Node& v) { return v.IsNull() ? "null (unset)" : YAML::Dump(v); }

// The node at a dotted key path of `root`; a null node when absent.
YAML::Node At(const YAML::Node& root, const std::string& dotted) {
  YAML::Node node = YAML::Clone(root);
  for (absl::string_view key : absl::StrSplit(dotted, '.')) {
    if (!node.IsMap()) return YAML::Node();
    node = node[std::string(key)];
    if (!node) return YAML::Node();
  }
  return node;
}

}  // namespace

absl::Status ReconcileScriptKeys(const std::vector<std::string>& set, const std::string& job_yaml,
                                 const std::vector<std::string>& script_keys, std::vector<std::string>* notes) {
  YAML::Node file;
  try {
    file = YAML::Load(job_yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("job spec: ", e.what()));
  }
  for (const std::string& assignment : script_keys) {
    const auto [key, text] = SplitAssignment(assignment);
    const YAML::Node mine = ParseValue(text);
    bool given = false;
    for (auto it = set.rbegin(); it != set.rend() && !given; ++it) {
      const auto [set_key, set_text] = SplitAssignment(*it);
      if (set_key != key) continue;
      given = true;  // the last --set of the key is the one that counts
      if (!SameValue(ParseValue(set_text), mine)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--set ", *it, ": the script defines ", key, " = ", Shown(mine),
            "; change the script or drop the --set (sketchps run --script takes the model, optimizer and scheme "
            "from the script)"));
      }
    }
    const YAML::Node in_file = At(file, key);
    if (!given && key != "layers" && in_file && !in_file.IsNull() && !SameValue(in_file, mine)) {
      notes->push_back(
          absl::StrCat(key, ": ", Shown(mine), " from the script (the job file has ", Shown(in_file), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sketchps::tools
