// Transport security of every sketchps connection: mutual TLS with the job's CA (`sketchps certs`),
// each process holding the certificate of its identity, or explicitly none (--insecure).
//
// Identities are "worker-<rank>" and "server-<shard>": a certificate's common name and its one DNS
// subject alternative name. A server requires and verifies its client's certificate; a client
// verifies the server against the identity it expects to reach (the TLS target name is set to
// "server-<s>" or "worker-<r>", whatever the network address), so a process cannot pose as another
// shard or rank. Handlers bind the ranks that requests claim to the caller's certificate
// (CallerIdentity): a worker can only speak for itself.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sketchps {

struct Identity {
  enum class Role { kWorker, kServer };
  Role role = Role::kWorker;
  std::uint32_t index = 0;

  std::string Name() const;  // "worker-3", "server-1"
  friend bool operator==(const Identity&, const Identity&) = default;
};

// "worker-3" -> {kWorker, 3}; InvalidArgument otherwise.
absl::StatusOr<Identity> ParseIdentity(absl::string_view name);

struct TlsConfig {
  // Plaintext, no identities. The daemons never rely on this default: they require --tls-dir or an
  // explicit --insecure (common/config/cli.h ResolveTls); in-process tests use plaintext.
  bool insecure = true;
  std::string ca_file;    // PEM: the CA every peer's certificate must chain to
  std::string cert_file;  // PEM: this process's certificate
  std::string key_file;   // PEM: its private key

  // ca.pem, <self>.pem and <self>.key in a folder made by `sketchps certs`.
  static TlsConfig FromDir(const std::string& dir, const Identity& self);
};

// Server credentials requiring and verifying a client certificate from the CA (or insecure ones).
// Errors name the file: unreadable, not PEM, a certificate outside its validity period (dates in
// the message: a skewed clock or an expired certificate fails at start), or a private key that
// every user may read (FailedPrecondition; group-readable keys are accepted).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsConfig& config);

// Channel credentials presenting this process's certificate (or insecure ones); errors as above.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsConfig& config);

// The identity the caller's certificate proves; nullopt on a plaintext connection. PermissionDenied
// when a TLS peer's certificate names no sketchps identity.
absl::StatusOr<std::optional<Identity>> CallerIdentity(const grpc::ServerContextBase& context);

// OK when `caller` may speak for worker `claimed`: no identity (insecure) or worker-<claimed>.
// PermissionDenied naming both otherwise ("worker_id: worker-2 cannot speak for worker 3").
absl::Status CheckWorker(const std::optional<Identity>& caller, std::uint32_t claimed, absl::string_view field);

}  // namespace sketchps
