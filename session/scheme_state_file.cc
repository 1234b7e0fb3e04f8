#include "session/scheme_state_file.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_write.h"
#include "common/status.h"
#include "common/wire/framed_file.h"
#include "kernels/backend.h"
#include "sketchps/v1/checkpoint.pb.h"
#include "spdlog/spdlog.h"

namespace sketchps::session {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 36;  // 64 GiB: far above any worker
constexpr int kKeepCheckpointRounds = 3;

std::string ToBytes(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

absl::StatusOr<std::vector<float>> ToFloats(const std::string& bytes, const std::string& what) {
  if (bytes.size() % sizeof(float) != 0) {
    return absl::DataLossError(absl::StrCat(what, ": ", bytes.size(), " bytes is not a whole number of f32 values"));
  }
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

absl::StatusOr<SchemeState> FromProto(const v1::ShardSchemeState& in, const std::string& file) {
  SchemeState state;
  for (const auto& [name, bytes] : in.arrays()) {
    SKETCHPS_ASSIGN_OR_RETURN(
        state.arrays[name], ToFloats(bytes, absl::StrCat(file, ": shards[", in.shard_id(), "].arrays['", name, "']")));
  }
  for (const auto& [name, value] : in.scalars()) state.scalars[name] = value;
  return state;
}

}  // namespace

std::string StateFileName(std::uint32_t rank, std::uint64_t rounds_applied) {
  return absl::StrFormat("worker-%u-state-%012u.bin", rank, rounds_applied);
}

std::vector<std::uint64_t> StateFileRounds(const std::string& dir, std::uint32_t rank) {
  std::vector<std::uint64_t> rounds;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::uint32_t r = 0;
    std::uint64_t round = 0;
    const std::string name = e.path().filename().string();
    if (std::sscanf(name.c_str(), "worker-%" SCNu32 "-state-%" SCNu64 ".bin", &r, &round) == 2 && r == rank &&
        name == StateFileName(r, round))
      rounds.push_back(round);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds;
}

absl::Status CheckStateFile(const std::string& path, const FileKey* key) {
  return ReadFramedFile(path, kSchemeStateMagic, kMaxPayloadBytes, key).status();
}

SchemeStateFiles::SchemeStateFiles(std::string dir, std::string job_id, std::uint32_t rank, std::uint64_t dim,
                                   std::uint64_t checkpoint_every, std::shared_ptr<const FileKey> key)
    : dir_(std::move(dir)),
      job_id_(std::move(job_id)),
      rank_(rank),
      dim_(dim),
      every_(checkpoint_every),
      key_(std::move(key)) {
  WaitForWritesOnTermination();
}

std::string SchemeStateFiles::FileName(std::uint64_t rounds_applied) const {
  return StateFileName(rank_, rounds_applied);
}

void SchemeStateFiles::SaveAsync(std::uint64_t rounds_applied, Replica& replica, const float* params) {
  (void)WaitSaved();  // one write at a time (the caller has normally waited already)
  // Only the copies happen here; the message is built, serialized and written on the writer's thread.
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->weights = kernels::CopyOut(params, dim_);
  for (std::uint32_t s = 0; s < replica.num_shards(); ++s) {
    snapshot->schemes.push_back(replica.scheme(s).SaveState());
    snapshot->scheme_names.push_back(replica.scheme(s).name());
    snapshot->optimizers.push_back(replica.optimizer(s).State());
    snapshot->carried.push_back(replica.scheme(s).CarriedGradient());
  }
  if (local_ != nullptr) snapshot->local = local_->SaveLocal();
  absl::MutexLock lock(&mu_);
  pending_ = std::async(std::launch::async, [this, snapshot, rounds_applied] {
               absl::Status written = Write(rounds_applied, *snapshot);
               Report(rounds_applied, written);
               return written;
             }).share();
}

void SchemeStateFiles::Report(std::uint64_t rounds_applied, const absl::Status& written) {
  if (written.ok()) {
    if (const std::uint64_t failed = failures_.exchange(0); failed > 0) {
      spdlog::info("worker {}: the state after {} rounds was saved again (after {} failed)", rank_, rounds_applied,
                   failed);
    }
    return;
  }
  // Said when it happens; while the disk stays full, every 100th failure again.
  if (failures_.fetch_add(1) % 100 == 0) {
    spdlog::error("worker {}: the state after {} rounds was not saved ({} failed in a row): {}", rank_, rounds_applied,
                  failures_.load(), std::string(written.message()));
  }
}

absl::Status SchemeStateFiles::Write(std::uint64_t rounds_applied, const Snapshot& snapshot) const {
  v1::WorkerSchemeState state;
  state.set_job_id(job_id_);
  state.set_worker_id(rank_);
  state.set_rounds_applied(rounds_applied);
  state.set_dim(dim_);
  state.set_weights(ToBytes(snapshot.weights));
  state.set_local_state(ToBytes(snapshot.local));
  for (std::size_t s = 0; s < snapshot.schemes.size(); ++s) {
    v1::ShardSchemeState& shard = *state.add_shards();
    shard.set_shard_id(static_cast<std::uint32_t>(s));
    shard.set_scheme(snapshot.scheme_names[s]);
    for (const auto& [name, values] : snapshot.schemes[s].arrays) (*shard.mutable_arrays())[name] = ToBytes(values);
    for (const auto& [name, value] : snapshot.schemes[s].scalars) (*shard.mutable_scalars())[name] = value;
    shard.set_optimizer_state(ToBytes(snapshot.optimizers[s]));
    shard.set_carried_gradient(ToBytes(snapshot.carried[s]));
  }
  std::string payload;
  if (!state.SerializeToString(&payload)) return absl::InternalError("worker scheme state does not serialize");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(dir_, ": cannot create the state directory: ", ec.message()));
  const std::string path = (fs::path(dir_) / FileName(rounds_applied)).string();
  SKETCHPS_RETURN_IF_ERROR(
      WriteFramedFile(path, kSchemeStateMagic, payload, Durability::kSurvivesProcessKill, key_.get()));
  RemoveSuperseded(rounds_applied);
  return absl::OkStatus();
}

absl::Status SchemeStateFiles::WaitSaved() {
  std::shared_future<absl::Status> pending;
  {
    absl::MutexLock lock(&mu_);
    pending = pending_;
  }
  return pending.valid() ? pending.get() : absl::OkStatus();
}

void SchemeStateFiles::RemoveSuperseded(std::uint64_t newest) const {
  std::vector<std::uint64_t> kept_checkpoints;
  for (const std::uint64_t round : StateFileRounds(dir_, rank_)) {
    if (round >= newest) continue;
    if (every_ > 0 && round % every_ == 0) {
      kept_checkpoints.push_back(round);
      continue;
    }
    std::error_code ec;
    fs::remove(fs::path(dir_) / FileName(round), ec);
  }
  // Keep the newest kKeepCheckpointRounds at checkpoint rounds (the newest file counts if it is one).
  const std::size_t keep = kKeepCheckpointRounds - ((every_ > 0 && newest % every_ == 0) ? 1 : 0);
  for (std::size_t i = 0; i + keep < kept_checkpoints.size(); ++i) {
    std::error_code ec;
    fs::remove(fs::path(dir_) / FileName(kept_checkpoints[i]), ec);
  }
}

void SchemeStateFiles::DiscardAfter(std::uint64_t rounds_applied) const {
  for (const std::uint64_t round : StateFileRounds(dir_, rank_)) {
    std::error_code ec;
    if (round > rounds_applied) fs::remove(fs::path(dir_) / FileName(round), ec);
  }
}

absl::StatusOr<StateRestore> SchemeStateFiles::Restore(std::uint64_t rounds_applied, Replica& replica, float* params,
                                                       bool from_file) const {
  const std::vector<std::uint64_t> rounds = StateFileRounds(dir_, rank_);
  const auto has = [&](std::uint64_t r) { return std::find(rounds.begin(), rounds.end(), r) != rounds.end(); };
  if (has(rounds_applied)) {
    SKETCHPS_RETURN_IF_ERROR(Load(rounds_applied, replica, params, /*with_params=*/from_file));
    return StateRestore{true, rounds_applied,
                        absl::StrCat("restored the scheme state of round ", rounds_applied, " from ",
                                     (fs::path(dir_) / FileName(rounds_applied)).string())};
  }
  if (rounds_applied > 0 && has(rounds_applied - 1)) {
    SKETCHPS_RETURN_IF_ERROR(Load(rounds_applied - 1, replica, params, /*with_params=*/true));
    return StateRestore{
        true, rounds_applied - 1,
        absl::StrCat("restored the state of round ", rounds_applied - 1, " from ",
                     (fs::path(dir_) / FileName(rounds_applied - 1)).string(), "; the servers applied round ",
                     rounds_applied - 1, " after it was saved, so this worker replays that round")};
  }
  if (rounds.empty()) return StateRestore{false, rounds_applied, absl::StrCat("no saved scheme state in ", dir_)};
  return StateRestore{false, rounds_applied,
                      absl::StrCat(dir_, " holds scheme state of rounds ", rounds.front(), "..", rounds.back(),
                                   ", none of round ", rounds_applied, " where the servers are or the one before")};
}

absl::Status SchemeStateFiles::RestoreSchemes(Replica& replica, const std::vector<SchemeState>& schemes,
                                              const std::vector<std::vector<float>>& carried, const std::string& path) {
  // A scheme checks its arrays' sizes as it restores: on a refusal, put back the shards already done.
  std::vector<SchemeState> before;
  std::vector<std::vector<float>> carried_before;
  for (std::uint32_t s = 0; s < replica.num_shards(); ++s) {
    before.push_back(replica.scheme(s).SaveState());
    carried_before.push_back(replica.scheme(s).CarriedGradient());
  }
  for (std::uint32_t s = 0; s < replica.num_shards(); ++s) {
    absl::Status st = replica.scheme(s).RestoreState(schemes[s]);
    if (st.ok()) st = replica.scheme(s).RestoreCarriedGradient(carried[s]);
    if (st.ok()) continue;
    for (std::uint32_t t = 0; t <= s; ++t) {
      (void)replica.scheme(t).RestoreState(before[t]);
      (void)replica.scheme(t).RestoreCarriedGradient(carried_before[t]);
    }
    return absl::FailedPreconditionError(absl::StrCat(path, ": shard ", s, ": ", st.message()));
  }
  return absl::OkStatus();
}

absl::Status SchemeStateFiles::Load(std::uint64_t round, Replica& replica, float* params, bool with_params) const {
  const std::string path = (fs::path(dir_) / FileName(round)).string();
  SKETCHPS_ASSIGN_OR_RETURN(const std::string payload,
                            ReadFramedFile(path, kSchemeStateMagic, kMaxPayloadBytes, key_.get()));
  v1::WorkerSchemeState state;
  if (!state.ParseFromString(payload)) return absl::DataLossError(absl::StrCat(path, ": payload does not parse"));
  const auto differs = [&](const char* field, const auto& have, const auto& want) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": ", field, " is ", have, ", this worker's is ", want, " (a file of another job?)"));
  };
  if (state.job_id() != job_id_) return differs("job_id", state.job_id(), job_id_);
  if (state.worker_id() != rank_) return differs("worker_id", state.worker_id(), rank_);
  if (state.rounds_applied() != round) return differs("rounds_applied", state.rounds_applied(), round);
  if (state.dim() != dim_) return differs("dim", state.dim(), dim_);
  if (state.weights().size() != dim_ * sizeof(float))
    return differs("the size of weights", state.weights().size(), dim_ * 4);
  if (static_cast<std::uint32_t>(state.shards_size()) != replica.num_shards()) {
    return differs("the number of shards", state.shards_size(), replica.num_shards());
  }
  std::vector<SchemeState> schemes;
  std::vector<std::vector<float>> optimizers, carried;
  for (std::uint32_t s = 0; s < replica.num_shards(); ++s) {
    const v1::ShardSchemeState& shard = state.shards(static_cast<int>(s));
    if (shard.shard_id() != s) return differs("shards[].shard_id", shard.shard_id(), s);
    if (shard.scheme() != replica.scheme(s).name())
      return differs("shards[].scheme", shard.scheme(), replica.scheme(s).name());
    SKETCHPS_ASSIGN_OR_RETURN(SchemeState one, FromProto(shard, path));
    schemes.push_back(std::move(one));
    SKETCHPS_ASSIGN_OR_RETURN(
        optimizers.emplace_back(),
        ToFloats(shard.optimizer_state(), absl::StrCat(path, ": shards[", s, "].optimizer_state")));
    if (optimizers.back().size() != replica.optimizer(s).state_size()) {
      return differs("the optimizer state's size", optimizers.back().size(), replica.optimizer(s).state_size());
    }
    SKETCHPS_ASSIGN_OR_RETURN(
        carried.emplace_back(),
        ToFloats(shard.carried_gradient(), absl::StrCat(path, ": shards[", s, "].carried_gradient")));
  }
  SKETCHPS_ASSIGN_OR_RETURN(const std::vector<float> local,
                            ToFloats(state.local_state(), absl::StrCat(path, ": local_state")));
  const std::uint64_t local_size = local_ != nullptr ? local_->local_size() : 0;
  if (local.size() != local_size) return differs("the size of local_state", local.size(), local_size);
  SKETCHPS_RETURN_IF_ERROR(RestoreSchemes(replica, schemes, carried, path));
  if (local_ != nullptr) SKETCHPS_RETURN_IF_ERROR(local_->RestoreLocal(local));  // the size is checked above
  if (!with_params) return absl::OkStatus();
  for (std::uint32_t s = 0; s < replica.num_shards(); ++s) {
    SKETCHPS_RETURN_IF_ERROR(replica.optimizer(s).SetState(optimizers[s]));  // sizes checked above
  }
  kernels::CopyToDevice(params, state.weights().data(), state.weights().size());
  return absl::OkStatus();
}

}  // namespace sketchps::session
