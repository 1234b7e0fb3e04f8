// The client channel every sketchps process opens to another (a worker to its shards, a peer to its
// peers): message size limit, 10 s keepalive pings (the servers accept them every 5 s), and a
// reconnect backoff from 100 ms capped at 1 s, so a restarted process is reached within about a
// second. Callers make their RPCs wait-for-ready under a deadline rather than fail fast.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace sketchps {

std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address, int max_message_bytes);

}  // namespace sketchps
