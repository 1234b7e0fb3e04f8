#include "tools/worker_watch.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sketchps::tools {
namespace fs = std::filesystem;
namespace {

// The rank of "worker-<rank>.status", or nullopt for another file name.
std::optional<unsigned> StatusRank(const fs::path& file) {
  const std::string name = file.filename().string();
  constexpr std::string_view kPrefix = "worker-", kSuffix = ".status";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return std::nullopt;
  }
  unsigned rank = 0;
  if (!absl::SimpleAtoi(name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()), &rank)) {
    return std::nullopt;
  }
  return rank;
}

// key -> value of the file's complete lines (a later line of a key replaces an earlier one).
std::map<std::string, std::string> ReadStatus(const fs::path& file) {
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::string> out;
  const std::size_t complete = text.rfind('\n');
  if (complete == std::string::npos) return out;
  std::istringstream lines(text.substr(0, complete));
  for (std::string line; std::getline(lines, line);) {
    const std::size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

std::string ThisHost() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string();
}

bool ProcessGone(int pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

void WorkerWatch::Clear() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out_, ec)) {
    if (StatusRank(entry.path())) fs::remove(entry.path(), ec);
  }
}

std::optional<std::string> WorkerWatch::Lost() const {
  const std::string host = ThisHost();
  std::map<unsigned, std::string> lost;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out_, ec)) {
    const auto rank = StatusRank(entry.path());
    if (!rank) continue;
    const auto status = ReadStatus(entry.path());
    int pid = 0;
    const auto p = status.find("pid"), h = status.find("host");
    if (p == status.end() || !absl::SimpleAtoi(p->second, &pid) || h == status.end() || h->second != host) continue;
    if (status.contains("left") || !ProcessGone(pid)) continue;
    const auto failed = status.find("failed");
    lost[*rank] = absl::StrCat("rank ", *rank, " (pid ", pid, ") ",
                               failed != status.end()
                                   ? absl::StrCat("failed: ", failed->second)
                                   : std::string("is gone without leaving the job (killed, e.g. by a signal or "
                                                 "the out-of-memory killer, before finish())"));
  }
  if (lost.empty()) return std::nullopt;
  std::vector<std::string> parts;
  for (auto& [rank, text] : lost) parts.push_back(std::move(text));
  return absl::StrJoin(parts, "; ");
}

}  // namespace sketchps::tools
