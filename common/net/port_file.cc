#include "common/net/port_file.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/net/rendezvous_file.h"

namespace sketchps {
namespace {

constexpr const char* kKeys[] = {"grpc", "health", "metrics", "peer"};

int* Field(PortReport& r, const std::string& key) {
  if (key == "grpc") return &r.grpc;
  if (key == "health") return &r.health;
  if (key == "metrics") return &r.metrics;
  if (key == "peer") return &r.peer;
  return nullptr;
}

}  // namespace

std::string PortFileText(const PortReport& ports) {
  nlohmann::json out = nlohmann::json::object();
  PortReport copy = ports;
  for (const char* key : kKeys) {
    if (const int port = *Field(copy, key); port != 0) out[key] = port;
  }
  return out.dump() + "\n";
}

absl::Status WritePortFile(const std::string& path, const PortReport& ports) {
  if (auto st = WriteFileAtomically(path, PortFileText(ports)); !st.ok()) {
    return absl::InternalError(absl::StrCat("--port-file ", path, ": cannot write (", st.message(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PortReport> ParsePortFile(const std::string& text, const std::string& path) {
  const nlohmann::json in = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!in.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object of ports"));
  PortReport r;
  for (const auto& [key, value] : in.items()) {
    int* field = Field(r, key);
    if (field == nullptr) return absl::InvalidArgumentError(absl::StrCat(path, ": unknown key '", key, "'"));
    if (!value.is_number_integer() || value.get<long long>() < 1 || value.get<long long>() > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, " is not a port in [1, 65535]"));
    }
    *field = value.get<int>();
  }
  return r;
}

absl::StatusOr<PortReport> ReadPortFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": no port file (yet)"));
  std::stringstream s;
  s << in.rdbuf();
  return ParsePortFile(s.str(), path);
}

}  // namespace sketchps
