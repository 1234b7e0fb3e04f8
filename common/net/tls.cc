#include "common/net/tls.h"

#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <memory>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace sketchps {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  if (path.empty())
    return absl::InvalidArgumentError(absl::StrCat("TLS: no ", what, " file given (or pass --insecure)"));
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("TLS ", what, " ", path, ": cannot read"));
  std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (pem.find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("TLS ", what, " ", path, ": not a PEM file"));
  }
  return pem;
}

// A private key other users can read is refused (group-readable is allowed: Kubernetes mounts Secrets
// for a pod's fsGroup that way).
absl::StatusOr<std::string> ReadKey(const std::string& path) {
  struct stat st {};
  if (!path.empty() && ::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("TLS key ", path, ": readable by every user (mode ",
                                                      absl::StrFormat("%04o", st.st_mode & 07777),
                                                      "); chmod o-r it (sketchps certs writes keys 0600)"));
  }
  return ReadPem(path, "key");
}

// A certificate outside its validity period fails at start, naming the dates, instead of every
// handshake failing later with a generic error (a skewed clock, an expired or a future certificate).
absl::StatusOr<std::string> ReadCertificate(const std::string& path, const char* what) {
  SKETCHPS_ASSIGN_OR_RETURN(std::string pem, ReadPem(path, what));
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!cert) return absl::InvalidArgumentError(absl::StrCat("TLS ", what, " ", path, ": no X.509 certificate in it"));
  const auto when = [](const ASN1_TIME* t) {
    std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new(BIO_s_mem()), &BIO_free);
    ASN1_TIME_print(out.get(), t);
    char* data = nullptr;
    const long n = BIO_get_mem_data(out.get(), &data);
    return std::string(data, static_cast<std::size_t>(n));
  };
  if (X509_cmp_current_time(X509_get0_notBefore(cert.get())) > 0) {
    return absl::FailedPreconditionError(absl::StrCat("TLS ", what, " ", path, ": not valid before ",
                                                      when(X509_get0_notBefore(cert.get())),
                                                      " (is this host's clock right?)"));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0) {
    return absl::FailedPreconditionError(absl::StrCat("TLS ", what, " ", path, ": expired on ",
                                                      when(X509_get0_notAfter(cert.get())),
                                                      " (renew it: sketchps certs; docs/security.md)"));
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
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a sketchps identity (worker-<rank> or server-<shard>)"));
  }
  if (number.empty() || !absl::SimpleAtoi(number, &id.index) || absl::StrCat(id.index) != number) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a sketchps identity (worker-<rank> or server-<shard>)"));
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
  SKETCHPS_ASSIGN_OR_RETURN(options.pem_root_certs, ReadCertificate(config.ca_file, "CA"));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  SKETCHPS_ASSIGN_OR_RETURN(pair.private_key, ReadKey(config.key_file));
  SKETCHPS_ASSIGN_OR_RETURN(pair.cert_chain, ReadCertificate(config.cert_file, "certificate"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsConfig& config) {
  if (config.insecure) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  SKETCHPS_ASSIGN_OR_RETURN(options.pem_root_certs, ReadCertificate(config.ca_file, "CA"));
  SKETCHPS_ASSIGN_OR_RETURN(options.pem_private_key, ReadKey(config.key_file));
  SKETCHPS_ASSIGN_OR_RETURN(options.pem_cert_chain, ReadCertificate(config.cert_file, "certificate"));
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::optional<Identity>> CallerIdentity(const grpc::ServerContextBase& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::optional<Identity>();
  for (const auto& name : auth->FindPropertyValues("x509_common_name")) {
    auto id = ParseIdentity(absl::string_view(name.data(), name.size()));
    if (id.ok()) return std::optional<Identity>(*id);
  }
  return absl::PermissionDeniedError(
      "the client's certificate names no sketchps identity (worker-<rank> or server-<shard>)");
}

absl::Status CheckWorker(const std::optional<Identity>& caller, std::uint32_t claimed, absl::string_view field) {
  if (!caller) return absl::OkStatus();
  if (caller->role == Identity::Role::kWorker && caller->index == claimed) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(field, ": ", caller->Name(), " cannot speak for worker ", claimed));
}

}  // namespace sketchps
