// The Peer gRPC service (proto/sketchps/v1/peer.proto) and the server every decentralized worker
// runs. The handler only validates and files: it never waits for the local rank's progress.
//
//   auto server = PeerServer::Start("0.0.0.0:7070", config);   // "127.0.0.1:0" picks a free port
//   ... collect every rank's address, then PeerAggregator::Create(server->endpoint(), peers)
//
// Receive() is the handler without gRPC (tests drive it directly). What it checks, in order:
//   FAILED_PRECONDITION  header.job_id not this endpoint's, or header.epoch older (not stored);
//   UNAVAILABLE          header.epoch newer: the sender regrouped first (it retries);
//   INVALID_ARGUMENT     header.worker_id / shard_id / phase out of range, a step at which the
//                        sender does not send to this rank, an abort code out of range (not stored);
//   INVALID_ARGUMENT     bad spec or partial state (partial_proto.h): stored as a rejected letter, so the
//                        local phase fails at once with the same error naming the sender;
//   RESOURCE_EXHAUSTED   the mailbox is full (retry).
//   PERMISSION_DENIED    the caller's certificate is not the sender's identity (a forged letter or
//                        abort notice);
// Abort notices (abort_code set) are filed for their phase. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "peer/config.h"
#include "peer/mailbox.h"
#include "peer/regroup.h"
#include "sketchps/v1/peer.grpc.pb.h"

namespace sketchps::peer {

// One epoch's configuration and mailbox, shared by the service and the aggregator.
struct Endpoint {
  explicit Endpoint(PeerConfig c);
  const PeerConfig config;
  Mailbox mailbox;
};

// `caller`: the identity the request came with (common/net/tls.h): it must be the sender's
// (PERMISSION_DENIED otherwise, checked before anything is stored); nullopt on a plaintext channel.
absl::Status Receive(Endpoint& endpoint, const v1::ExchangeRequest& request,
                     const std::optional<Identity>& caller = std::nullopt);

class PeerService final : public v1::Peer::Service {
 public:
  explicit PeerService(std::shared_ptr<Endpoint> endpoint) : endpoint_(std::move(endpoint)) {}
  grpc::Status Exchange(grpc::ServerContext* context, const v1::ExchangeRequest* request,
                        v1::ExchangeResponse* response) override;
  grpc::Status Regroup(grpc::ServerContext* context, const v1::RegroupRequest* request,
                       v1::RegroupResponse* response) override;
  grpc::Status Probe(grpc::ServerContext* context, const v1::ProbeRequest* request,
                     v1::ProbeResponse* response) override;
  Regrouper& regrouper() { return regrouper_; }
  std::shared_ptr<Endpoint> endpoint() const;
  void Reset(std::shared_ptr<Endpoint> endpoint);

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<Endpoint> endpoint_ ABSL_GUARDED_BY(mu_);
  Regrouper regrouper_;
};

class PeerServer {
 public:
  // Validates the config and listens on `listen` ("host:port"; port 0 picks one).
  static absl::StatusOr<std::unique_ptr<PeerServer>> Start(const std::string& listen, PeerConfig config);
  ~PeerServer();

  int port() const { return port_; }
  std::shared_ptr<Endpoint> endpoint() const { return service_.endpoint(); }
  // Agreement on the next membership after a peer failure (peer/regroup.h); arm it per epoch.
  Regrouper& regrouper() { return service_.regrouper(); }
  // Membership change: a new epoch (and rank, workers, shards) with an empty mailbox; requests of
  // the old epoch are refused from now on. Aggregators of the old endpoint keep their own.
  absl::Status Reset(PeerConfig config);
  void Shutdown(absl::Duration grace = absl::Seconds(1));

 private:
  explicit PeerServer(std::shared_ptr<Endpoint> endpoint) : service_(std::move(endpoint)) {}
  PeerService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace sketchps::peer
