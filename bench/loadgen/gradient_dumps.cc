#include "bench/loadgen/gradient_dumps.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/wire/gradient_dump.h"

namespace sketchps::bench {
namespace fs = std::filesystem;
namespace {

using DumpFile = std::tuple<std::uint64_t, std::uint32_t, fs::path>;  // round, worker, path

absl::StatusOr<std::vector<DumpFile>> ListDumps(const std::string& dir) {
  static const std::regex name_re("grad-r([0-9]+)-w([0-9]+)\\.skgd");
  std::vector<DumpFile> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    std::uint64_t round = 0;
    std::uint32_t worker = 0;
    if (!std::regex_match(name, m, name_re) || !absl::SimpleAtoi(m[1].str(), &round) ||
        !absl::SimpleAtoi(m[2].str(), &worker)) {
      continue;
    }
    files.emplace_back(round, worker, entry.path());
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--gradients ", dir, ": ", ec.message()));
  if (files.empty()) return absl::InvalidArgumentError(absl::StrCat("--gradients ", dir, ": no grad-r*-w*.skgd files"));
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

absl::StatusOr<LoadedGradients> LoadGradientDumps(const std::string& dir) {
  SKETCHPS_ASSIGN_OR_RETURN(const std::vector<DumpFile> files, ListDumps(dir));
  LoadedGradients out;
  for (const auto& [round, worker, path] : files) {
    SKETCHPS_ASSIGN_OR_RETURN(GradientDump dump, ReadGradientDump(path.string()));
    if (out.gradients.empty()) {
      out.layers = dump.layers;
    } else if (dump.layers.dim() != out.layers.dim() || dump.layers.layers.size() != out.layers.layers.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--gradients: ", path.string(), " has another layer table than ",
                                                     std::get<2>(files.front()).string()));
    }
    out.gradients.push_back(std::move(dump.values));
    out.origin.emplace_back(round, worker);
  }
  return out;
}

std::size_t DumpIndex(std::uint64_t round, std::uint32_t rank, std::uint32_t workers, std::size_t dumps) {
  return static_cast<std::size_t>((round * workers + rank) % dumps);
}

}  // namespace sketchps::bench
