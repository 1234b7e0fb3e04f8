// `sketchps health HOST:PORT`: asks a server's grpc.health.v1 service whether it is SERVING
// (container healthchecks, scripts). Exit code 0 when SERVING, 1 otherwise (the status or the error
// is printed).
#pragma once

#include <string>

namespace sketchps::tools {

int CheckHealth(const std::string& address, const std::string& service, double timeout_seconds);

}  // namespace sketchps::tools
