#include "common/tls.h"

#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat("TLS: no ", what, " file given (or pass --insecure)"));
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("TLS ", what, " ", path, ": cannot read"));
  std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (pem.find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("TLS ", what, " ", path, ": not a PEM file"));
  }
  return pem;
}

}  // namespace

std::string Identity::Name() const { return absl::StrCat(role == Role::kWorker ? "worker-" : "server-", index); }

absl::StatusOr<Identity> ParseIdentity(absl::string_view name) {
  Identity id;
  absl::string_view number;
  if (name.rfind("worker-", 0) == 0) {
    id.role = Identity::Role::kWorker;
    number = name.substr(7);
  } else if (name.rfind("server-", 0) == 0) {
    id.role = Identity::Role::kServer;
    number = name.substr(7);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a sketchps identity (worker-<rank> or server-<shard>)"));
  }
  if (number.empty() || !absl::SimpleAtoi(number, &id.index) || absl::StrCat(id.index) != number) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a sketchps identity (worker-<rank> or server-<shard>)"));
  }
  return id;
}

TlsConfig TlsConfig::FromDir(const std::string& dir, const Identity& self) {
  const std::string base = dir.empty() ? "" : (dir.back() == '/' ? dir : dir + "/");
  return TlsConfig{false, base + "ca.pem", base + self.Name() + ".pem", base + self.Name() + ".key"};
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsConfig& config) {
  if (config.insecure) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  SKETCHPS_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(config.ca_file, "CA"));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  SKETCHPS_ASSIGN_OR_RETURN(pair.private_key, ReadPem(config.key_file, "key"));
  SKETCHPS_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(config.cert_file, "certificate"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsConfig& config) {
  if (config.insecure) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  SKETCHPS_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(config.ca_file, "CA"));
  SKETCHPS_ASSIGN_OR_RETURN(options.pem_private_key, ReadPem(config.key_file, "key"));
  SKETCHPS_ASSIGN_OR_RETURN(options.pem_cert_chain, ReadPem(config.cert_file, "certificate"));
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::optional<Identity>> CallerIdentity(const grpc::ServerContextBase& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::optional<Identity>();
  for (const auto& name : auth->FindPropertyValues("x509_common_name")) {
    auto id = ParseIdentity(absl::string_view(name.data(), name.size()));
    if (id.ok()) return std::optional<Identity>(*id);
  }
  return absl::PermissionDeniedError("the client's certificate names no sketchps identity (worker-<rank> or server-<shard>)");
}

absl::Status CheckWorker(const std::optional<Identity>& caller, std::uint32_t claimed, absl::string_view field) {
  if (!caller) return absl::OkStatus();
  if (caller->role == Identity::Role::kWorker && caller->index == claimed) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(field, ": ", caller->Name(), " cannot speak for worker ", claimed));
}

}  // namespace sketchps
