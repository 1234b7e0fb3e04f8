#include "worker/idx_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace sketchps::worker {

namespace {

// `name` + ".gz" when that exists or `name` does not (the error then names the .gz), else `name`.
std::string GzOrPlain(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::exists(name + ".gz", ec) || !std::filesystem::exists(name, ec)) return name + ".gz";
  return name;
}

}  // namespace

IdxPaths FashionMnistPaths(const std::string& dir, bool train) {
  const std::string prefix = (std::filesystem::path(dir) / (train ? "train" : "t10k")).string();
  return {GzOrPlain(prefix + "-images-idx3-ubyte"), GzOrPlain(prefix + "-labels-idx1-ubyte")};
}

absl::StatusOr<GzFile> OpenGz(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    return absl::NotFoundError(
        absl::StrCat(path, ": no such file", absl::EndsWith(path, ".gz") ? " (nor one without .gz)" : ""));
  }
  if (std::filesystem::is_directory(status)) return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory"));
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", errno != 0 ? std::strerror(errno) : "out of memory"));
  }
  gzbuffer(f, 1 << 17);
  return GzFile(f);
}

std::string GzMessage(gzFile f) {
  int code = Z_OK;
  const char* msg = gzerror(f, &code);
  return code == Z_OK || msg == nullptr ? std::string() : absl::StrCat(" (zlib: ", msg, ")");
}

// Appends up to n bytes to `out`, growing it only as data arrives (a corrupt header count cannot
// make us allocate more than the file holds). Returns the number of bytes read; fewer than n means
// the stream ended. DataLoss on a gzip error.
absl::StatusOr<std::uint64_t> ReadBytes(gzFile f, const std::string& path, std::uint64_t n,
                                        std::vector<std::uint8_t>& out) {
  std::uint64_t total = 0;
  while (total < n) {
    const auto chunk = static_cast<unsigned>(std::min<std::uint64_t>(n - total, 1u << 20));
    const std::size_t old = out.size();
    out.resize(old + chunk);
    const int got = gzread(f, out.data() + old, chunk);
    if (got < 0) return absl::DataLossError(absl::StrCat(path, ": corrupt gzip data", GzMessage(f)));
    out.resize(old + static_cast<std::size_t>(got));
    total += static_cast<std::uint64_t>(got);
    if (static_cast<unsigned>(got) < chunk) break;
  }
  return total;
}

namespace {

std::uint32_t BigEndian32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

}  // namespace

// Reads the header: the magic (checked against `magic`) and its dimensions.
absl::StatusOr<std::vector<std::uint32_t>> ReadHeader(gzFile f, const std::string& path, std::uint32_t magic) {
  std::vector<std::uint8_t> bytes;
  SKETCHPS_ASSIGN_OR_RETURN(auto got, ReadBytes(f, path, 4, bytes));
  if (got < 4)
    return absl::DataLossError(absl::StrCat(path, ": truncated: ", got, " bytes, no IDX header", GzMessage(f)));
  const std::uint32_t found = BigEndian32(bytes.data());
  if (found != magic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: bad magic 0x%08x, expected 0x%08x (IDX unsigned byte, %d dimension%s)", path, found, magic,
                        magic & 0xff, (magic & 0xff) == 1 ? "" : "s"));
  }
  const std::uint32_t ndims = magic & 0xff;
  bytes.clear();
  SKETCHPS_ASSIGN_OR_RETURN(got, ReadBytes(f, path, 4 * ndims, bytes));
  if (got < 4 * ndims) return absl::DataLossError(absl::StrCat(path, ": truncated IDX header", GzMessage(f)));
  std::vector<std::uint32_t> dims(ndims);
  for (std::uint32_t i = 0; i < ndims; ++i) dims[i] = BigEndian32(bytes.data() + 4 * i);
  if (dims[0] == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": item count is 0"));
  return dims;
}

namespace {

// The item count of an IDX file's header.
absl::StatusOr<std::uint64_t> ItemCount(const std::string& path, std::uint32_t magic) {
  SKETCHPS_ASSIGN_OR_RETURN(GzFile f, OpenGz(path));
  SKETCHPS_ASSIGN_OR_RETURN(auto dims, ReadHeader(f.get(), path, magic));
  return dims[0];
}

}  // namespace

absl::StatusOr<DatasetSizes> CheckFashionMnist(const JobSpec& job) {
  DatasetSizes sizes;
  for (const bool train : {true, false}) {
    const IdxPaths paths = FashionMnistPaths(job.data.path, train);
    auto images = ItemCount(paths.images, kImagesMagic);
    auto labels = images.ok() ? ItemCount(paths.labels, kLabelsMagic) : images;
    if (!labels.ok()) return Annotate(labels.status(), "data.path");
    if (*images != *labels) {
      return absl::InvalidArgumentError(absl::StrCat("data.path: ", paths.images, " holds ", *images, " images but ",
                                                     paths.labels, " ", *labels, " labels"));
    }
    if (train && job.data.train_samples > *images) {
      return absl::InvalidArgumentError(absl::StrCat("data.train_samples: ", job.data.train_samples, " > the ", *images,
                                                     " samples in ", paths.images));
    }
    (train ? sizes.train : sizes.test) = *images;
  }
  return sizes;
}

}  // namespace sketchps::worker
