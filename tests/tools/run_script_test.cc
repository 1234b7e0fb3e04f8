// The --script launcher's helpers (tools/run_script.h). DescribeScript runs /bin/sh as the
// "interpreter", so these tests need no Python.
#include "tools/run_script.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "tools/local_cluster.h"

using namespace sketchps::tools;
namespace fs = std::filesystem;

namespace {

bool Has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

ScriptOptions ShellScript(const std::string& body) {
  const fs::path path = fs::temp_directory_path() / ("sketchps-describe-" + std::to_string(::getpid()) + ".sh");
  std::ofstream(path) << body;
  ScriptOptions script;
  script.path = path.string();
  script.python = "/bin/sh";
  script.python_path = "/pkg";
  return script;
}

}  // namespace

TEST_CASE("ScriptEnv gives a ps worker its rank, job, servers and identity", "[run_script]") {
  ScriptOptions script;
  script.python_path = "/pkg";
  script.master_port = 29500;
  sketchps::launch::WorkerLaunch w;
  w.rank = 1;
  w.world_size = 4;
  w.job_path = "/run/job.yaml";
  w.metrics_out = "/run/worker-1.jsonl";
  w.servers = {"127.0.0.1:5", "127.0.0.1:6"};
  w.tls_dir = "/run/tls";
  const auto env = ScriptEnv(script, w);
  for (const char* e : {"RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=4", "SKETCHPS_JOB=/run/job.yaml",
                        "SKETCHPS_METRICS_OUT=/run/worker-1.jsonl", "SKETCHPS_SERVERS=127.0.0.1:5,127.0.0.1:6",
                        "SKETCHPS_TLS_DIR=/run/tls", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500"}) {
    CHECK(Has(env, e));
  }
  CHECK_FALSE(Has(env, "SKETCHPS_INSECURE=1"));
  CHECK(std::any_of(env.begin(), env.end(), [](const std::string& e) { return e.rfind("PYTHONPATH=/pkg", 0) == 0; }));
}

TEST_CASE("ScriptEnv gives a decentralized worker its Peer service and the peers file", "[run_script]") {
  sketchps::launch::WorkerLaunch w;
  w.world_size = 2;
  w.job_path = "/j";
  w.metrics_out = "/m";
  w.listen = "127.0.0.1:0";
  w.port_file = "/run/worker-0.port";
  w.peers_file = "/run/peers.txt";
  w.peer_timeout_seconds = 7;
  const auto env = ScriptEnv(ScriptOptions{}, w);
  for (const char* e :
       {"SKETCHPS_LISTEN=127.0.0.1:0", "SKETCHPS_PORT_FILE=/run/worker-0.port", "SKETCHPS_PEERS_FILE=/run/peers.txt",
        "SKETCHPS_INSECURE=1", "SKETCHPS_PEER_TIMEOUT_SECONDS=7"}) {
    CHECK(Has(env, e));
  }
  CHECK(
      std::none_of(env.begin(), env.end(), [](const std::string& e) { return e.rfind("SKETCHPS_SERVERS=", 0) == 0; }));
}

TEST_CASE("Only a package with its extension built goes first on PYTHONPATH", "[run_script]") {
  const fs::path root = fs::temp_directory_path() / ("sketchps-package-" + std::to_string(::getpid()));
  fs::create_directories(root / "sources" / "sketchps");
  std::ofstream(root / "sources" / "sketchps" / "torch.py") << "";
  fs::create_directories(root / "built" / "sketchps");
  std::ofstream(root / "built" / "sketchps" / "_core.cpython-311-x86_64-linux-gnu.so") << "";
  CHECK_FALSE(HoldsBuiltPackage((root / "sources").string()));  // a bundle's python/: pip builds it
  CHECK_FALSE(HoldsBuiltPackage((root / "missing").string()));
  CHECK(HoldsBuiltPackage((root / "built").string()));
  fs::remove_all(root);
  // The test binary's own <build>/python (tests/tools/../../python) holds the built package when the
  // build made it; either way a python_path given is what goes first.
  ScriptOptions script;
  script.python_path = "/given";
  CHECK(PackagePythonPath(script).rfind("/given", 0) == 0);
}

TEST_CASE("A script's job needs sketchps-server only, a job of sketchps-worker needs both", "[run_script]") {
  // A bundle (scripts/bundle.sh) ships no sketchps-worker: `sketchps run --script` must not ask for it.
  const fs::path bin = fs::temp_directory_path() / ("sketchps-bins-" + std::to_string(::getpid()));
  fs::create_directories(bin);
  fs::copy_file("/bin/true", bin / "sketchps-server", fs::copy_options::overwrite_existing);
  sketchps::JobSpec job;
  ClusterOptions options;
  options.bin_dir = bin.string();
  options.script.path = "train.py";
  CHECK(LocalCluster(job, options).Prepare().ok());
  options.script.path.clear();
  const absl::Status without_script = LocalCluster(job, options).Prepare();
  CHECK(absl::IsNotFound(without_script));
  CHECK(std::string(without_script.message()).find("sketchps-worker") != std::string::npos);
  fs::remove_all(bin);
}

TEST_CASE("ScriptArgv runs the script with its arguments", "[run_script]") {
  ScriptOptions script{"train.py", {"--epochs", "2"}, "/usr/bin/python3", ""};
  CHECK(ScriptArgv(script) == std::vector<std::string>{"/usr/bin/python3", "train.py", "--epochs", "2"});
}

TEST_CASE("DescribeScript returns the keys the script writes", "[run_script]") {
  auto script = ShellScript(
      "test \"$RANK\" = 0 && test \"$WORLD_SIZE\" = 1 && grep -q '^workers: 3' \"$SKETCHPS_JOB\" &&\n"
      "test \"$MASTER_ADDR\" = 127.0.0.1 && test \"$MASTER_PORT\" -gt 0 &&\n"
      "printf 'model=custom\\nlayers=[[\"w\", [2]]]\\n\\n' > \"$SKETCHPS_DESCRIBE\"\n");
  auto keys = DescribeScript(script, "workers: 3\n");
  fs::remove(script.path);
  REQUIRE(keys.ok());
  CHECK(*keys == std::vector<std::string>{"model=custom", "layers=[[\"w\", [2]]]"});
}

TEST_CASE("DescribeScript names a script that fails or writes nothing", "[run_script]") {
  auto failing = DescribeScript(ShellScript("echo no model here; exit 3\n"), "");
  REQUIRE_FALSE(failing.ok());
  const std::string message(failing.status().message());
  CHECK(message.find("failed with exit code 3") != std::string::npos);
  CHECK(message.find("no model here") != std::string::npos);
  auto silent = DescribeScript(ShellScript("exit 0\n"), "");
  fs::remove(ShellScript("").path);
  REQUIRE_FALSE(silent.ok());
  CHECK(std::string(silent.status().message()).find("wrote nothing") != std::string::npos);
  ScriptOptions missing;
  missing.path = "/nonexistent/train.py";
  CHECK(std::string(DescribeScript(missing, "").status().message()) ==
        "--script /nonexistent/train.py: cannot read the file");
}

TEST_CASE("A --set that the script contradicts is an error naming both values", "[run_script]") {
  const std::string file = "optimizer: {lr: 0.1, momentum: 0.9}\nscheme: {name: gs_sgd}\nmodel: mlp\n";
  const std::vector<std::string> script{"model=custom", "optimizer.lr=0.05", "optimizer.momentum=null",
                                        "scheme.name=gs_sgd"};
  std::vector<std::string> notes;
  auto st = ReconcileScriptKeys({"optimizer.lr=0.2"}, file, script, &notes);
  REQUIRE(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()), Catch::Contains("--set optimizer.lr=0.2") && Catch::Contains("0.05"));
  // The last --set of a key counts; equal values (as numbers) agree.
  CHECK(ReconcileScriptKeys({"optimizer.lr=0.2", "optimizer.lr=5e-2"}, file, script, &notes).ok());
  // A key the script clears (AdamW has no momentum) contradicts a --set of it.
  st = ReconcileScriptKeys({"optimizer.momentum=0.9"}, file, script, &notes);
  REQUIRE(!st.ok());
  CHECK_THAT(std::string(st.message()), Catch::Contains("null"));
  CHECK(!ReconcileScriptKeys({"scheme.name=topk"}, file, script, &notes).ok());
}

TEST_CASE("A job-file value the script replaces is reported, not silent", "[run_script]") {
  const std::string file = "optimizer: {lr: 0.1, momentum: 0.9}\nmodel: mlp\nlayers: [[w, [2]]]\n";
  std::vector<std::string> notes;
  REQUIRE(ReconcileScriptKeys({}, file,
                              {"optimizer.lr=0.05", "optimizer.momentum=0.9", "model=custom", "layers=[[v, [3]]]",
                               "scheme.density=0.01"},
                              &notes)
              .ok());
  CHECK(notes == std::vector<std::string>{"optimizer.lr: 0.05 from the script (the job file has 0.1)",
                                          "model: custom from the script (the job file has mlp)"});
}
