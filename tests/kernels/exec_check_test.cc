// Every public kernel that takes an Exec refuses one without a scratch pool (Exec::scratch is
// "required", kernels/backend.h) with InvalidArgument "<kernel>: exec.scratch is null", and one with a
// stream other than the default (null) one with "<kernel>: exec.stream is not the default stream ...",
// before it queues any work: a caller's mistake is an error, never a null dereference or a race with
// copies and scratch reuse ordered by the default stream. Valid device arrays are passed, so the Exec
// is the only thing wrong in every call.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/count_sketch_hash.h"
#include "kernels/backend.h"
#include "kernels/bandwidth.h"
#include "kernels/count_sketch.h"
#include "kernels/dgc.h"
#include "kernels/index_ops.h"
#include "kernels/optimizer.h"
#include "kernels/sdagc.h"
#include "kernels/select.h"
#include "kernels/sidco.h"
#include "kernels/sparse.h"
#include "kernels/stats.h"
#include "kernels/vector_ops.h"

namespace sk = sketchps::kernels;

namespace {

constexpr std::size_t kN = 64;

// Device arrays of kN entries that every call below may read or write.
struct Arrays {
  sk::DeviceArray<float> x{std::vector<float>(kN, 1.5f)};
  sk::DeviceArray<float> y{std::vector<float>(kN, 0.5f)};
  sk::DeviceArray<float> m{std::vector<float>(kN, 0.0f)};
  sk::DeviceArray<float> v{std::vector<float>(kN, 0.0f)};
  sk::DeviceArray<float> out_val{std::vector<float>(kN, 0.0f)};
  sk::DeviceArray<std::uint32_t> idx{std::vector<std::uint32_t>(kN, 3u)};
  sk::DeviceArray<std::uint32_t> out_idx{std::vector<std::uint32_t>(kN, 0u)};
  sk::DeviceArray<std::uint8_t> keep{std::vector<std::uint8_t>(kN, 0u)};
};

// The status of a call that returns a value or only a status.
template <class T>
absl::Status StatusOf(const absl::StatusOr<T>& r) {
  return r.status();
}
absl::Status StatusOf(const absl::Status& s) { return s; }

// What every kernel's refusal of the Exec under test starts with after "<kernel>: ".
std::string refusal;

void CheckRefused(const absl::Status& status, const std::string& kernel) {
  INFO(kernel << ": " << status.ToString());
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message().substr(0, kernel.size() + 2 + refusal.size()) == kernel + ": " + refusal);
}

