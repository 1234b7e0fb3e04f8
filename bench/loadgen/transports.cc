#include "bench/loadgen/transports.h"

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net/port_file.h"
#include "common/net/rendezvous_file.h"
#include "common/status.h"
#include "peer/transport.h"
#include "ps/transport.h"

namespace sketchps::bench {
namespace fs = std::filesystem;
namespace {

constexpr absl::Duration kPatience = absl::Seconds(60);

absl::Status Named(std::uint32_t rank, const absl::Status& st) { return Annotate(st, absl::StrCat("worker ", rank)); }

// Waits until every rank has written its port file (or one has failed); the addresses in rank order.
absl::StatusOr<std::vector<std::string>> CollectPorts(const fs::path& dir, std::uint32_t workers,
                                                      const std::atomic<int>& failed) {
  const absl::Time deadline = absl::Now() + kPatience;
  std::vector<std::string> peers(workers);
  for (std::uint32_t r = 0; r < workers; ++r) {
    const fs::path file = dir / absl::StrCat("peer-", r, ".port");
    int port = 0;
    while (port == 0) {
      if (failed.load() > 0) return absl::AbortedError("a peer failed to start");
      if (absl::Now() > deadline)
        return absl::DeadlineExceededError(absl::StrCat("worker ", r, ": no port after 60 s"));
      if (auto ports = ReadPortFile(file.string()); ports.ok()) {
        port = ports->peer;
      } else if (ports.status().code() != absl::StatusCode::kNotFound) {
        return ports.status();
      } else {
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
    peers[r] = absl::StrCat("127.0.0.1:", port);
  }
  return peers;
}

}  // namespace

absl::StatusOr<Transports> ConnectWorkers(const JobSpec& job, const std::vector<std::string>& addresses) {
  Transports out;
  for (std::uint32_t r = 0; r < job.workers; ++r) {
    ps::ClientOptions o;
    o.job_id = job.job_id;
    o.rank = r;
    o.num_workers = job.workers;
    o.servers = addresses;
    o.rpc_timeout = absl::Seconds(30);
    o.patience = kPatience;
    o.fingerprint = job.fingerprint;
    auto t = ps::ConnectParameterServers(std::move(o));
    if (!t.ok()) return Named(r, t.status());
    out.push_back(*std::move(t));
  }
  return out;
}

absl::StatusOr<Transports> StartPeerWorkers(const JobSpec& job, const ShardMap& shards, const std::string& dir) {
  const std::uint32_t p = job.workers;
  const fs::path peers_file = fs::path(dir) / "peers";
  Transports out(p);
  std::vector<absl::Status> status(p);
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (std::uint32_t r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      peer::PeerOptions o;
      o.job_id = job.job_id;
      o.rank = r;
      o.num_workers = p;
      o.listen = "127.0.0.1:0";
      o.port_file = (fs::path(dir) / absl::StrCat("peer-", r, ".port")).string();
      o.peers_file = peers_file.string();
      o.patience = kPatience;
      o.peer_timeout = kPatience;
      o.regroup = false;
      o.fingerprint = job.fingerprint;
      auto t = peer::StartPeers(o, shards);
      if (t.ok()) {
        out[r] = *std::move(t);
      } else {
        status[r] = Named(r, t.status());
        failed.fetch_add(1);
      }
    });
  }
  auto peers = CollectPorts(dir, p, failed);
  // Unblocks the ranks waiting for the list; on failure an empty list makes them fail at once.
  const absl::Status written = WriteFileAtomically(peers_file.string(), peers.ok() ? absl::StrJoin(*peers, ",") : "");
  for (auto& t : threads) t.join();
  for (const auto& st : status) SKETCHPS_RETURN_IF_ERROR(st);
  SKETCHPS_RETURN_IF_ERROR(peers.status());
  SKETCHPS_RETURN_IF_ERROR(written);
  return out;
}

}  // namespace sketchps::bench
