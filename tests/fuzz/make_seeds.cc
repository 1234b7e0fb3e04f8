// Writes the fuzz harnesses' seed corpora (tests/fuzz/corpus/<harness>/) with the real encoders, so
// the seeds reach deep into each decoder. Files named ok-* must be accepted by their harness and
// bad-* refused (the replay tests check both); regenerate after a format change:
//
//   build/ci/tests/fuzz/sketchps_fuzz_seeds tests/fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/wire/gradient_dump.h"
#include "engine/phase_proto.h"
#include "fuzz/host_driver.h"
#include "peer/partial.h"
#include "peer/partial_proto.h"
#include "peer/schedule.h"
#include "sketchps/v1/peer.pb.h"

namespace {

namespace fs = std::filesystem;
using namespace sketchps;

fs::path root;

void Write(const std::string& harness, const std::string& name, const std::string& bytes) {
  const fs::path dir = root / harness;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

void WriteMessage(const std::string& harness, const std::string& name, const google::protobuf::Message& m) {
  Write(harness, name, m.SerializeAsString());
}

std::vector<float> Ramp(std::size_t n, float scale = 0.5f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>(i % 7) - 3.0f);
  return v;
}

v1::PushPullRequest Push(const PhaseSpec& spec, const PayloadValue& value, std::uint32_t phase = 0,
                         ValueEncoding values = ValueEncoding::kF32) {
  v1::PushPullRequest r;
  auto* h = r.mutable_payload()->mutable_header();
  h->set_job_id(fuzz::kJobId);
  h->set_worker_id(0);
  h->set_shard_id(0);
  h->set_round(0);
  h->set_phase(phase);
  *r.mutable_spec() = SpecToProto(spec);
  if (!EncodeBody(value, r.mutable_payload(), values).ok()) fuzz::Fail("make_seeds", "a seed does not encode");
  return r;
}

PhaseSpec Spec(Reduction r, bool final_phase, std::uint64_t keep = 0) {
  PhaseSpec s{r};
  s.final_phase = final_phase;
  s.keep = keep;
  return s;
}

SparseVector Sparse(std::uint64_t dim) { return SparseVector{dim, {1, 4, 9, 15}, {0.5f, -2.0f, 3.25f, 1.0f}}; }
SketchTable Sketch(std::uint64_t dim, bool half) {
  SketchTable t{3, 8, 42, dim, Ramp(24, half ? 0.5f : 0.3f)};
  return t;
}

void PayloadAndPushSeeds() {
  const std::uint64_t d = fuzz::kDim;
  const std::vector<std::pair<std::string, v1::PushPullRequest>> ok = {
      {"ok-dense-final", Push(Spec(Reduction::kDenseSum, true), DenseValues{Ramp(d)})},
      {"ok-sparse-final", Push(Spec(Reduction::kSparseSum, true), Sparse(d))},
      {"ok-sparse-keep", Push(Spec(Reduction::kSparseSum, true, 2), Sparse(d))},
      {"ok-sketch-f16", Push(Spec(Reduction::kSketchRecover, false, 4), Sketch(d, true))},
      {"ok-sketch-f32", Push(Spec(Reduction::kSketchRecover, true, 4), Sketch(d, false))},
      {"ok-leader-set", Push(Spec(Reduction::kLeaderIndexSet, false), IndexSet{d, {0, 3, 7}})},
      // scheme.values: bf16 (the ramp and the sparse values are exact in bfloat16)
      {"ok-dense-bf16", Push(Spec(Reduction::kDenseSum, true), DenseValues{Ramp(d)}, 0, ValueEncoding::kBF16)},
      {"ok-sparse-bf16", Push(Spec(Reduction::kSparseSum, true), Sparse(d), 0, ValueEncoding::kBF16)},
  };
  for (const auto& [name, r] : ok) {
    WriteMessage("payload", name, r);
    WriteMessage("push", name, r);
  }
  v1::PushPullRequest forged = ok[0].second;
  forged.mutable_payload()->mutable_header()->set_worker_id(1);  // worker 0's certificate claiming rank 1
  WriteMessage("push", "bad-forged-rank", forged);
  v1::PushPullRequest ahead = ok[0].second;
  ahead.mutable_payload()->mutable_header()->set_round(7);
  WriteMessage("push", "bad-round-ahead", ahead);
  WriteMessage("push", "bad-short-dense", Push(Spec(Reduction::kDenseSum, true), DenseValues{Ramp(d - 1)}));
  v1::PushPullRequest bomb = ok[1].second;
  bomb.mutable_payload()->mutable_sparse()->set_count(0x80000000u);
  WriteMessage("payload", "bad-size-bomb", bomb);
  WriteMessage("push", "bad-size-bomb", bomb);
  v1::PushPullRequest decreasing = Push(Spec(Reduction::kSparseSum, true), Sparse(d));
  decreasing.mutable_payload()->mutable_sparse()->set_index_encoding(v1::INDEX_RAW_U32);
  std::string raw(16, '\0');
  for (int i = 0; i < 4; ++i) raw[4 * i] = static_cast<char>(9 - 2 * i);  // 9, 7, 5, 3
  decreasing.mutable_payload()->mutable_sparse()->set_indices(raw);
  WriteMessage("payload", "bad-decreasing-indices", decreasing);
  v1::PushPullRequest nan = Push(Spec(Reduction::kDenseSum, true), DenseValues{Ramp(d)});
  std::string values = nan.payload().dense().values();
  values.replace(4, 4, std::string("\x00\x00\xc0\x7f", 4));
  nan.mutable_payload()->mutable_dense()->set_values(values);
  WriteMessage("payload", "bad-nan", nan);
  v1::PushPullRequest odd = Push(Spec(Reduction::kDenseSum, true), DenseValues{Ramp(d)}, 0, ValueEncoding::kBF16);
  odd.mutable_payload()->mutable_dense()->mutable_values()->pop_back();  // 2 * count - 1 bytes
  WriteMessage("payload", "bad-bf16-odd-bytes", odd);
  WriteMessage("push", "bad-nan", nan);
}

void JoinSeeds() {
  WriteMessage("join", "ok-fresh", fuzz::FreshJoin(0));
  v1::JoinRequest other = fuzz::FreshJoin(0);
  (*other.mutable_fingerprint())["scheme"] ^= 1;  // another job file
  WriteMessage("join", "bad-fingerprint", other);
  v1::JoinRequest layers = fuzz::FreshJoin(0);
  layers.mutable_layers(0)->set_numel(11);
  WriteMessage("join", "bad-layers", layers);
  v1::JoinRequest forged = fuzz::FreshJoin(1);  // pushed with worker 0's identity
  WriteMessage("join", "bad-forged-rank", forged);
}

// Checkpoints and replicas as a real shard writes them: two dense rounds, then a checkpoint.
void CheckpointSeeds() {
  const fs::path dir = fs::temp_directory_path() / "sketchps-fuzz-seeds";
  fs::remove_all(dir);
  {
    auto host = fuzz::OpenFuzzHost(dir.string());
    auto a = fuzz::JoinLater(*host, fuzz::FreshJoin(0), fuzz::WorkerIdentity(0));
    auto b = fuzz::JoinLater(*host, fuzz::FreshJoin(1), fuzz::WorkerIdentity(1));
    fuzz::Require(a.Ready(std::chrono::seconds(5)) && b.Ready(std::chrono::seconds(5)), "make_seeds", "joins");
    for (std::uint64_t round = 0; round < 2; ++round) {
      auto push = Push(Spec(Reduction::kDenseSum, true), DenseValues{Ramp(fuzz::kDim)});
      push.mutable_payload()->mutable_header()->set_round(round);
      auto first = fuzz::PushLater(*host, push, fuzz::WorkerIdentity(0));
      push.mutable_payload()->mutable_header()->set_worker_id(1);
      auto second = fuzz::PushLater(*host, push, fuzz::WorkerIdentity(1));
      fuzz::Require(first.Ready(std::chrono::seconds(5)) && second.Ready(std::chrono::seconds(5)), "make_seeds",
                    "round");
    }
    fuzz::Require(host->CheckpointNow().ok(), "make_seeds", "checkpoint");
  }
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Write("checkpoint", "ok-file-after-2-rounds", "F" + bytes);
    Write("checkpoint", "ok-payload-after-2-rounds", "P" + bytes.substr(20));  // framed by the harness
    std::string flipped = bytes;
    flipped[flipped.size() / 2] ^= 0x10;
    Write("checkpoint", "bad-file-crc", "F" + flipped);
    Write("checkpoint", "bad-file-truncated", "F" + bytes.substr(0, bytes.size() - 3));
  }
  fs::remove_all(dir);
}

