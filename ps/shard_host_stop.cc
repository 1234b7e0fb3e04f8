// ShardHost's stop (ps/shard_host.h): refusing new phases, answering the calls still waiting after
// the drain's grace (and every call after that, which would otherwise wait for a gRPC shutdown that
// cancels it: a worker retries UNAVAILABLE, not CANCELLED), and the final checkpoint.
#include <map>
#include <vector>

#include "common/reason.h"
#include "ps/shard_host.h"

namespace sketchps::ps {

void ShardHost::BeginShutdown() { closing_.store(true); }

absl::Status ShardHost::Stopping() {
  return WithReason(absl::UnavailableError("the server is shutting down: retry after it restarts"),
                    Reason::kShuttingDown);
}

void ShardHost::ReleaseInFlight() {
  released_.store(true);  // before the calls are taken: one that registers later sees it
  const absl::Status stopping = Stopping();
  std::vector<JoinReply> joins;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [worker, pending] : joining_) joins.push_back(std::move(pending.reply));
    joining_.clear();
  }
  std::map<std::uint64_t, PushReply> calls;
  {
    absl::MutexLock lock(&calls_mu_);
    calls.swap(waiting_calls_);
  }
  for (auto& reply : joins) reply(stopping);
  for (auto& [id, reply] : calls) reply(stopping);
}

absl::Status ShardHost::CheckpointNow() {
  if (!writer_) return absl::OkStatus();
  std::shared_ptr<Shard> shard = this->shard();
  if (!shard) return absl::OkStatus();
  shard->Drain();
  SubmitCheckpoint(*shard);
  return writer_->Flush();
}

}  // namespace sketchps::ps
