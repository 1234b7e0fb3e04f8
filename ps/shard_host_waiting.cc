// ShardHost's account of a phase that waits (ps/shard_host.h WaitingFor): which workers have not
// pushed yet, for the answer a PushPull gets at its deadline and for the shard's own log, so that a
// stalled job names the worker it waits for rather than the shard that waits.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/aggregator.h"
#include "ps/shard_host.h"
#include "spdlog/spdlog.h"

namespace sketchps::ps {
namespace {

constexpr absl::Duration kLogEvery = absl::Seconds(10);  // per phase: one line, then at most this often

}  // namespace

std::string ShardHost::WaitingFor(std::uint64_t round, std::uint32_t phase) {
  const std::uint32_t id = options_.shard_id;
  const std::shared_ptr<Shard> shard = this->shard();
  if (!shard) return absl::StrCat("shard ", id, " is assembling: ", AssemblyStatus());
  const PhaseKey key{round, phase};
  const PhaseTable& table = shard->table();
  std::vector<std::uint32_t> missing, pushed;
  for (std::uint32_t w = 0; w < options_.job.workers; ++w) {
    // The auxiliary phase (the workers' sums) waits for left-out members too (engine/phase_table.h).
    if (!table.IsMember(round, w) || (phase != kAuxPhase && table.Excluded(round, w))) continue;
    (table.HasContribution(key, w) ? pushed : missing).push_back(w);
  }
  if (missing.empty()) {
    return absl::StrCat("round ", round, " phase ", phase, " on shard ", id, ": every worker has pushed");
  }
  std::string text =
      absl::StrCat("round ", round, " phase ", phase, " on shard ", id, " is waiting for worker",
                   missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ", "), " (",
                   pushed.empty() ? "none" : absl::StrCat("worker ", absl::StrJoin(pushed, ", ")), " pushed)");
  {
    absl::MutexLock lock(&waiting_log_mu_);
    const absl::Time now = absl::Now();
    if (waiting_logged_.first != key || now - waiting_logged_.second >= kLogEvery) {
      waiting_logged_ = {key, now};
      spdlog::warn("{}", text);
    }
  }
  return text;
}

}  // namespace sketchps::ps
