#include "peer/transport.h"

#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/net/port_file.h"
#include "common/net/rendezvous_file.h"
#include "common/reason.h"
#include "common/status.h"
#include "peer/peer_aggregator.h"
#include "peer/service.h"
#include "spdlog/spdlog.h"

namespace sketchps::peer {
namespace {

constexpr absl::Duration kRegroupSlack = absl::Seconds(10);  // window = peer_timeout + this
// A rank that finds another job (or other initial weights) at a peer stays reachable this long
// before it gives up, so that every peer probes it too and names the differing keys itself (they
// reported "Deadline Exceeded" when it exited at once).
constexpr absl::Duration kMismatchLinger = absl::Seconds(5);

class PeerTransport final : public Transport {
 public:
  PeerTransport(std::unique_ptr<PeerServer> server, PeerConfig config, std::vector<std::string> peers, bool regroup,
                absl::Duration patience)
      : server_(std::move(server)),
        config_(std::move(config)),
        peers_(std::move(peers)),
        regroup_(regroup),
        patience_(patience) {}
  ~PeerTransport() override { server_->Shutdown(); }

  // Arms the regrouper and builds the aggregator for config_ and peers_.
  absl::Status Enter() {
    SKETCHPS_RETURN_IF_ERROR(
        server_->regrouper().Arm(RegroupConfig{config_.job_id, config_.epoch, config_.rank, peers_,
                                               config_.peer_timeout + kRegroupSlack, config_.tls, config_.identities}));
    aggregator_.reset();
    SKETCHPS_ASSIGN_OR_RETURN(aggregator_, PeerAggregator::Create(server_->endpoint(), peers_));
    return absl::OkStatus();
  }

  // Every peer must run the same job: their fingerprints are compared before the first round.
  absl::StatusOr<std::uint64_t> Start(const LayerTable&, const ShardMap&, float*, Replica&) override {
    if (absl::Status st = aggregator_->CheckPeers(patience_); !st.ok()) {
      if (IsFingerprintMismatch(st) || IsModelMismatch(st)) {
        spdlog::error("{}; staying reachable for {} so that every peer can name the difference",
                      std::string(st.message()), absl::FormatDuration(kMismatchLinger));
        absl::SleepFor(kMismatchLinger);
      }
      return st;
    }
    return 0;
  }
  Aggregator& aggregator() override { return *aggregator_; }
  absl::Status CheckReplica(std::uint64_t, const ShardMap&, const float*) override { return absl::OkStatus(); }

  absl::StatusOr<Regrouped> Regroup(const absl::Status& failure, std::uint64_t next_round) override {
    // A rank whose letter a peer refused is evicted: it stops (exit code 4), the others go on.
    const std::optional<std::uint32_t> culprit = IsMisbehaved(failure) ? CulpritOf(failure) : std::nullopt;
    if (IsEvicted(failure) || (culprit && *culprit == config_.rank)) {
      return WithReason(absl::FailedPreconditionError(
                            absl::StrCat("evicted from the job at round ", next_round, ": ", failure.message())),
                        Reason::kEvicted);
    }
    if (!regroup_ || (failure.code() != absl::StatusCode::kUnavailable && !culprit)) return failure;
    std::set<std::uint32_t> evict;
    if (culprit) {
      evict.insert(*culprit);
      spdlog::warn(
          "round {}: rank {} sent a letter that failed validation ({}); evicting it and regrouping with "
          "the others of epoch {}",
          next_round, *culprit, std::string(failure.message()), config_.epoch);
    } else {
      spdlog::warn("round {} failed ({}); regrouping with the other survivors of epoch {}", next_round,
                   std::string(failure.message()), config_.epoch);
    }
    SKETCHPS_ASSIGN_OR_RETURN(RegroupPlan plan, server_->regrouper().Ask(next_round, evict));
    std::vector<std::string> peers;
    std::vector<std::uint32_t> identities;  // certificates keep the ranks of the job's start
    for (std::uint32_t m : plan.members) {
      peers.push_back(peers_.at(m));
      identities.push_back(config_.IdentityOf(m));
    }
    const std::uint32_t lost = static_cast<std::uint32_t>(peers_.size() - peers.size());
    config_.identities = std::move(identities);
    config_.epoch = plan.epoch;
    config_.rank = *plan.RankOf(config_.rank);
    config_.num_workers = static_cast<std::uint32_t>(peers.size());
    peers_ = std::move(peers);
    SKETCHPS_RETURN_IF_ERROR(server_->Reset(config_));
    SKETCHPS_RETURN_IF_ERROR(Enter());
    return Regrouped{plan.epoch, config_.rank, config_.num_workers, plan.round, lost};
  }

  TransportCounters counters() const override {
    const PeerCounters c = aggregator_->counters();
    TransportCounters out{c.wire_up, c.wire_down, true, c.raw_up, c.raw_down, {}};
    for (const auto& s : c.shards) out.seconds.push_back(s.seconds);
    return out;
  }

 private:
  std::unique_ptr<PeerServer> server_;
  PeerConfig config_;
  std::vector<std::string> peers_;
  const bool regroup_;
  const absl::Duration patience_;
  std::unique_ptr<PeerAggregator> aggregator_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> StartPeers(const PeerOptions& o, const ShardMap& shards) {
  if (o.peers.empty() == o.peers_file.empty()) {
    return absl::InvalidArgumentError("--peers / --peers-file: give exactly one of them");
  }
  if (!o.peers.empty() && o.peers.size() != o.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--peers: ", o.peers.size(), " addresses for ", o.num_workers, " workers"));
  }
  PeerConfig config;
  config.job_id = o.job_id;
  config.rank = o.rank;
  config.num_workers = o.num_workers;
  for (const auto& r : shards.ranges) config.range_lengths.push_back(r.size());
  config.peer_timeout = o.peer_timeout;
  config.tls = o.tls;
  config.fingerprint = o.fingerprint;
  SKETCHPS_ASSIGN_OR_RETURN(auto server, PeerServer::Start(o.listen, config));
  spdlog::info("peer service of rank {} listening on port {}", o.rank, server->port());
  std::vector<std::string> peers = o.peers;
  if (!o.port_file.empty()) SKETCHPS_RETURN_IF_ERROR(WritePortFile(o.port_file, PortReport{.peer = server->port()}));
  if (peers.empty()) {
    SKETCHPS_ASSIGN_OR_RETURN(const std::string list, WaitForFile(o.peers_file, o.patience));
    peers = absl::StrSplit(absl::StripAsciiWhitespace(list), ',', absl::SkipEmpty());
    if (peers.size() != o.num_workers) {
      return absl::InvalidArgumentError(absl::StrCat("--peers-file ", o.peers_file, ": ", peers.size(),
                                                     " addresses for ", o.num_workers, " workers"));
    }
  }
  auto transport = std::make_unique<PeerTransport>(std::move(server), config, std::move(peers), o.regroup, o.patience);
  SKETCHPS_RETURN_IF_ERROR(transport->Enter());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace sketchps::peer
