// The gRPC edge every sketchps process shares (servers, workers, peers, the front end), so that
// status mapping, channel and server options, and retries are written once.
//
//   ToGrpcStatus / FromGrpcStatus   absl::Status <-> grpc::Status (the canonical codes are the same,
//                                   the Reason in the details); a non-OK status never leaves with an
//                                   empty message.
//   ConfigureServer(builder, opts)  message limits, keepalive policy, stream cap, handshake timeout,
//                                   memory quota and read size, exclusive port.
//   MakeClientChannel(address, ..)  credentials and the peer's expected identity (common/net/tls.h),
//                                   message limits, 10 s keepalive pings (servers accept one every
//                                   5 s), reconnect backoff from 100 ms capped at 1 s, so a restarted
//                                   process is reached within about a second. Callers make their
//                                   RPCs wait-for-ready under a deadline rather than fail fast.
//   Backoff                         exponential backoff with a patience budget for retry loops.
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/reason.h"  // IsTransient, for the callers of this edge

namespace sketchps {

// The status's Reason (common/reason.h) travels in the details as a sketchps.v1.ErrorDetail, so
// the receiver decides by code and Reason, never by the message. An INVALID_ARGUMENT received
// without a Reason gets Reason::kRefused (the other process refused what this one sent).
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Test hook: with SKETCHPS_TEST_REWORD_ERRORS=1 in a process's environment, every status message it
// sends over gRPC is reworded (RewordForTests) while code and Reason stay; tests run jobs so to show
// that no decision depends on a message's words.
bool RewordingForTests();
std::string RewordForTests(absl::string_view message);

struct ServerOptions {
  int max_message_bytes = 64 << 20;                      // largest request or response accepted
  int max_concurrent_streams = 256;                      // per connection
  absl::Duration handshake_timeout = absl::Seconds(10);  // connections that never finish it are closed
  std::size_t memory_quota_bytes = 0;                    // the server's resource quota (0: gRPC's default)
  // Largest read from one connection's socket. gRPC 1.51 buffers a message whole before its size
  // check and charges the reads to the quota; smaller reads let the quota's reclaimer stop an
  // oversize message sooner (measured: docs/security.md, "Resource limits"). gRPC's default: 4 MiB.
  int max_read_chunk_bytes = 256 << 10;
};

// Applies `options` to `builder`: message size limits, GRPC_ARG_MAX_CONCURRENT_STREAMS, the
// handshake timeout, a keepalive policy that accepts pings every 5 s (with or without calls) and
// closes connections whose keepalive goes unanswered, a ResourceQuota when memory_quota_bytes > 0,
// reads of at most max_read_chunk_bytes, and SO_REUSEPORT off, so that a second process cannot bind
// the same port.
void ConfigureServer(grpc::ServerBuilder& builder, const ServerOptions& options);

// A channel to `address` with `credentials` (common/net/tls.h MakeChannelCredentials). With TLS the
// server must prove `identity` ("server-1", "worker-3"), whatever the network address is.
std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address, int max_message_bytes,
                                                 const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                                 const std::string& identity);

// Exponential backoff with a patience budget:
//   Backoff backoff(absl::Milliseconds(50), absl::Seconds(1), patience);
//   while (...) { if (!backoff.Wait()) break; }   // false once failing longer than `patience`
class Backoff {
 public:
  Backoff(absl::Duration initial, absl::Duration max, absl::Duration patience);
  // Whether the failures have lasted longer than the patience (no sleep).
  bool Expired() const { return absl::Now() - start_ > patience_; }
  // When the patience runs out: a caller bounds each attempt's deadline by it, so that a patience
  // shorter than one attempt's timeout is kept.
  absl::Time deadline() const { return start_ + patience_; }
  // Sleeps for the next delay and returns true, or returns false at once once Expired().
  bool Wait();
  int attempts() const { return attempts_; }

 private:
  const absl::Time start_ = absl::Now();
  const absl::Duration max_;
  const absl::Duration patience_;
  absl::Duration next_;
  int attempts_ = 0;
};

}  // namespace sketchps