void GradientDumpSeeds() {
  GradientDump dump;
  dump.job_id = fuzz::kJobId;
  dump.model = "fuzz";
  dump.worker_id = 1;
  dump.num_workers = 2;
  dump.round = 3;
  dump.layers = fuzz::FuzzLayers();
  dump.values = Ramp(fuzz::kDim);
  const fs::path file = fs::temp_directory_path() / "sketchps-fuzz-seed.skgd";
  if (!WriteGradientDump(file.string(), dump).ok()) fuzz::Fail("make_seeds", "gradient dump");
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(file);
  Write("gradient_dump", "ok-file-small", "F" + bytes);
  Write("gradient_dump", "ok-payload-small", "P" + bytes.substr(20));  // framed by the harness
  Write("gradient_dump", "bad-file-truncated", "F" + bytes.substr(0, bytes.size() - 5));
}

// Rank 1 of 4 hears at step 1 (the first doubling step; 4 ranks need no fold) from
// StepOf(4, 1, 1).recv_from, whose state then covers only itself.
void LetterSeeds() {
  const auto from = peer::StepOf(4, 1, 1).recv_from;
  fuzz::Require(from.has_value() && peer::SentBlock(4, *from, 1).size() == 1, "make_seeds", "schedule");
  const std::uint32_t sender = *from;
  const auto letter = [&](const PhaseSpec& spec, std::uint32_t shard, const PayloadValue& value) {
    v1::ExchangeRequest r;
    auto* h = r.mutable_header();
    h->set_job_id("fuzz");
    h->set_epoch(1);
    h->set_worker_id(sender);
    h->set_shard_id(shard);
    h->set_round(5);
    r.set_step(1);
    *r.mutable_spec() = SpecToProto(spec);
    auto partial = peer::LeafPartial(peer::CollectiveFor(spec, false), Contribution{spec, value}, sender);
    fuzz::Require(partial.ok() && peer::EncodePartial(*partial, &r).ok(), "make_seeds", "letter");
    return r;
  };
  WriteMessage("letter", "ok-dense", letter(Spec(Reduction::kDenseSum, true), 0, DenseValues{Ramp(16)}));
  WriteMessage("letter", "ok-sketch", letter(Spec(Reduction::kSketchRecover, false, 4), 1, Sketch(24, true)));
  WriteMessage("letter", "ok-sparse-gather", letter(Spec(Reduction::kSparseSum, true), 0, Sparse(16)));
  WriteMessage("letter", "ok-sparse-keep", letter(Spec(Reduction::kSparseSum, true, 2), 1, Sparse(24)));
  v1::ExchangeRequest far = letter(Spec(Reduction::kDenseSum, true), 0, DenseValues{Ramp(16)});
  far.mutable_header()->set_round(9);
  WriteMessage("letter", "bad-far-future", far);
  v1::ExchangeRequest wrong_step = letter(Spec(Reduction::kDenseSum, true), 0, DenseValues{Ramp(16)});
  wrong_step.mutable_header()->set_worker_id((sender + 1) % 4 == 1 ? (sender + 2) % 4 : (sender + 1) % 4);
  WriteMessage("letter", "bad-wrong-sender", wrong_step);
  v1::ExchangeRequest abort;
  *abort.mutable_header() = far.header();
  abort.mutable_header()->set_round(5);
  abort.set_abort_code(14);
  abort.set_abort_message("rank 3 is gone");
  WriteMessage("letter", "abort-notice", abort);
}

