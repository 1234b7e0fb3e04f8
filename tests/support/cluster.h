// An in-process parameter-server cluster for tests: S ShardHosts, each behind a real gRPC server on
// 127.0.0.1 (a free port), exactly as sketchps-server serves them. Header-only.
//
//   LocalCluster cluster(job, /*checkpoint_dir=*/"");
//   cluster.addresses()   // "127.0.0.1:port" per shard, for ps::Client / TrainerOptions::servers
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/net/grpc_edge.h"
#include "job/job_spec.h"
#include "ps/metrics.h"
#include "ps/service.h"
#include "ps/shard_host.h"
#include "server/job_adapter.h"

namespace sketchps::testing {

class LocalCluster {
 public:
  explicit LocalCluster(const JobSpec& job, const std::string& checkpoint_dir = "") {
    for (std::uint32_t s = 0; s < job.servers; ++s) {
      auto& node = nodes_.emplace_back(std::make_unique<Node>());
      node->metrics = std::make_unique<ps::ServerMetrics>(s);
      auto host = ps::ShardHost::Open(ps::HostOptionsFor(job, s, checkpoint_dir), node->metrics.get());
      if (!host.ok()) throw std::runtime_error(host.status().ToString());
      node->host = *std::move(host);
      node->service = std::make_unique<ps::ParameterServerService>(*node->host, absl::Seconds(10));
      grpc::ServerBuilder builder;
      int port = 0;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
      ConfigureServer(builder, ServerOptions{});
      builder.RegisterService(node->service.get());
      node->server = builder.BuildAndStart();
      if (!node->server || port == 0) throw std::runtime_error("cannot start a test server");
      addresses_.push_back(absl::StrCat("127.0.0.1:", port));
    }
  }
  ~LocalCluster() {
    for (auto& node : nodes_) node->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  const std::vector<std::string>& addresses() const { return addresses_; }
  ps::ShardHost& host(std::uint32_t s) { return *nodes_[s]->host; }
  ps::ServerMetrics& metrics(std::uint32_t s) { return *nodes_[s]->metrics; }

 private:
  struct Node {
    std::unique_ptr<ps::ServerMetrics> metrics;
    std::unique_ptr<ps::ShardHost> host;
    std::unique_ptr<ps::ParameterServerService> service;
    std::unique_ptr<grpc::Server> server;
  };
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::string> addresses_;
};

}  // namespace sketchps::testing
