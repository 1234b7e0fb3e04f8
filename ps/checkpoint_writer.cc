#include "ps/checkpoint_writer.h"

#include <utility>

#include "absl/time/clock.h"
#include "ps/checkpoint.h"

namespace sketchps::ps {

CheckpointWriter::CheckpointWriter(std::string dir, Done done, std::shared_ptr<const FileKey> key)
    : dir_(std::move(dir)), done_(std::move(done)), key_(std::move(key)), thread_([this] { Loop(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void CheckpointWriter::Submit(v1::ShardCheckpoint checkpoint) {
  absl::MutexLock lock(&mu_);
  pending_ = std::move(checkpoint);
}

absl::Status CheckpointWriter::Flush() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !pending_ && !writing_; };
  mu_.Await(absl::Condition(&idle));
  return last_;
}

void CheckpointWriter::Loop() {
  for (;;) {
    v1::ShardCheckpoint checkpoint;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || pending_.has_value(); };
      mu_.Await(absl::Condition(&ready));
      if (!pending_) return;  // stopping, nothing left to write
      checkpoint = *std::move(pending_);
      pending_.reset();
      writing_ = true;
    }
    const absl::Time start = absl::Now();
    const absl::Status status = WriteCheckpoint(dir_, checkpoint, /*keep=*/3, key_.get());
    if (done_) done_(checkpoint, status, absl::ToDoubleSeconds(absl::Now() - start));
    absl::MutexLock lock(&mu_);
    writing_ = false;
    last_ = status;
  }
}

}  // namespace sketchps::ps
