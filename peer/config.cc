#include "peer/config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/payload.h"

namespace sketchps::peer {

absl::Status ValidatePeerConfig(const PeerConfig& c) {
  if (c.num_workers == 0) return absl::InvalidArgumentError("peer.num_workers: must be >= 1");
  if (c.rank >= c.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("peer.rank: ", c.rank, " is not in [0, ", c.num_workers, ")"));
  }
  if (c.range_lengths.empty()) return absl::InvalidArgumentError("peer.range_lengths: no shards");
  for (std::size_t s = 0; s < c.range_lengths.size(); ++s) {
    if (c.range_lengths[s] == 0 || c.range_lengths[s] > kMaxPayloadDim) {
      return absl::InvalidArgumentError(
          absl::StrCat("peer.range_lengths[", s, "]: ", c.range_lengths[s], " is not in [1, 2^32)"));
    }
  }
  if (c.peer_timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("peer.peer_timeout: must be > 0");
  if (c.max_message_bytes < 0) return absl::InvalidArgumentError("peer.max_message_bytes: must be >= 0");
  if (!c.identities.empty() && c.identities.size() != c.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer.identities: ", c.identities.size(), " for ", c.num_workers, " workers"));
  }
  return absl::OkStatus();
}

std::string PeerConfig::ExpectedName(std::uint32_t rank) const {
  return tls.insecure ? std::string() : Identity{Identity::Role::kWorker, IdentityOf(rank)}.Name();
}

int PeerConfig::MessageLimit() const {
  if (max_message_bytes > 0) return max_message_bytes;
  std::uint64_t longest = 0;
  for (std::uint64_t n : range_lengths) longest = std::max(longest, n);
  const std::uint64_t bytes = (16 * std::uint64_t{num_workers} + 32) * longest + (64 << 10);
  return static_cast<int>(std::min<std::uint64_t>(bytes, std::uint64_t{2047} << 20));
}

}  // namespace sketchps::peer
