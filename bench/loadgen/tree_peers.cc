#include "bench/loadgen/tree_peers.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "peer/peer_aggregator.h"
#include "peer/service.h"

namespace sketchps::bench {
namespace {

constexpr absl::Duration kPatience = absl::Seconds(60);

class TreePeerTransport final : public Transport {
 public:
  TreePeerTransport(std::unique_ptr<peer::PeerServer> server, std::unique_ptr<peer::PeerAggregator> aggregator)
      : server_(std::move(server)), aggregator_(std::move(aggregator)) {}
  ~TreePeerTransport() override {
    aggregator_.reset();  // before the server whose endpoint it uses
    server_->Shutdown();
  }
  absl::StatusOr<std::uint64_t> Start(const LayerTable&, const ShardMap&, float*, Replica&) override {
    SKETCHPS_RETURN_IF_ERROR(aggregator_->CheckPeers(kPatience));
    return 0;
  }
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

peer::PeerConfig TreeConfig(const JobSpec& job, const ShardMap& shards, std::uint32_t rank) {
  peer::PeerConfig c;
  c.job_id = job.job_id;
  c.rank = rank;
  c.num_workers = job.workers;
  for (const auto& range : shards.ranges) c.range_lengths.push_back(range.size());
  c.sparse_tree_merge = true;
  c.peer_timeout = kPatience;
  c.fingerprint = job.fingerprint;
  return c;
}

}  // namespace

absl::StatusOr<Transports> StartTreePeers(const JobSpec& job, const ShardMap& shards) {
  std::vector<std::unique_ptr<peer::PeerServer>> servers;
  std::vector<std::string> peers;
  for (std::uint32_t r = 0; r < job.workers; ++r) {
    auto server = peer::PeerServer::Start("127.0.0.1:0", TreeConfig(job, shards, r));
    if (!server.ok()) {
      return Annotate(server.status(), absl::StrCat("worker ", r));
    }
    peers.push_back(absl::StrCat("127.0.0.1:", (*server)->port()));
    servers.push_back(*std::move(server));
  }
  Transports out;
  for (std::uint32_t r = 0; r < job.workers; ++r) {
    SKETCHPS_ASSIGN_OR_RETURN(auto agg, peer::PeerAggregator::Create(servers[r]->endpoint(), peers));
    out.push_back(std::make_unique<TreePeerTransport>(std::move(servers[r]), std::move(agg)));
  }
  return out;
}

}  // namespace sketchps::bench
