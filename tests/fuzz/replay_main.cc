// The replay driver of the fuzz harnesses when libFuzzer is not available (g++ builds, the test
// suite): runs every corpus file once, then a fixed number of deterministic mutations of them.
//
//   sketchps_fuzz_<name> [--mutations N] [--seed S] CORPUS_DIR_OR_FILE...
//
// Corpus files named ok-* must be accepted by the harness (it calls NoteAccepted) and bad-* must
// not, so a seed that silently stopped reaching the decoder fails the test. A broken invariant
// aborts (tests/fuzz/fuzz_target.h). Exit status: 0, or 2 for bad arguments, an empty corpus or a
// seed whose verdict is wrong.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/splitmix.h"
#include "fuzz/fuzz_target.h"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

struct Seed {
  std::string name;
  Bytes bytes;
};

std::vector<Seed> LoadCorpus(const std::vector<std::string>& roots) {
  std::vector<Seed> seeds;
  for (const auto& root : roots) {
    std::vector<fs::path> files;
    if (fs::is_directory(root)) {
      for (const auto& e : fs::directory_iterator(root)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else {
      files.push_back(root);
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      seeds.push_back(
          {f.filename().string(), Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())});
    }
  }
  return seeds;
}

int Run(const Bytes& b) {
  const int before = sketchps::fuzz::AcceptedCount();
  LLVMFuzzerTestOneInput(b.data(), b.size());
  return sketchps::fuzz::AcceptedCount() - before;
}

// One to four byte-level edits, or a splice with another seed.
Bytes Mutate(const std::vector<Seed>& seeds, sketchps::SplitMix64Rng& rng) {
  Bytes b = seeds[rng.Next() % seeds.size()].bytes;
  static constexpr std::uint8_t kInteresting[] = {0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x1A};
  const int edits = 1 + static_cast<int>(rng.Next() % 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t at = b.empty() ? 0 : rng.Next() % b.size();
    switch (rng.Next() % 6) {
      case 0:
        if (!b.empty()) b[at] ^= static_cast<std::uint8_t>(1u << (rng.Next() % 8));
        break;
      case 1:
        if (!b.empty()) b[at] = kInteresting[rng.Next() % sizeof(kInteresting)];
        break;
      case 2: b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::uint8_t>(rng.Next())); break;
      case 3:
        if (!b.empty())
          b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                  b.begin() + static_cast<std::ptrdiff_t>(std::min(b.size(), at + 1 + rng.Next() % 8)));
        break;
      case 4:
        if (!b.empty()) {  // duplicate a chunk in place
          const std::size_t len = std::min<std::size_t>(b.size() - at, 1 + rng.Next() % 16);
          const Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(at),
                            b.begin() + static_cast<std::ptrdiff_t>(at + len));
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
        }
        break;
      default: {  // splice: this prefix, another seed's suffix
        const Bytes& other = seeds[rng.Next() % seeds.size()].bytes;
        const std::size_t from = other.empty() ? 0 : rng.Next() % other.size();
        b.resize(at);
        b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
      }
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 0;
  std::uint64_t seed = 1;
  std::vector<std::string> roots;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::stol(argv[++i]);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::stoull(argv[++i]);
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "%s: unknown option %s (usage: --mutations N --seed S CORPUS...)\n", argv[0], arg.c_str());
      return 2;
    } else {
      roots.push_back(arg);
    }
  }
  const std::vector<Seed> seeds = LoadCorpus(roots);
  if (seeds.empty()) {
    std::fprintf(stderr, "%s: no corpus files (give a corpus directory)\n", argv[0]);
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  int wrong = 0;
  for (const Seed& s : seeds) {
    const bool accepted = Run(s.bytes) > 0;
    const bool want_ok = s.name.rfind("ok-", 0) == 0, want_bad = s.name.rfind("bad-", 0) == 0;
    if ((want_ok && !accepted) || (want_bad && accepted)) {
      std::fprintf(stderr, "%s: corpus file %s was %s\n", argv[0], s.name.c_str(), accepted ? "accepted" : "refused");
      ++wrong;
    }
  }
  sketchps::SplitMix64Rng rng(seed);
  long accepted_mutants = 0;
  for (long m = 0; m < mutations; ++m) accepted_mutants += Run(Mutate(seeds, rng)) > 0;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %zu corpus files, %ld mutations (%ld accepted) in %.1f s: no invariant broken%s\n", argv[0],
              seeds.size(), mutations, accepted_mutants, seconds, wrong ? "; corpus verdicts WRONG" : "");
  return wrong ? 2 : 0;
}
