// Build identification, printed by every binary's --version and startup log line.
#pragma once

namespace sketchps {

// The project version, e.g. "0.1.0".
const char* Version();

}  // namespace sketchps
