// `sketchps export [RUN_DIR] [--job J --checkpoints DIR --out F]`: the servers' checkpoints of a run
// as a PyTorch state_dict file. Runs python/sketchps/export.py (`python3 -m sketchps.export`) with
// the build tree's package on PYTHONPATH: libtorch stays out of this binary.
#pragma once

#include <string>
#include <vector>

#include "tools/run_script.h"

namespace sketchps::tools {

// Replaces this process with the Python exporter; returns only when that fails (exit code 2).
int ExportModel(const ScriptOptions& python, const std::vector<std::string>& args);

}  // namespace sketchps::tools
