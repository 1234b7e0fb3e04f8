// ConfigReader: strict, self-describing reading of a YAML mapping into plain structs.
//
//   ConfigReader r(node, "scheme.gs_sgd");
//   SKETCHPS_RETURN_IF_ERROR(r.Get("rows", config.rows));   // optional: keeps the default if absent
//   SKETCHPS_RETURN_IF_ERROR(r.Finish());                   // rejects keys nobody asked for
//
// Every error is InvalidArgument and names the full key path:
//   "scheme.gs_sgd.rows: expected an unsigned integer, got 'five'"
//   "scheme.gs_sgd: unknown key 'colz' (known: cols, p2, rows)"
// Supported types: bool, integers, floating point, std::string, std::vector of those, and any type
// with a static FromYaml(node, key_path) -> absl::StatusOr<T> (common/config/job_span.h).
// Not thread-safe; the node must outlive the reader.
#pragma once

#include <iomanip>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/key_catalog.h"
#include "yaml-cpp/yaml.h"

namespace sketchps {

class ConfigReader {
 public:
  // `node` may be null/undefined (an absent section): every Get keeps its default.
  ConfigReader(YAML::Node node, std::string path);

  template <class T>
  absl::Status Get(const std::string& key, T& out);
  // Get for each (key, field) pair in turn, stopping at the first error:
  //   GetAll("rows", config.rows, "cols", config.cols)
  template <class T, class... Rest>
  absl::Status GetAll(const std::string& key, T& out, Rest&&... rest);

  // The sub-mapping at `key` (absent or null: an empty reader). Error when `key` holds a non-mapping.
  absl::StatusOr<ConfigReader> Child(const std::string& key);
  // Whether the mapping has `key` with a non-null value (marks it as known).
  bool Has(const std::string& key);

  // Error when the node is not a mapping, or holds keys no Get/Child/Has asked for.
  absl::Status Finish() const;
  // Finish(), then config.Validate(path()): how every config section's Read ends.
  template <class Config>
  absl::Status FinishAndValidate(const Config& config) const {
    if (auto st = Finish(); !st.ok()) return st;
    return config.Validate(path_);
  }

  const std::string& path() const { return path_; }
  std::string KeyPath(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  absl::Status Convert(const YAML::Node& value, const std::string& key, bool& out) const;
  absl::Status Convert(const YAML::Node& value, const std::string& key, std::int64_t& out) const;
  absl::Status Convert(const YAML::Node& value, const std::string& key, std::uint64_t& out) const;
  absl::Status Convert(const YAML::Node& value, const std::string& key, double& out) const;
  absl::Status Convert(const YAML::Node& value, const std::string& key, std::string& out) const;
  absl::Status TypeError(const std::string& key, const YAML::Node& value, const char* expected) const;

  YAML::Node node_;
  std::string path_;
  std::set<std::string> known_;
};

namespace config_internal {
// The value as the key reference shows a default (common/config/key_catalog.h); nullopt when it has
// no plain form.
template <class T>
std::optional<std::string> DefaultText(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (std::is_floating_point_v<T>) {
    std::ostringstream s;
    s << std::setprecision(17) << static_cast<double>(value);
    return s.str();
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(value);
  } else if constexpr (requires {
                         value.begin();
                         typename T::value_type;
                       }) {
    std::string out = "[";
    for (const auto& item : value) {
      auto text = DefaultText(item);
      if (!text) return std::nullopt;
      out += (out.size() > 1 ? ", " : "") + *text;
    }
    return out + "]";
  } else {
    return std::nullopt;
  }
}
}  // namespace config_internal

template <class T>
absl::Status ConfigReader::Get(const std::string& key, T& out) {
  known_.insert(key);
  KeyCatalog::Record(KeyPath(key), config_internal::DefaultText(out));
  // An absent key and a null one (`key: ~`, `--set key=null`) keep the default.
  if (!node_ || !node_.IsMap() || !node_[key] || node_[key].IsNull()) return absl::OkStatus();
  const YAML::Node value = node_[key];
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    return Convert(value, key, out);
  } else if constexpr (std::is_floating_point_v<T>) {
    double v = 0;
    if (auto st = Convert(value, key, v); !st.ok()) return st;
    out = static_cast<T>(v);
    return absl::OkStatus();
  } else if constexpr (std::is_integral_v<T>) {
    using Wide = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
    Wide v = 0;
    if (auto st = Convert(value, key, v); !st.ok()) return st;
    if (v < static_cast<Wide>(std::numeric_limits<T>::min()) || v > static_cast<Wide>(std::numeric_limits<T>::max())) {
      return absl::InvalidArgumentError(KeyPath(key) + ": value " + std::to_string(v) + " out of range");
    }
    out = static_cast<T>(v);
    return absl::OkStatus();
  } else if constexpr (requires { T::FromYaml(value, key); }) {  // e.g. JobSpan (common/config/job_span.h)
    auto parsed = T::FromYaml(value, KeyPath(key));
    if (!parsed.ok()) return parsed.status();
    out = *std::move(parsed);
    return absl::OkStatus();
  } else {  // std::vector<U>
    if (!value.IsSequence()) return TypeError(key, value, "a list");
    T items;
    for (std::size_t i = 0; i < value.size(); ++i) {
      typename T::value_type item{};
      YAML::Node wrapper;
      wrapper["v"] = value[i];
      ConfigReader inner(wrapper, KeyPath(key) + "[" + std::to_string(i) + "]");
      if (auto st = inner.Get("v", item); !st.ok()) return st;
      items.push_back(item);
    }
    out = std::move(items);
    return absl::OkStatus();
  }
}

template <class T, class... Rest>
absl::Status ConfigReader::GetAll(const std::string& key, T& out, Rest&&... rest) {
  if (auto st = Get(key, out); !st.ok()) return st;
  if constexpr (sizeof...(Rest) > 0) {
    return GetAll(std::forward<Rest>(rest)...);
  } else {
    return absl::OkStatus();
  }
}

}  // namespace sketchps
