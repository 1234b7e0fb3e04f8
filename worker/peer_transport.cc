#include "worker/peer_transport.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "peer/peer_aggregator.h"
#include "peer/service.h"
#include "spdlog/spdlog.h"

namespace sketchps::worker {
namespace {

class PeerTransport final : public Transport {
 public:
  PeerTransport(std::unique_ptr<peer::PeerServer> server, std::unique_ptr<peer::PeerAggregator> aggregator)
      : server_(std::move(server)), aggregator_(std::move(aggregator)) {}
  ~PeerTransport() override { server_->Shutdown(); }

  absl::StatusOr<std::uint64_t> Start(const LayerTable&, const ShardMap&, float*, Replica&) override { return 0; }
  Aggregator& aggregator() override { return *aggregator_; }
  absl::Status CheckReplica(std::uint64_t, const ShardMap&, const float*) override { return absl::OkStatus(); }

  TransportCounters counters() const override {
    const peer::PeerCounters c = aggregator_->counters();
    TransportCounters out{c.wire_up, c.wire_down, true, c.raw_up, c.raw_down, {}};
    for (const auto& s : c.shards) out.seconds.push_back(s.seconds);
    return out;
  }

 private:
  std::unique_ptr<peer::PeerServer> server_;
  std::unique_ptr<peer::PeerAggregator> aggregator_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> StartPeers(const PeerOptions& o, const ShardMap& shards) {
  if (o.peers.size() != o.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("--peers: ", o.peers.size(), " addresses for ", o.num_workers, " workers"));
  }
  peer::PeerConfig config;
  config.job_id = o.job_id;
  config.rank = o.rank;
  config.num_workers = o.num_workers;
  for (const auto& r : shards.ranges) config.range_lengths.push_back(r.size());
  config.peer_timeout = o.peer_timeout;
  SKETCHPS_ASSIGN_OR_RETURN(auto server, peer::PeerServer::Start(o.listen, config));
  spdlog::info("peer service of rank {} listening on port {}", o.rank, server->port());
  SKETCHPS_ASSIGN_OR_RETURN(auto aggregator, peer::PeerAggregator::Create(server->endpoint(), o.peers));
  return std::unique_ptr<Transport>(new PeerTransport(std::move(server), std::move(aggregator)));
}

}  // namespace sketchps::worker
