#include "tools/certs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace sketchps::tools {
namespace {

namespace fs = std::filesystem;

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;
using File = std::unique_ptr<std::FILE, FileClose>;

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

absl::Status Failed(const std::string& what) { return absl::InternalError(absl::StrCat(what, ": ", OpenSslError())); }

absl::StatusOr<Key> NewKey() {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return Failed("generating an EC P-256 key");
  return key;
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Failed(absl::StrCat("certificate extension ", OBJ_nid2sn(nid), " = ", value));
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  if (!ok) return Failed("adding a certificate extension");
  return absl::OkStatus();
}

absl::Status SetNameAndDates(X509* cert, const std::string& common_name, const CertsOptions& o) {
  std::uint64_t serial = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof(serial)) != 1) return Failed("random serial number");
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert), serial >> 1);  // positive
  X509_set_version(cert, 2);                                          // v3
  const long from = static_cast<long>(o.valid_from_days) * 86400;
  X509_gmtime_adj(X509_getm_notBefore(cert), from - 3600);  // an hour of clock skew
  X509_gmtime_adj(X509_getm_notAfter(cert), from + static_cast<long>(o.days) * 86400);
  X509_NAME* name = X509_get_subject_name(cert);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                                 -1, -1, 0) != 1) {
    return Failed("certificate subject");
  }
  return absl::OkStatus();
}

// A certificate for `key`'s public half named `common_name`, signed by (issuer, issuer_key); a CA
// when issuer is null (self-signed).
absl::StatusOr<Cert> MakeCert(const std::string& common_name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                              const CertsOptions& o) {
  Cert cert(X509_new());
  if (!cert) return Failed("X509_new");
  SKETCHPS_RETURN_IF_ERROR(SetNameAndDates(cert.get(), common_name, o));
  X509_set_pubkey(cert.get(), key);
  const bool ca = issuer == nullptr;
  X509_set_issuer_name(cert.get(), ca ? X509_get_subject_name(cert.get()) : X509_get_subject_name(issuer));
  X509* signer = ca ? cert.get() : issuer;
  SKETCHPS_RETURN_IF_ERROR(
      AddExtension(cert.get(), signer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE"));
  SKETCHPS_RETURN_IF_ERROR(
      AddExtension(cert.get(), signer, NID_key_usage,
                   ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature,keyAgreement"));
  SKETCHPS_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash"));
  if (!ca) {
    SKETCHPS_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid:always"));
    SKETCHPS_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
    SKETCHPS_RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_alt_name, "DNS:" + common_name));
  }
  if (X509_sign(cert.get(), ca ? key : issuer_key, EVP_sha256()) == 0) return Failed("signing the certificate");
  return cert;
}

absl::StatusOr<File> Open(const fs::path& path, const char* mode) {
  File f(std::fopen(path.c_str(), mode));
  if (!f) return absl::UnavailableError(absl::StrCat(path.string(), ": cannot open for writing"));
  return f;
}

// A private key file: created 0600 (and narrowed to 0600 if it existed), never readable by others
// even for a moment.
absl::StatusOr<File> OpenPrivate(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::fchmod(fd, 0600) != 0) {
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(absl::StrCat(path.string(), ": cannot open for writing"));
  }
  File f(::fdopen(fd, "w"));
  if (!f) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat(path.string(), ": cannot open for writing"));
  }
  return f;
}

// Closes `f`, written to `path`: what stayed in its buffer reaches the file, or the error names it
// (a full disk shows here, not in the PEM writers).
absl::Status Close(File f, const fs::path& path) {
  if (std::fclose(f.release()) == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(path.string(), ": write failed: ", std::strerror(errno)));
}

absl::Status WritePair(const fs::path& dir, const std::string& name, X509* cert, EVP_PKEY* key) {
  const fs::path key_path = dir / (name + ".key"), pem = dir / (name + ".pem");
  {
    SKETCHPS_ASSIGN_OR_RETURN(File f, OpenPrivate(key_path));
    if (PEM_write_PrivateKey(f.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
      return Failed(key_path.string());
    SKETCHPS_RETURN_IF_ERROR(Close(std::move(f), key_path));
  }
  SKETCHPS_ASSIGN_OR_RETURN(File f, Open(pem, "w"));
  if (PEM_write_X509(f.get(), cert) != 1) return Failed(pem.string());
  return Close(std::move(f), pem);
}

struct Ca {
  Cert cert;
  Key key;
};

absl::StatusOr<Ca> LoadOrMakeCa(const fs::path& dir, const CertsOptions& o) {
  const fs::path pem = dir / "ca.pem", key_path = dir / "ca.key";
  if (!o.new_ca && fs::exists(pem) && fs::exists(key_path)) {
    File fc(std::fopen(pem.c_str(), "r")), fk(std::fopen(key_path.c_str(), "r"));
    if (!fc || !fk) return absl::UnavailableError(absl::StrCat(dir.string(), ": cannot read ca.pem / ca.key"));
    Ca ca{Cert(PEM_read_X509(fc.get(), nullptr, nullptr, nullptr)),
          Key(PEM_read_PrivateKey(fk.get(), nullptr, nullptr, nullptr))};
    if (!ca.cert || !ca.key) return Failed(absl::StrCat(dir.string(), ": ca.pem / ca.key do not parse"));
    if (X509_check_private_key(ca.cert.get(), ca.key.get()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(dir.string(), ": ca.key is not the key of ca.pem"));
    }
    return ca;
  }
  SKETCHPS_ASSIGN_OR_RETURN(Key key, NewKey());
  SKETCHPS_ASSIGN_OR_RETURN(Cert cert, MakeCert("sketchps CA", key.get(), nullptr, nullptr, o));
  SKETCHPS_RETURN_IF_ERROR(WritePair(dir, "ca", cert.get(), key.get()));
  return Ca{std::move(cert), std::move(key)};
}

}  // namespace

absl::Status MakeCerts(const CertsOptions& o) {
  if (o.out.empty()) return absl::InvalidArgumentError("--out: the folder for the certificates is missing");
  if (o.workers == 0 && o.servers == 0) return absl::InvalidArgumentError("--workers / --servers: nothing to make");
  if (o.days < 1 || o.days > 36500) return absl::InvalidArgumentError("--days: must be in [1, 36500]");
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--out ", o.out, ": ", ec.message()));
  SKETCHPS_ASSIGN_OR_RETURN(Ca ca, LoadOrMakeCa(o.out, o));
  auto make = [&](const std::string& name) -> absl::Status {
    SKETCHPS_ASSIGN_OR_RETURN(Key key, NewKey());
    SKETCHPS_ASSIGN_OR_RETURN(Cert cert, MakeCert(name, key.get(), ca.cert.get(), ca.key.get(), o));
    return WritePair(o.out, name, cert.get(), key.get());
  };
  for (std::uint32_t r = 0; r < o.workers; ++r) SKETCHPS_RETURN_IF_ERROR(make(absl::StrCat("worker-", r)));
  for (std::uint32_t s = 0; s < o.servers; ++s) SKETCHPS_RETURN_IF_ERROR(make(absl::StrCat("server-", s)));
  return absl::OkStatus();
}

}  // namespace sketchps::tools
