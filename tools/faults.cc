#include "tools/faults.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace sketchps::tools {
namespace {

double UnixSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

}  // namespace

absl::StatusOr<KillSpec> ParseKillSpec(const std::string& text) {
  const std::vector<std::string> at = absl::StrSplit(text, '@');
  const std::vector<std::string> who = absl::StrSplit(at[0], ':');
  KillSpec spec;
  if (at.size() != 2 || who.size() != 2 || (who[0] != "server" && who[0] != "worker") ||
      !absl::SimpleAtoi(who[1], &spec.index) || !absl::SimpleAtoi(at[1], &spec.after_round)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kill '", text, "': expected server:<index>@<round> or worker:<index>@<round>"));
  }
  spec.role = who[0];
  return spec;
}

absl::StatusOr<Faults> Faults::Plan(const std::vector<std::string>& kills, const JobSpec& job) {
  Faults faults;
  for (const auto& k : kills) {
    auto spec = ParseKillSpec(k);
    if (!spec.ok()) return spec.status();
    const bool server = spec->role == "server";
    if (server && job.decentralized()) {
      return absl::InvalidArgumentError("--kill: decentralized mode has no servers to kill");
    }
    const std::uint32_t count = server ? job.servers : job.workers;
    if (spec->index >= count) {
      return absl::InvalidArgumentError(absl::StrCat("--kill ", k, ": the job has ", count, " ", spec->role, "s"));
    }
    faults.kills_.push_back(*spec);
  }
  faults.done_.assign(faults.kills_.size(), false);
  return faults;
}

void Faults::Inject(std::uint64_t rounds_done, LocalCluster& cluster) {
  for (std::size_t i = 0; i < kills_.size(); ++i) {
    if (done_[i] || rounds_done < kills_[i].after_round) continue;
    done_[i] = true;
    const bool server = kills_[i].role == "server";
    const std::string name = absl::StrCat(kills_[i].role, " ", kills_[i].index);
    std::fprintf(stderr, "\nrun: fault injection: SIGKILL %s after round %llu%s\n", name.c_str(),
                 static_cast<unsigned long long>(rounds_done), server ? ", restarting it" : "");
    record_["kills"].push_back({{"process", name}, {"at", UnixSeconds()}, {"rank0_rounds", rounds_done}});
    if (!server) killed_workers_.insert(kills_[i].index);
    if (auto st = cluster.Kill(server, kills_[i].index); !st.ok()) {
      std::fprintf(stderr, "run: restart failed: %s\n", st.ToString().c_str());
    }
  }
}

int Faults::Failed(const Failure& failure, std::uint64_t rounds_done) {
  const launch::Child& child = *failure.child;
  std::fprintf(stderr, "\nrun: %s exited with code %d; last log lines (%s):\n%s\n", child.name().c_str(), failure.code,
               child.log_path().c_str(), child.LogTail(10).c_str());
  record_["first_failure"] = {{"process", child.name()},
                              {"code", failure.code},
                              {"at", UnixSeconds()},
                              {"rank0_rounds", rounds_done},
                              {"log_tail", child.LogTail(5)}};
  return 1;
}

void Faults::Write(const std::filesystem::path& out) const {
  if (!record_.empty()) std::ofstream(out / "faults.json") << record_.dump(2) << "\n";
}

}  // namespace sketchps::tools
