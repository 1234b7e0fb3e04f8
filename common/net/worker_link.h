// WorkerLink: what a worker's transport knows of the worker and its job, the same for both protocols
// (ps/client.h's ClientOptions and peer/transport.h's PeerOptions start with it). The session fills it
// once (session/session.cc) and each protocol adds its own fields.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/net/tls.h"
#include "common/wire/fingerprint.h"

namespace sketchps {

struct WorkerLink {
  std::string job_id;
  std::uint32_t rank = 0;  // this worker; its identity is worker-<rank> (common/net/tls.h)
  std::uint32_t num_workers = 1;
  // ps: continuous failure of a shard before giving up; decentralized: the longest wait for peers_file.
  absl::Duration patience = absl::Seconds(120);
  TlsConfig tls;
  Fingerprint fingerprint;  // the job's: sent with every Join (ps), equal on every peer (checked at Start)
};

}  // namespace sketchps
