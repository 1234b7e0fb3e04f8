// What a shard needs of a job spec, for the daemon and the tests. Header-only on purpose: the server
// library (sketchps::server) depends on the engine only; the job spec, whose parser knows the methods,
// is linked by sketchps-server's main and the tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/layout.h"
#include "common/net/grpc_edge.h"
#include "engine/phase.h"
#include "job/job_spec.h"
#include "ps/shard_host.h"

namespace sketchps::ps {

inline HostOptions HostOptionsFor(const JobSpec& job, std::uint32_t shard_id, const std::string& checkpoint_dir) {
  HostOptions options;
  options.job =
      ShardJob{job.job_id,
               job.workers,
               job.servers,
               job.optimizer,
               job.scheme.global_momentum,
               job.rounds_per_epoch(),
               job.layout,
               job.fingerprint,
               job.scheme.reduction_state,
               absl::Seconds(job.ps.round_deadline_seconds),
               job.ps.elastic ? std::optional<ElasticRoster>(ElasticRoster{job.ps.initial_workers}) : std::nullopt};
  options.shard_id = shard_id;
  options.checkpoint_dir = checkpoint_dir;
  options.checkpoint_every = job.checkpoint.every_rounds;
  options.older_if_damaged = job.checkpoint.older_if_damaged;
  return options;
}

// The largest legal message for this shard: a sketch table of kSketchCellsPerElement float32 cells
// per element of its range is the largest payload a push may carry (the decoders refuse more); a Join
// with weights, momentum and a result is smaller. Plus 64 KiB for headers and framing, at most
// 2047 MiB (gRPC's int limit).
inline int MaxMessageBytes(const JobSpec& job, std::uint32_t shard) {
  auto map = MakeShardMap(job.layout, job.servers);
  const std::uint64_t n = map.ok() && shard < map->ranges.size() ? map->ranges[shard].size() : job.layout.dim();
  const std::uint64_t bytes = 4 * kSketchCellsPerElement * n + (64 << 10);
  return static_cast<int>(std::min<std::uint64_t>(bytes, std::uint64_t{2047} << 20));
}

// The gRPC limits of shard `shard_id`: messages up to MaxMessageBytes (or max_message_mb MiB when
// > 0, the daemon's --max-message-mb), and a memory quota Q = max(8 MiB, 2 x workers x that size).
// gRPC 1.51 checks a message's size only once it has received all of it, and opens a stream's
// HTTP/2 window to the size a message declares, so the quota is what bounds the bytes buffered for
// messages above the limit (docs/security.md, "Resource limits": peak growth at most about
// Q + 8 MiB x (C + 1) for C connections pushing at once). It must hold every legal message in flight: each worker has
// at most one call per shard in flight (x2 for a Join or retry overlapping it); a quota below that fails legal pushes
// with RESOURCE_EXHAUSTED ("Buffers full").
inline std::size_t MemoryQuotaBytes(const JobSpec& job, int max_message_bytes) {
  return std::max<std::size_t>(
      std::size_t{8} << 20, 2 * std::size_t{std::max<std::uint32_t>(job.workers, 1)} * std::size_t(max_message_bytes));
}

inline ServerOptions ServerOptionsFor(const JobSpec& job, std::uint32_t shard_id, int max_message_mb) {
  ServerOptions options;
  options.max_message_bytes =
      max_message_mb > 0 ? std::min(max_message_mb, 2047) << 20 : MaxMessageBytes(job, shard_id);
  options.memory_quota_bytes = MemoryQuotaBytes(job, options.max_message_bytes);
  return options;
}

}  // namespace sketchps::ps
