// What a shard needs of a job spec, for the daemon and the tests. Header-only on purpose: the server
// library (sketchps::server) depends on the engine only; the job spec, whose parser knows the methods,
// is linked by sketchps-server's main and the tests.
#pragma once

#include <string>

#include "job/job_spec.h"
#include "server/shard_host.h"

namespace sketchps::server {

inline HostOptions HostOptionsFor(const JobSpec& job, std::uint32_t shard_id, const std::string& checkpoint_dir) {
  HostOptions options;
  options.job = ShardJob{job.job_id,     job.workers, job.servers, job.optimizer, job.scheme.global_momentum,
                         job.rounds_per_epoch(), job.layout, job.fingerprint};
  options.shard_id = shard_id;
  options.checkpoint_dir = checkpoint_dir;
  options.checkpoint_every = job.checkpoint.every_rounds;
  return options;
}

}  // namespace sketchps::server
