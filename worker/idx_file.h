// IDX files (the MNIST family's format) without libtorch: the gzip reader, the header, the paths of
// Fashion-MNIST, and a check of a job's data that reads only the headers, so `sketchps run` can
// refuse a job whose data is missing before any process starts (worker/fashion_mnist.h reads the
// payloads). Files are read through zlib's gz reader, so uncompressed IDX files are accepted too.
// Every failure is a Status naming the file, never a crash.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_spec.h"

namespace sketchps::worker {

inline constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
inline constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension

struct IdxPaths {
  std::string images;
  std::string labels;
};
// <dir>/train-{images-idx3,labels-idx1}-ubyte.gz, or t10k-... for the test split; each file without
// ".gz" when only the uncompressed one is there (docs/job-spec.md data.path: "optionally .gz"). When
// neither is, the .gz name (what a missing-file error names).
IdxPaths FashionMnistPaths(const std::string& dir, bool train);

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// NotFound (missing, unreadable), InvalidArgument (a directory).
absl::StatusOr<GzFile> OpenGz(const std::string& path);
// " (zlib: <message>)" after an error on `f`, else "".
std::string GzMessage(gzFile f);
// Appends up to n bytes to `out`, growing it only as data arrives (a corrupt header count cannot
// make us allocate more than the file holds). Returns the number of bytes read; fewer than n means
// the stream ended. DataLoss on a gzip error.
absl::StatusOr<std::uint64_t> ReadBytes(gzFile f, const std::string& path, std::uint64_t n,
                                        std::vector<std::uint8_t>& out);
// Reads the header: the magic (checked against `magic`) and its dimensions (the first, the item
// count, is never 0).
absl::StatusOr<std::vector<std::uint32_t>> ReadHeader(gzFile f, const std::string& path, std::uint32_t magic);

// The job's Fashion-MNIST files exist, their headers agree (as many images as labels) and the
// training split holds at least data.train_samples. Returns the samples of each split. Errors start
// with "data.path: " or "data.train_samples: " and name the file.
struct DatasetSizes {
  std::uint64_t train = 0, test = 0;
};
absl::StatusOr<DatasetSizes> CheckFashionMnist(const JobSpec& job);

}  // namespace sketchps::worker
