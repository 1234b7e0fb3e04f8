// ShardHost's deadlines and waiting (ps/shard_host.h "Round deadline", WaitingFor): the round
// deadline's ticker thread, which closes every phase that has waited job.round_deadline since its
// first push without the workers still missing and logs whom it left out; and the account of a phase
// that waits: which workers have not pushed yet, for the answer a PushPull gets at its deadline and
// for the shard's own log, so that a stalled job names the worker it waits for rather than the shard
// that waits.
#include <algorithm>
#include <cstdint>
#include <map>
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

void ShardHost::TickDeadlines() {
  const absl::Duration deadline = options_.job.round_deadline;
  const absl::Duration tick = std::clamp(deadline / 10, absl::Milliseconds(1), absl::Milliseconds(50));
  std::map<std::uint32_t, std::uint64_t> times_left_out;  // by worker, for the log
  while (!stop_ticker_.WaitForNotificationWithTimeout(tick)) {
    std::shared_ptr<Shard> shard = this->shard();
    if (!shard) continue;
    for (const auto& closed : shard->table().CloseExpired(absl::Now())) {
      if (closed.auxiliary) {
        spdlog::info(
            "shard {}: round {} phase {} (the workers' sums: evaluation counts) closed at its deadline "
            "without worker(s) {}, left out of that round: the sums cover the others only",
            options_.shard_id, closed.key.round, closed.key.phase, absl::StrJoin(closed.left_out, ", "));
        continue;
      }
      if (metrics_) metrics_->CountLeftOut(closed.left_out.size());
      for (std::uint32_t w : closed.left_out) {
        // Every time for the first ten, then every hundredth: a worker that is always late would
        // otherwise write a line per round.
        const std::uint64_t n = ++times_left_out[w];
        if (n > 10 && n % 100 != 0) continue;
        spdlog::info(
            "shard {}: round {} phase {} closed at its deadline ({} s) without worker {} ({} time(s) so far); its "
            "gradient goes into its next round",
            options_.shard_id, closed.key.round, closed.key.phase, absl::ToDoubleSeconds(deadline), w, n);
      }
    }
  }
}

}  // namespace sketchps::ps
