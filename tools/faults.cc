#include "tools/faults.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_write.h"
#include "launch/daemon_args.h"

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
    if (!server && !job.decentralized() && job.ps.elastic) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kill ", k,
                       ": not in an elastic job (--scale, ps.elastic): a restarted slot cannot join again, so the "
                       "rounds of its membership would wait for it"));
    }
    const std::uint32_t count = server ? job.servers : job.workers;
    if (spec->index >= count) {
      return absl::InvalidArgumentError(absl::StrCat("--kill ", k, ": the job has ", count, " ", spec->role, "s"));
    }
    if (spec->after_round >= job.total_rounds()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kill ", k, ": the job has ", job.total_rounds(), " rounds, so the kill would never happen"));
    }
    faults.kills_.push_back(*spec);
  }
  faults.done_.assign(faults.kills_.size(), false);
  faults.total_rounds_ = job.total_rounds();
  return faults;
}

void Faults::Inject(std::uint64_t rounds_done, LocalCluster& cluster) {
  for (std::size_t i = 0; i < kills_.size(); ++i) {
    if (done_[i] || rounds_done < kills_[i].after_round) continue;
    done_[i] = true;
    const bool server = kills_[i].role == "server";
    const std::string name = absl::StrCat(kills_[i].role, " ", kills_[i].index);
    if (rounds_done >= total_rounds_) {
      std::fprintf(stderr,
                   "\nrun: warning: fault injection: %s not killed after round %llu: when the launcher saw that "
                   "round, rank 0 had finished all %llu (rounds shorter than its polling); kill at an earlier round\n",
                   name.c_str(), static_cast<unsigned long long>(kills_[i].after_round),
                   static_cast<unsigned long long>(total_rounds_));
      record_["kills_not_done"].push_back(
          {{"process", name}, {"after_round", kills_[i].after_round}, {"rank0_rounds", rounds_done}});
      continue;
    }
    std::fprintf(stderr, "\nrun: fault injection: SIGKILL %s after round %llu\n", name.c_str(),
                 static_cast<unsigned long long>(rounds_done));
    record_["kills"].push_back({{"process", name}, {"at", UnixSeconds()}, {"rank0_rounds", rounds_done}});
    const auto restarted = cluster.Kill(server, kills_[i].index);
    if (!restarted.ok()) {
      std::fprintf(stderr, "run: restarting %s failed: %s\n", name.c_str(), restarted.status().ToString().c_str());
    } else if (*restarted) {
      std::fprintf(stderr, "run: %s restarted with the same flags\n", name.c_str());
    }
    // A worker that stays dead (decentralized: its peers regroup without it) does not fail the run.
    if (!server && (!restarted.ok() || !*restarted)) killed_workers_.insert(kills_[i].index);
  }
}

void Faults::RestartStalled(LocalCluster& cluster, std::uint64_t rounds_done) {
  for (const std::uint32_t s : cluster.RestartStalledServers()) {
    const std::string name = absl::StrCat("server ", s);
    std::fprintf(stderr, "\nrun: %s exited %d (its accept loop stalled); restarted with the same flags\n", name.c_str(),
                 launch::kServerExitAcceptStalled);
    record_["restarts"].push_back(
        {{"process", name}, {"why", "accept loop stalled"}, {"at", UnixSeconds()}, {"rank0_rounds", rounds_done}});
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

absl::Status Faults::Write(const std::filesystem::path& out) const {
  if (record_.empty()) return absl::OkStatus();
  return WriteFileAtomically((out / "faults.json").string(), record_.dump(2) + "\n");
}

}  // namespace sketchps::tools
