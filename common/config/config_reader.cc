#include "common/config/config_reader.h"

#include <cmath>
#include <cstdlib>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sketchps {

ConfigReader::ConfigReader(YAML::Node node, std::string path) : node_(std::move(node)), path_(std::move(path)) {}

absl::Status ConfigReader::TypeError(const std::string& key, const YAML::Node& value, const char* expected) const {
  const std::string shown = value.IsScalar() ? absl::StrCat("'", value.Scalar(), "'") : "a non-scalar";
  return absl::InvalidArgumentError(absl::StrCat(KeyPath(key), ": expected ", expected, ", got ", shown));
}

absl::Status ConfigReader::Convert(const YAML::Node& value, const std::string& key, bool& out) const {
  if (!value.IsScalar()) return TypeError(key, value, "true or false");
  const std::string s = absl::AsciiStrToLower(value.Scalar());
  if (s == "true" || s == "yes" || s == "on") {
    out = true;
  } else if (s == "false" || s == "no" || s == "off") {
    out = false;
  } else {
    return TypeError(key, value, "true or false");
  }
  return absl::OkStatus();
}

absl::Status ConfigReader::Convert(const YAML::Node& value, const std::string& key, std::int64_t& out) const {
  if (!value.IsScalar() || !absl::SimpleAtoi(value.Scalar(), &out)) return TypeError(key, value, "an integer");
  return absl::OkStatus();
}

absl::Status ConfigReader::Convert(const YAML::Node& value, const std::string& key, std::uint64_t& out) const {
  if (!value.IsScalar() || !absl::SimpleAtoi(value.Scalar(), &out)) return TypeError(key, value, "an unsigned integer");
  return absl::OkStatus();
}

absl::Status ConfigReader::Convert(const YAML::Node& value, const std::string& key, double& out) const {
  if (!value.IsScalar() || !absl::SimpleAtod(value.Scalar(), &out) || !std::isfinite(out)) {
    return TypeError(key, value, "a finite number");
  }
  return absl::OkStatus();
}

absl::Status ConfigReader::Convert(const YAML::Node& value, const std::string& key, std::string& out) const {
  if (!value.IsScalar()) return TypeError(key, value, "a string");
  out = value.Scalar();
  return absl::OkStatus();
}

absl::StatusOr<ConfigReader> ConfigReader::Child(const std::string& key) {
  known_.insert(key);
  if (!node_ || !node_.IsMap() || !node_[key] || node_[key].IsNull()) return ConfigReader(YAML::Node(), KeyPath(key));
  if (!node_[key].IsMap()) return TypeError(key, node_[key], "a mapping");
  return ConfigReader(node_[key], KeyPath(key));
}

bool ConfigReader::Has(const std::string& key) {
  known_.insert(key);
  KeyCatalog::Record(KeyPath(key), std::nullopt);
  return node_ && node_.IsMap() && node_[key] && !node_[key].IsNull();
}

absl::Status ConfigReader::Finish() const {
  if (!node_ || node_.IsNull()) return absl::OkStatus();
  if (!node_.IsMap())
    return absl::InvalidArgumentError(absl::StrCat(path_.empty() ? "config" : path_, ": expected a mapping"));
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    const std::string key = kv.first.Scalar();
    // yaml-cpp keeps both entries of a repeated key and lookups find the first; YAML says a key is
    // unique, and loaders that take the last one (PyYAML) would read such a file differently.
    if (!seen.insert(key).second) return absl::InvalidArgumentError(absl::StrCat(KeyPath(key), ": given twice"));
    if (!known_.count(key)) {
      return absl::InvalidArgumentError(absl::StrCat(path_.empty() ? "config" : path_, ": unknown key '", key,
                                                     "' (known: ", absl::StrJoin(known_, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sketchps
