// ShardHost's membership (ps/shard_host.h Leave, job_done): a worker that finished the job is recorded
// (and written to a checkpoint, so a restarted shard still knows it, an unassembled one included); a
// failure report is logged and not counted; the job is done once every worker left (elastic: once no
// member is left). Elastic joins and leaves before the end: ps/shard_host_elastic.cc.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "ps/shard_host.h"
#include "ps/shard_host_fields.h"
#include "spdlog/spdlog.h"

namespace sketchps::ps {

using host_fields::Invalid;
using host_fields::Precondition;

absl::StatusOr<v1::LeaveResponse> ShardHost::Leave(const v1::LeaveRequest& request,
                                                   const std::optional<Identity>& caller) {
  MarkCall();
  if (request.job_id() != options_.job.job_id) {
    return Precondition("job_id",
                        absl::StrCat("'", request.job_id(), "' is not this server's job '", options_.job.job_id, "'"));
  }
  if (request.worker_id() >= options_.job.workers) {
    return Invalid("worker_id", absl::StrCat(request.worker_id(), " is not in [0, ", options_.job.workers, ")"));
  }
  if (request.shard_id() != options_.shard_id) {
    return Invalid("shard_id", absl::StrCat(request.shard_id(), " sent to shard ", options_.shard_id));
  }
  SKETCHPS_RETURN_IF_ERROR(CheckWorker(caller, request.worker_id(), "worker_id"));
  v1::LeaveResponse response;
  if (request.failed()) {
    // A failure report, not a departure: the worker is not counted as having left, so the shard keeps
    // serving (a restarted worker rejoins) until the job ends or it is stopped.
    absl::MutexLock lock(&left_mu_);
    spdlog::warn("shard {}: worker {} failed at round {}: {} ({} of {} workers finished)", options_.shard_id,
                 request.worker_id(), request.rounds_applied(),
                 request.reason().empty() ? std::string("no reason given") : request.reason().substr(0, 1000),
                 left_.size(), options_.job.workers);
    response.set_workers_left(static_cast<std::uint32_t>(left_.size()));
    return response;
  }
  std::shared_ptr<Shard> shard;
  std::optional<v1::ShardCheckpoint> unassembled;  // restarted, not serving yet: its checkpoint
  {
    absl::MutexLock lock(&mu_);
    shard = shard_;
    // A shard restarted after the last round may hear from workers that finished before its crash.
    const std::uint64_t held = shard ? shard->rounds_applied() : (restored_ ? restored_->rounds_applied : 0);
    if (!shard && !restored_) return Precondition("shard", "a shard without state has no job to leave");
    if (request.rounds_applied() != held) {
      return Precondition("rounds_applied", absl::StrCat(request.rounds_applied(), " != this shard's ", held,
                                                         ": the worker has not finished the job this shard holds"));
    }
    if (!shard) unassembled = loaded_;
  }
  if (options_.job.elastic && shard) SKETCHPS_RETURN_IF_ERROR(ElasticLeave(*shard, request));
  bool added = false;
  {
    absl::MutexLock lock(&left_mu_);
    added = left_.insert(request.worker_id()).second;
    if (added && !options_.job.elastic) {
      spdlog::info("shard {}: worker {} finished the job ({} of {} workers)", options_.shard_id, request.worker_id(),
                   left_.size(), options_.job.workers);
    }
    response.set_workers_left(static_cast<std::uint32_t>(left_.size()));
  }
  // Persist who left, so that a restart of this shard does not wait for them.
  if (added && shard) SubmitCheckpoint(*shard);
  if (added && unassembled && writer_) {
    SetWorkersLeft(*unassembled);
    writer_->Submit(*std::move(unassembled));
  }
  return response;
}

void ShardHost::SetWorkersLeft(v1::ShardCheckpoint& c) const {
  absl::MutexLock lock(&left_mu_);
  c.clear_workers_left();
  for (std::uint32_t w : left_) c.add_workers_left(w);
}

bool ShardHost::job_done() const {
  if (options_.job.elastic) {
    std::shared_ptr<Shard> shard = this->shard();
    absl::MutexLock lock(&left_mu_);
    return shard && !left_.empty() && shard->table().ActiveMembers() == 0;
  }
  absl::MutexLock lock(&left_mu_);
  return left_.size() == options_.job.workers;
}

}  // namespace sketchps::ps
