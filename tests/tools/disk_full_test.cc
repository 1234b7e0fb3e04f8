// A full disk under `sketchps run` (common/file_write.h): the run fails, the launcher names the disk
// and the path, no partial file is left behind (no *.tmp, no record cut in the middle), and once
// there is room again `--resume` completes the job bitwise equal to a run that never hit the disk.
// The disk is a real one: a small tmpfs mounted in a mount namespace of the test's own (`unshare -m`
// as root, `unshare -rm` otherwise), so the writes fail with ENOSPC as on any full disk and nothing
// is left mounted when the namespace ends. Where no namespace can be made, the test says so and
// checks nothing (Catch2 2 has no SKIP).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_join.h"
#include "common/file_write.h"
#include "support/run_folder.h"

using namespace sketchps;
using namespace sketchps::testing;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kJob = SmallTopkJob("disk-full", 150, 20);

std::string Quoted(const std::vector<std::string>& argv) {
  std::vector<std::string> quoted;
  for (const std::string& a : argv) quoted.push_back("'" + a + "'");
  return absl::StrJoin(quoted, " ");
}

// The mount namespace command: `unshare -m` as root, else a user namespace that maps us to root.
std::string Unshare() { return ::geteuid() == 0 ? "unshare -m" : "unshare -rm"; }

bool CanMountTmpfs(const fs::path& scratch) {
  fs::create_directories(scratch / "probe");
  const std::string probe =
      Unshare() + " sh -c 'mount -t tmpfs -o size=1m tmpfs " + (scratch / "probe").string() + "' >/dev/null 2>&1";
  return std::system(probe.c_str()) == 0;
}

// The script run inside the namespace: a 64 MB tmpfs at MNT; the run, filled to the last byte once
// worker 0 has recorded 30 rounds; what it left (copied out to OUT); then room again and --resume.
std::string Script(const fs::path& mnt, const fs::path& out) {
  const fs::path run = mnt / "run";
  const std::vector<std::string> first = RunArgv(run, kJob);
  std::vector<std::string> again = RunArgv(run, kJob, {"--resume"});
  const std::string o = out.string(), m = mnt.string();
  return "set -u\nmount -t tmpfs -o size=64m tmpfs '" + m + "' || exit 90\n" + Quoted(first) + " >'" + o +
         "/first.log' 2>&1 &\npid=$!\ni=0\nwhile [ \"$(cat '" + run.string() +
         "/worker-0.jsonl' 2>/dev/null | wc -l)\" -lt 30 ] && [ $i -lt 3000 ]; do sleep 0.05; i=$((i+1)); done\n"
         "cat /dev/zero >'" +
         m + "/filler' 2>/dev/null\nwait $pid; echo $? >'" + o + "/first.rc'\nfind '" + m + "' -name '*.tmp' >'" + o +
         "/tmp-files'\ncp '" + run.string() + "'/worker-*.jsonl '" + o + "/'\nrm -f '" + m + "/filler'\n" +
         Quoted(again) + " >'" + o + "/resume.log' 2>&1; echo $? >'" + o + "/resume.rc'\ncp '" + run.string() +
         "/summary.json' '" + o + "/' 2>/dev/null\nexit 0\n";
}

// A case's folders: <root>/mnt (the tmpfs goes there) and <root>/out (what the script leaves), made;
// empty when no mount namespace can be made here (then the case says so and checks nothing).
struct Case {
  fs::path root, mnt, out;
  explicit operator bool() const { return !root.empty(); }
};
Case MakeCase(const std::string& suite) {
  Case c{FreshRunDir(suite, "case")};
  c.mnt = c.root / "mnt";
  c.out = c.root / "out";
  fs::create_directories(c.mnt);
  fs::create_directories(c.out);
  if (CanMountTmpfs(c.root)) return c;
  WARN("no mount namespace here (unshare -m needs root, unshare -rm user namespaces): not checked");
  return Case{};
}

// Runs `script` with sh in a mount namespace of its own.
void RunInNamespace(const Case& c, const std::string& script) {
  const fs::path file = c.root / "script.sh";
  REQUIRE(WriteFileAtomically(file.string(), script).ok());
  REQUIRE(std::system((Unshare() + " sh '" + file.string() + "'").c_str()) == 0);
}

int ReadCode(const fs::path& file) {
  std::ifstream in(file);
  int code = -1;
  in >> code;
  return code;
}

}  // namespace

TEST_CASE("A full disk fails the run naming it, leaves no partial file, and --resume then completes exactly",
          "[run][processes]") {
  const Case c = MakeCase("disk-full");
  if (!c) return;
  const fs::path &mnt = c.mnt, &out = c.out;
  const fs::path reference = FreshRunDir("disk-full", "reference");
  REQUIRE(tools::RunJob(QuietRun(reference, kJob)) == 0);
  RunInNamespace(c, Script(mnt, out));

  const std::string first = ReadText(out / "first.log");
  INFO(first);
  CHECK(ReadCode(out / "first.rc") == 1);
  CHECK_THAT(first, Catch::Contains("the disk holding " + (mnt / "run").string() + " is full"));
  CHECK(ReadText(out / "tmp-files").empty());  // no .tmp left by any writer
  for (const char* records : {"worker-0.jsonl", "worker-1.jsonl"}) {
    INFO(records);
    const std::string text = ReadText(out / records);
    CHECK((text.empty() || text.back() == '\n'));  // no record cut in the middle
    for (const auto& line : JsonLinesOf(out / records)) CHECK(line.is_object());
  }
  const std::string resumed = ReadText(out / "resume.log");
  INFO(resumed);
  REQUIRE(ReadCode(out / "resume.rc") == 0);
  CHECK(ReadSummaryFile(out)["final_weights_checksum"] == ReadSummaryFile(reference)["final_weights_checksum"]);
  fs::remove_all(c.root.parent_path());
  fs::remove_all(reference.parent_path());
}

TEST_CASE("A disk full before the start is refused naming the file the launcher could not write", "[run][processes]") {
  const Case c = MakeCase("disk-full-start");
  if (!c) return;
  const fs::path &mnt = c.mnt, &out = c.out;
  const std::string m = mnt.string(), o = out.string();
  const std::string script = "mount -t tmpfs -o size=1m tmpfs '" + m + "' || exit 90\ncat /dev/zero >'" + m +
                             "/filler' 2>/dev/null\n" + Quoted(RunArgv(mnt / "run", kJob)) + " >'" + o +
                             "/run.log' 2>&1; echo $? >'" + o + "/run.rc'\nfind '" + m + "' -name '*.tmp' >'" + o +
                             "/tmp-files'\n";
  RunInNamespace(c, script);
  const std::string log = ReadText(out / "run.log");
  INFO(log);
  CHECK(ReadCode(out / "run.rc") == 2);
  CHECK_THAT(log, Catch::Contains((mnt / "run").string()) && Catch::Contains("No space left on device"));
  CHECK(ReadText(out / "tmp-files").empty());
  fs::remove_all(c.root.parent_path());
}
