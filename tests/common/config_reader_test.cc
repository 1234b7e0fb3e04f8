#include "common/config/config_reader.h"

#include <catch2/catch.hpp>

using sketchps::ConfigReader;

namespace {
std::string Message(const absl::Status& s) { return std::string(s.message()); }
}  // namespace

TEST_CASE("ConfigReader reads typed values and keeps defaults", "[config]") {
  YAML::Node n = YAML::Load("rows: 7\nratio: 0.25\nname: gs_sgd\nflag: yes\nlist: [1, 2, 3]\n");
  ConfigReader r(n, "scheme");
  std::uint32_t rows = 5;
  double ratio = 0, missing = 4.5;
  std::string name;
  bool flag = false;
  std::vector<int> list;
  REQUIRE(r.Get("rows", rows).ok());
  REQUIRE(r.Get("ratio", ratio).ok());
  REQUIRE(r.Get("name", name).ok());
  REQUIRE(r.Get("flag", flag).ok());
  REQUIRE(r.Get("list", list).ok());
  REQUIRE(r.Get("absent", missing).ok());
  CHECK(rows == 7);
  CHECK(ratio == 0.25);
  CHECK(name == "gs_sgd");
  CHECK(flag);
  CHECK(list == std::vector<int>{1, 2, 3});
  CHECK(missing == 4.5);
  CHECK(r.Finish().ok());
}

TEST_CASE("ConfigReader errors name the key path", "[config]") {
  YAML::Node n = YAML::Load("rows: five\nneg: -3\nbig: 5000000000\nsub: {colz: 1}\nseq: [1, x]\nnan: .nan\n");
  ConfigReader r(n, "scheme.gs_sgd");
  std::uint32_t u = 0;
  double d = 0;
  std::vector<int> v;
  CHECK(Message(r.Get("rows", u)) == "scheme.gs_sgd.rows: expected an unsigned integer, got 'five'");
  CHECK_THAT(Message(r.Get("neg", u)), Catch::Contains("scheme.gs_sgd.neg"));
  CHECK(Message(r.Get("big", u)) == "scheme.gs_sgd.big: value 5000000000 out of range");
  CHECK_THAT(Message(r.Get("seq", v)), Catch::Contains("scheme.gs_sgd.seq[1].v"));
  CHECK_THAT(Message(r.Get("nan", d)), Catch::Contains("finite number"));
  auto sub = r.Child("sub");
  REQUIRE(sub.ok());
  std::uint32_t cols = 0;
  REQUIRE(sub->Get("cols", cols).ok());
  CHECK(Message(sub->Finish()) == "scheme.gs_sgd.sub: unknown key 'colz' (known: cols)");
  CHECK(!r.Child("rows").ok());
}

TEST_CASE("ConfigReader rejects unknown top-level keys and non-mappings", "[config]") {
  ConfigReader r(YAML::Load("a: 1\nb: 2\n"), "");
  int a = 0;
  REQUIRE(r.Get("a", a).ok());
  CHECK(Message(r.Finish()) == "config: unknown key 'b' (known: a)");
  ConfigReader list(YAML::Load("[1, 2]"), "scheme");
  CHECK(Message(list.Finish()) == "scheme: expected a mapping");
  ConfigReader absent(YAML::Node(), "scheme");
  CHECK(absent.Finish().ok());
}
