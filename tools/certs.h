// `sketchps certs`: the certificates of one job's mutual TLS (common/net/tls.h), made with OpenSSL's
// library: a CA, and one key and certificate per worker rank and per server shard.
//
//   <dir>/ca.pem, ca.key                 self-signed CA (keep ca.key off the training hosts)
//   <dir>/worker-<r>.pem, worker-<r>.key   identity "worker-<r>": client certificate towards the
//                                          servers and peers, and the server certificate of its
//                                          Peer service (decentralized mode)
//   <dir>/server-<s>.pem, server-<s>.key   identity "server-<s>"
// Each identity is the certificate's common name and its one DNS subject alternative name; clients
// verify a server against the identity they expect (common/net/tls.h), not its network name, so the
// same files work on loopback, in containers and in Kubernetes. Keys are ECDSA P-256, signatures
// SHA-256, validity `days` (default 365). Private keys are written with mode 0600.
//
// An existing CA in the folder is reused (to add identities or renew them; docs/security.md,
// "Rotation"), unless `new_ca` is set. Errors name the file or the option.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace sketchps::tools {

struct CertsOptions {
  std::string out;            // folder (created)
  std::uint32_t workers = 0;  // worker-0 .. worker-(workers-1)
  std::uint32_t servers = 0;  // server-0 .. server-(servers-1)
  int days = 365;
  bool new_ca = false;      // replace ca.pem/ca.key even when they exist
  int valid_from_days = 0;  // validity starts this many days from now (tests: negative = expired)
};

absl::Status MakeCerts(const CertsOptions& options);

}  // namespace sketchps::tools
