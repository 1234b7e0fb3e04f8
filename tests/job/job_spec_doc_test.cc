// docs/job-spec.md against the code: every key the readers ask for (common/config/key_catalog.h)
// has a row in the reference, every row is a key the readers ask for, and a row's default is the
// value the code keeps for an absent key.
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/config/key_catalog.h"
#include "job/job_spec.h"
#include "schemes/registry.h"

using namespace sketchps;

namespace {

struct Row {
  std::string type, default_text;
};

// The reference's table rows: | `key` | type | default | meaning |.
std::map<std::string, Row> DocumentedKeys() {
  std::ifstream in(std::string(SKETCHPS_SOURCE_DIR) + "/docs/job-spec.md");
  REQUIRE(in.good());
  const std::regex row(R"(^\| `([a-z0-9_.]+)` \| ([^|]*) \| ([^|]*) \|)");
  std::map<std::string, Row> keys;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) keys[m[1]] = Row{m[2], m[3]};
  }
  return keys;
}

// Every key the readers ask for, over jobs that reach every branch: each scheme, each schedule, each
// optimizer, each mode.
std::map<std::string, std::optional<std::string>> KeysInTheCode() {
  KeyCatalog catalog;
  std::vector<std::vector<std::string>> variants;
  for (const std::string& scheme : SchemeNames()) variants.push_back({"scheme.name=" + scheme});
  for (const char* schedule : {"constant", "step", "cosine"})
    variants.push_back({std::string("optimizer.schedule=") + schedule});
  for (const char* name : {"sgd", "adam", "adamw"}) {
    variants.push_back({std::string("optimizer.name=") + name, "optimizer.momentum=null"});
  }
  variants.push_back({"mode=decentralized"});
  for (const auto& overrides : variants) {
    auto job = ParseJobSpec(DefaultJobSpecYaml(), "default", overrides);
    INFO(absl::StrJoin(overrides, " "));
    REQUIRE(job.ok());
  }
  // A scheme's own section (scheme.gs_sgd, and scheme.topk, which holds no key) is a mapping, not a key.
  auto keys = catalog.keys();
  for (const std::string& scheme : SchemeNames()) keys.erase("scheme." + scheme);
  return keys;
}

bool SameDefault(const std::string& documented, const std::string& code) {
  std::string doc(absl::StripAsciiWhitespace(documented));
  doc = std::string(absl::StripPrefix(absl::StripSuffix(doc, "`"), "`"));
  double a = 0, b = 0;
  if (absl::SimpleAtod(doc, &a) && absl::SimpleAtod(code, &b)) return a == b;
  if (code.empty()) return doc.rfind("\"\"", 0) == 0;
  if (code.front() == '[') {  // lists: compare the numbers or words in order
    const std::regex item(R"([^\[\], ]+)");
    auto words = [&](const std::string& s) {
      std::vector<std::string> out;
      for (auto it = std::sregex_iterator(s.begin(), s.end(), item); it != std::sregex_iterator(); ++it) {
        double v = 0;
        out.push_back(absl::SimpleAtod(it->str(), &v) ? std::to_string(v) : it->str());
      }
      return out;
    };
    return words(doc) == words(code);
  }
  return doc == code;
}

}  // namespace

TEST_CASE("docs/job-spec.md lists every key the job spec readers accept, and no other", "[job]") {
  const auto documented = DocumentedKeys();
  const auto code = KeysInTheCode();
  REQUIRE(code.size() > 50);
  std::vector<std::string> undocumented, unknown;
  for (const auto& [key, _] : code) {
    if (!documented.contains(key)) undocumented.push_back(key);
  }
  for (const auto& [key, _] : documented) {
    if (!code.contains(key)) unknown.push_back(key);
  }
  INFO("read by the code, missing from docs/job-spec.md: " << absl::StrJoin(undocumented, ", "));
  INFO("in docs/job-spec.md, read by no reader: " << absl::StrJoin(unknown, ", "));
  CHECK(undocumented.empty());
  CHECK(unknown.empty());
}

TEST_CASE("docs/job-spec.md gives each key the default the code keeps when it is absent", "[job]") {
  const auto documented = DocumentedKeys();
  std::vector<std::string> wrong;
  std::size_t compared = 0;
  for (const auto& [key, default_text] : KeysInTheCode()) {
    const auto it = documented.find(key);
    if (it == documented.end() || !default_text) continue;
    if (it->second.default_text.find("absent") != std::string::npos) continue;  // written in words
    ++compared;
    if (!SameDefault(it->second.default_text, *default_text)) {
      wrong.push_back(key + ": documented '" + it->second.default_text + "', the code keeps '" + *default_text + "'");
    }
  }
  INFO(absl::StrJoin(wrong, "\n"));
  CHECK(wrong.empty());
  CHECK(compared > 50);
}

TEST_CASE("A KeyCatalog records nothing once it is gone", "[job]") {
  std::size_t recorded = 0;
  {
    KeyCatalog catalog;
    REQUIRE(ParseJobSpec(DefaultJobSpecYaml(), "default").ok());
    recorded = catalog.keys().size();
    CHECK(catalog.keys().contains("optimizer.lr"));
  }
  CHECK(recorded > 20);
  KeyCatalog later;
  CHECK(later.keys().empty());
}