void RegroupSeeds() {
  v1::RegroupResponse ok;
  ok.set_epoch(4);
  for (std::uint32_t m : {0u, 1u, 2u, 4u}) ok.add_members(m);
  ok.set_round(99);
  WriteMessage("regroup", "ok-answer", ok);
  v1::RegroupResponse out = ok;
  out.set_members(3, 7);
  WriteMessage("regroup", "bad-member-out-of-range", out);
  v1::RegroupResponse minority;
  minority.set_epoch(4);
  minority.add_members(2);
  minority.set_round(100);
  WriteMessage("regroup", "bad-minority", minority);
  v1::RegroupResponse stale = ok;
  stale.set_round(57);
  WriteMessage("regroup", "bad-round", stale);
}

void JobSpecSeeds() {
  const std::string yaml = DefaultJobSpecYaml();
  Write("job_spec", "ok-default", yaml);
  Write("job_spec", "ok-decentralized-topk", yaml + std::string(1, '\0') + "mode=decentralized\nscheme.name=topk\n");
  Write("job_spec", "ok-sidco", yaml + std::string(1, '\0') + "scheme.name=sidco\nworkers=8\nservers=3\n");
  Write("job_spec", "bad-unknown-key", yaml + "\nsurprise: 1\n");
  Write("job_spec", "bad-zero-workers", yaml + std::string(1, '\0') + "workers=0\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  root = argv[1];
  PayloadAndPushSeeds();
  JoinSeeds();
  CheckpointSeeds();
  GradientDumpSeeds();
  LetterSeeds();
  RegroupSeeds();
  JobSpecSeeds();
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
