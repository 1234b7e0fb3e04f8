// `sketchps run --script train.py -- ARGS`: the job's workers are the user's Python training script
// (python/sketchps, docs/pytorch.md) instead of sketchps-worker; servers, run directory, progress,
// summary.json and --kill stay as tools/run.h describes.
//
// Before anything starts, the script runs once with SKETCHPS_DESCRIBE set: sketchps.torch then writes
// the job keys the script defines (its model's layout as model: custom and layers unless the job's
// model already has that layout, its SGD settings, the scheme and density it asks for) and exits 0.
// Those keys become --set overrides, so job.yaml in the run directory is the job the script trains.
// Each worker then runs `python SCRIPT ARGS...` with the environment of ScriptEnv.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launch/daemon_args.h"

namespace sketchps::tools {

struct ScriptOptions {
  std::string path;               // "" : the workers are sketchps-worker
  std::vector<std::string> args;  // after `--`
  std::string python = "/usr/bin/python3";
  std::string python_path;  // folder holding the sketchps package ("" : <build>/python)
  int master_port = 0;      // torch.distributed's MASTER_PORT for the workers (0: none given)
};

// The overrides the script defines (above). `job_yaml`: the effective job spec so far. Errors name
// the script and show the end of its output when it fails or writes nothing.
absl::StatusOr<std::vector<std::string>> DescribeScript(const ScriptOptions& script, const std::string& job_yaml);

// No silent overrides: a key the script defines that a --set (`set`, "key=value") also gives with
// another value is an error naming both; one the job file (`job_yaml`, before the script's keys)
// gives with another value is taken from the script, and `notes` says so ("optimizer.lr: 0.05 from
// the script, the job file has 0.1"). Values compare as YAML: numbers by value, the rest as text.
absl::Status ReconcileScriptKeys(const std::vector<std::string>& set, const std::string& job_yaml,
                                 const std::vector<std::string>& script_keys, std::vector<std::string>* notes);

std::vector<std::string> ScriptArgv(const ScriptOptions& script);
// Whether `folder` holds the package with its extension built (sketchps/_core*.so).
bool HoldsBuiltPackage(const std::string& folder);
// PYTHONPATH with the package's folder first: script.python_path, else the `python` folder beside the
// executable's (<build>/python) when it holds a built package. A bundle's python/ holds only the
// sources pip builds, so it never shadows the package installed into the interpreter: then "", and
// the processes inherit the environment's PYTHONPATH unchanged.
std::string PackagePythonPath(const ScriptOptions& script);
// The worker's place as sketchps-worker would get it on its command line (launch/daemon_args.h), as
// the environment sketchps.torch.init() reads: RANK, LOCAL_RANK, WORLD_SIZE, SKETCHPS_JOB,
// SKETCHPS_METRICS_OUT, SKETCHPS_SERVERS or SKETCHPS_LISTEN + SKETCHPS_PORT_FILE +
// SKETCHPS_PEERS_FILE, SKETCHPS_TLS_DIR or SKETCHPS_INSECURE=1, SKETCHPS_PEER_TIMEOUT_SECONDS,
// PYTHONPATH (the package first; absent when there is none to give), and MASTER_ADDR=127.0.0.1 with MASTER_PORT
// (script.master_port) so that a DDP script's torch.distributed.init_process_group() works unchanged (the comm hook).
// The describe pass runs with WORLD_SIZE=1 and a MASTER_PORT of its own: a script that makes a
// process group there makes a group of one.
std::vector<std::string> ScriptEnv(const ScriptOptions& script, const launch::WorkerLaunch& worker);

}  // namespace sketchps::tools