// Calls every public kernel with `none`, the Exec to be refused, and checks each refusal.
void CheckEveryKernelRefuses(const sk::Exec& none) {
  Arrays a;
  const std::vector<float> host_x(kN, 1.5f);
  CheckRefused(StatusOf(sk::Checksum(a.x.data(), kN, none)), "Checksum");
  CheckRefused(StatusOf(sk::SumAbs(a.x.data(), kN, none)), "SumAbs");
  CheckRefused(StatusOf(sk::SumSquares(a.x.data(), kN, none)), "SumSquares");
  CheckRefused(StatusOf(sk::MeanStd(a.x.data(), kN, none)), "MeanStd");
  CheckRefused(StatusOf(sk::AllFinite(a.x.data(), kN, none)), "AllFinite");
  CheckRefused(sk::Axpy(2.0f, a.x.data(), a.y.data(), kN, none), "Axpy");
  CheckRefused(sk::Scale(2.0f, a.x.data(), kN, none), "Scale");
  CheckRefused(sk::Copy(a.x.data(), a.y.data(), kN, none), "Copy");
  CheckRefused(sk::Fill(1.0f, a.x.data(), kN, none), "Fill");
  CheckRefused(StatusOf(sk::BandwidthSum(a.x.data(), kN, none)), "BandwidthSum");
  CheckRefused(sk::OffsetIndices(a.idx.data(), kN, 1, none), "OffsetIndices");
  CheckRefused(sk::IndexSequence(a.idx.data(), kN, 0, none), "IndexSequence");

  CheckRefused(StatusOf(sk::TopK(a.x.data(), kN, 4, a.out_idx.data(), a.out_val.data(), none)), "TopK");
  CheckRefused(StatusOf(sk::CountAbove(a.x.data(), kN, 1.0f, none)), "CountAbove");
  CheckRefused(StatusOf(sk::ThresholdSelect(a.x.data(), kN, 1.0f, kN, a.out_idx.data(), a.out_val.data(), none)),
               "ThresholdSelect");
  CheckRefused(StatusOf(sk::SampledMagnitudeQuantile(a.x.data(), kN, 0.5, 0, 1, none)), "SampledMagnitudeQuantile");

  CheckRefused(sk::ScatterAdd(a.idx.data(), a.x.data(), kN, a.y.data(), kN, none), "ScatterAdd");
  CheckRefused(sk::Gather(a.x.data(), kN, a.idx.data(), kN, a.y.data(), none), "Gather");
  CheckRefused(sk::FillAt(a.x.data(), kN, a.idx.data(), kN, 0.0f, none), "FillAt");
  CheckRefused(sk::SortByIndex(a.idx.data(), a.x.data(), kN, none), "SortByIndex");
  CheckRefused(StatusOf(sk::MergeSparse(a.idx.data(), a.x.data(), 8, a.idx.data(), a.y.data(), 8, a.out_idx.data(),
                                        a.out_val.data(), none)),
               "MergeSparse");
  CheckRefused(StatusOf(sk::KeepTopK(a.idx.data(), a.x.data(), kN, 4, a.out_idx.data(), a.out_val.data(), none)),
               "KeepTopK");
  CheckRefused(StatusOf(sk::KeepTopKMask(a.x.data(), kN, 4, a.keep.data(), none)), "KeepTopKMask");

  CheckRefused(StatusOf(sk::ExceedanceStats(a.x.data(), kN, 0.0f, sk::MomentSet{}, none)), "ExceedanceStats");
  CheckRefused(StatusOf(sk::SegmentMeanStd(a.x.data(), kN, {sk::Segment{0, kN}}, none)), "SegmentMeanStd");
  CheckRefused(StatusOf(sk::SdagcThresholds(a.x.data(), kN, {sk::Segment{0, kN}}, 1.0, none)), "SdagcThresholds");
  CheckRefused(
      StatusOf(sk::DgcSelect(a.x.data(), kN, sk::DgcSelectOptions{}, 1, a.out_idx.data(), a.out_val.data(), kN, none)),
      "DgcSelect");
  auto sidco = sk::SidcoEstimator::Create(sk::SidcoOptions{});
  REQUIRE(sidco.ok());
  CheckRefused(StatusOf(sidco->Estimate(a.x.data(), kN, none)), "SidcoEstimator::Estimate");

  CheckRefused(sk::SgdDenseStep(a.x.data(), a.v.data(), a.y.data(), kN, sk::SgdStepParams{}, none), "SgdDenseStep");
  CheckRefused(sk::SgdSparseStep(a.x.data(), kN, a.idx.data(), a.y.data(), kN, 0.1f, none), "SgdSparseStep");
  CheckRefused(sk::AdamDenseStep(a.x.data(), a.m.data(), a.v.data(), a.y.data(), kN,
                                 sk::MakeAdamStep(0.001, 0.9, 0.999, 1e-8, 0.0, true, 1, true), none),
               "AdamDenseStep");

  auto hash = sketchps::CountSketchHash::Create({3, 16, 7, kN});
  REQUIRE(hash.ok());
  sk::DeviceArray<float> table(std::vector<float>(3 * 16, 0.0f));
  CheckRefused(sk::SketchAccumulate(a.x.data(), kN, *hash, table.data(), none), "SketchAccumulate");
  CheckRefused(sk::SketchAccumulateSparse(a.idx.data(), a.x.data(), kN, *hash, table.data(), none),
               "SketchAccumulateSparse");
  CheckRefused(sk::SketchMerge(table.data(), table.data(), 3 * 16, none), "SketchMerge");
  CheckRefused(sk::SketchEstimate(table.data(), *hash, a.idx.data(), kN, a.y.data(), none), "SketchEstimate");
  CheckRefused(sk::SketchEstimateAll(table.data(), *hash, kN, a.y.data(), none), "SketchEstimateAll");
  CheckRefused(StatusOf(sk::SketchRecover(table.data(), *hash, kN, 4, a.out_idx.data(), a.out_val.data(), none)),
               "SketchRecover");
  CheckRefused(StatusOf(sk::SketchL2Estimate(table.data(), 3, 16, none)), "SketchL2Estimate");
  CHECK(a.x.ToHost() == host_x);  // nothing was written
}

}  // namespace

TEST_CASE("Every kernel refuses an Exec without a scratch pool and names itself", "[exec_check]") {
  refusal = "exec.scratch is null";
  CheckEveryKernelRefuses(sk::Exec{});
}

TEST_CASE("Every kernel refuses a stream other than the default one and names itself", "[exec_check]") {
  sk::Scratch scratch;
  int stream_stand_in = 0;  // any non-null value: the check comes before the stream is used
  refusal = "exec.stream is not the default stream (null)";
  CheckEveryKernelRefuses(sk::Exec{&stream_stand_in, &scratch});
}
