// Test support: P peer servers on 127.0.0.1 (free ports) and one PeerAggregator per rank, as P
// decentralized workers would run them, plus a helper that runs one function per rank on its own
// thread. Ranks listed in `absent` get an address with nothing listening (a dead peer).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "absl/strings/str_cat.h"
#include "peer/peer_aggregator.h"
#include "peer/service.h"

namespace sketchps::testing {

inline peer::PeerConfig PeerBase(const std::string& job_id, std::vector<std::uint64_t> ranges,
                                 absl::Duration timeout = absl::Seconds(20), bool sparse_tree_merge = false) {
  peer::PeerConfig c;
  c.job_id = job_id;
  c.range_lengths = std::move(ranges);
  c.peer_timeout = timeout;
  c.sparse_tree_merge = sparse_tree_merge;
  return c;
}

class PeerGroup {
 public:
  PeerGroup(std::uint32_t workers, const peer::PeerConfig& base, std::set<std::uint32_t> absent = {}) {
    for (std::uint32_t r = 0; r < workers; ++r) {
      peer::PeerConfig c = base;
      c.rank = r;
      c.num_workers = workers;
      auto server = peer::PeerServer::Start("127.0.0.1:0", c);
      if (!server.ok()) throw std::runtime_error(server.status().ToString());
      addresses_.push_back(absl::StrCat("127.0.0.1:", (*server)->port()));
      if (absent.count(r) > 0) {
        (*server)->Shutdown();  // the port stays unused: a peer that died
        servers_.emplace_back();
      } else {
        servers_.push_back(*std::move(server));
      }
    }
    for (std::uint32_t r = 0; r < workers; ++r) {
      if (!servers_[r]) {
        aggregators_.emplace_back();
        continue;
      }
      auto agg = peer::PeerAggregator::Create(servers_[r]->endpoint(), addresses_);
      if (!agg.ok()) throw std::runtime_error(agg.status().ToString());
      aggregators_.push_back(*std::move(agg));
    }
  }

  peer::PeerAggregator& aggregator(std::uint32_t r) { return *aggregators_.at(r); }
  peer::PeerServer& server(std::uint32_t r) { return *servers_.at(r); }
  const std::vector<std::string>& addresses() const { return addresses_; }
  std::uint32_t size() const { return static_cast<std::uint32_t>(addresses_.size()); }

 private:
  std::vector<std::unique_ptr<peer::PeerServer>> servers_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<peer::PeerAggregator>> aggregators_;
};

// Runs fn(rank) for every rank in `ranks` on its own thread (one OpenMP thread each) and joins.
inline void RunRanks(const std::vector<std::uint32_t>& ranks, const std::function<void(std::uint32_t)>& fn) {
  std::vector<std::thread> threads;
  for (std::uint32_t r : ranks) {
    threads.emplace_back([&fn, r] {
#if defined(_OPENMP)
      omp_set_num_threads(1);
#endif
      fn(r);
    });
  }
  for (auto& t : threads) t.join();
}

inline std::vector<std::uint32_t> AllRanks(std::uint32_t workers) {
  std::vector<std::uint32_t> ranks;
  for (std::uint32_t r = 0; r < workers; ++r) ranks.push_back(r);
  return ranks;
}

}  // namespace sketchps::testing
