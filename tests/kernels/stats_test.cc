#include "kernels/stats.h"

#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "bench/synthetic/distributions.h"
#include "support/reference.h"

namespace sk = sketchps::kernels;
using sketchps::SampleMoments;
using sketchps::synthetic::Shape;
using sketchps::synthetic::SignedSamples;

namespace {

// The naive definition: a sequential double loop over the entries with !(|x| <= eta).
SampleMoments NaiveExceedance(const std::vector<float>& x, float eta, bool with_log) {
  SampleMoments m;
  const double shift = eta > 0.0f ? eta : 0.0;
  for (float v : x) {
    if (std::fabs(v) <= eta) continue;
    const double z = static_cast<double>(std::fabs(v)) - shift;
    ++m.count;
    m.sum += z;
    m.sum_sq += z * z;
    m.sum_log += with_log ? std::log(z) : 0.0;
    m.min = std::min(m.min, z);
    m.max = std::max(m.max, z);
  }
  if (!with_log) m.sum_log = std::numeric_limits<double>::quiet_NaN();
  return m;
}

SampleMoments RunExceedance(const std::vector<float>& x, float eta, sk::MomentSet moments) {
  sk::Scratch scratch;
  sk::DeviceArray<float> d_x(x);
  auto m = sk::ExceedanceStats(d_x.data(), x.size(), eta, moments, sk::Exec{nullptr, &scratch});
  REQUIRE(m.ok());
  return *m;
}

}  // namespace

TEST_CASE("ExceedanceStats equals a naive double loop", "[stats]") {
  const auto shape = GENERATE(Shape::kLaplace, Shape::kStudentT3);
  const std::size_t n = GENERATE(1, 1000, 300001);
  const float eta = GENERATE(-1.0f, 0.0f, 0.5f, 3.0f);
  auto x = SignedSamples(shape, n, 7);
  for (std::size_t i = 0; i < x.size(); i += 11) x[i] = 0.0f;  // exact zeros: excluded at eta = 0
  const bool with_log = eta >= 0.0f;                           // at eta = -1 zeros are included and ln 0 = -inf
  const auto got = RunExceedance(x, eta, sk::MomentSet{true, with_log, true});
  const auto want = NaiveExceedance(x, eta, with_log);
  CAPTURE(sketchps::synthetic::ShapeName(shape), n, eta);
  REQUIRE(got.count == want.count);
  if (want.count == 0) {
    CHECK(got.min == std::numeric_limits<double>::infinity());
    CHECK(got.max == -std::numeric_limits<double>::infinity());
    return;
  }
  CHECK(got.sum == Approx(want.sum).epsilon(1e-12));
  CHECK(got.sum_sq == Approx(want.sum_sq).epsilon(1e-12));
  if (with_log) {
    CHECK(got.sum_log == Approx(want.sum_log).epsilon(1e-12));
  } else {
    CHECK(std::isnan(got.sum_log));
  }
  CHECK(got.min == want.min);
  CHECK(got.max == want.max);
}

TEST_CASE("ExceedanceStats computes exactly the moments asked for", "[stats]") {
  const auto x = SignedSamples(Shape::kLaplace, 20001, 13);
  const float eta = GENERATE(0.0f, 1.5f);
  const auto full = RunExceedance(x, eta, sk::MomentSet{true, true, true});
  for (int flags = 0; flags < 8; ++flags) {
    const sk::MomentSet set{(flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0};
    const auto m = RunExceedance(x, eta, set);
    CAPTURE(eta, flags);
    CHECK(m.count == full.count);
    CHECK(m.sum == Approx(full.sum).epsilon(1e-12));
    CHECK((set.sum_sq ? m.sum_sq == Approx(full.sum_sq).epsilon(1e-12) : std::isnan(m.sum_sq)));
    CHECK((set.sum_log ? m.sum_log == Approx(full.sum_log).epsilon(1e-12) : std::isnan(m.sum_log)));
    CHECK((set.min_max ? m.min == full.min && m.max == full.max : std::isnan(m.min) && std::isnan(m.max)));
  }
}

TEST_CASE("ExceedanceStats counts like CountAbove and keeps z positive", "[stats]") {
  const auto x = sketchps::testing::TiedGaussian(50000, 3);  // many ties at the threshold
  const float eta = 1.0f;
  const auto m = RunExceedance(x, eta, sk::MomentSet{true, true, true});
  CHECK(m.count == sketchps::synthetic::NaiveCountAbove(x, eta));
  CHECK(m.min > 0.0);
  CHECK(std::isfinite(m.sum_log));
}

TEST_CASE("ExceedanceStats lets NaN poison the sums and validates its arguments", "[stats]") {
  sk::Scratch scratch;
  sk::Exec exec{nullptr, &scratch};
  std::vector<float> x = {1.0f, -2.0f, std::numeric_limits<float>::quiet_NaN(), 0.5f};
  sk::DeviceArray<float> d_x(x);
  auto m = sk::ExceedanceStats(d_x.data(), x.size(), 0.0f, sk::MomentSet{}, exec);
  REQUIRE(m.ok());
  CHECK(std::isnan(m->sum));
  CHECK(sk::ExceedanceStats(nullptr, 4, 0.0f, sk::MomentSet{}, exec).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(sk::ExceedanceStats(d_x.data(), 4, 0.0f, sk::MomentSet{}, sk::Exec{}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  auto empty = sk::ExceedanceStats(nullptr, 0, 0.0f, sk::MomentSet{}, exec);
  REQUIRE(empty.ok());
  CHECK(empty->count == 0);
}

TEST_CASE("SegmentMeanStd equals per-segment naive loops", "[stats]") {
  sk::Scratch scratch;
  const auto x = SignedSamples(Shape::kGaussian, 100000, 11);
  std::vector<float> scaled = x;
  const std::vector<sk::Segment> segments = {{0, 1}, {1, 999}, {1000, 0}, {1000, 60000}, {61000, 39000}, {500, 1000}};
  const std::vector<float> scales = {1.0f, 0.001f, 5.0f, 1e-6f, 3.0f, 1.0f};
  for (std::size_t l = 0; l + 1 < segments.size(); ++l)
    for (std::size_t i = 0; i < segments[l].size; ++i)
      scaled[segments[l].offset + i] = x[segments[l].offset + i] * scales[l] + 0.1f * scales[l];
  sk::DeviceArray<float> d_x(scaled);
  auto got = sk::SegmentMeanStd(d_x.data(), scaled.size(), segments, sk::Exec{nullptr, &scratch});
  REQUIRE(got.ok());
  REQUIRE(got->size() == segments.size());
  for (std::size_t l = 0; l < segments.size(); ++l) {
    CAPTURE(l);
    double sum = 0.0, sq = 0.0;
    const double cnt = static_cast<double>(segments[l].size);
    for (std::size_t i = 0; i < segments[l].size; ++i) sum += scaled[segments[l].offset + i];
    const double mean = cnt > 0 ? sum / cnt : 0.0;
    for (std::size_t i = 0; i < segments[l].size; ++i) sq += std::pow(scaled[segments[l].offset + i] - mean, 2);
    const double sd = cnt > 0 ? std::sqrt(sq / cnt) : 0.0;
    CHECK((*got)[l].mean == Approx(mean).epsilon(1e-9).margin(1e-300));
    CHECK((*got)[l].stddev == Approx(sd).epsilon(1e-9).margin(1e-300));
  }
}

TEST_CASE("SegmentMeanStd rejects segments outside the input", "[stats]") {
  sk::Scratch scratch;
  sk::DeviceArray<float> d_x(std::vector<float>(10, 1.0f));
  auto bad = sk::SegmentMeanStd(d_x.data(), 10, {{0, 5}, {8, 3}}, sk::Exec{nullptr, &scratch});
  REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(bad.status().message()).find("segments[1]") != std::string::npos);
  auto huge = sk::SegmentMeanStd(d_x.data(), 10, {{11, 0}}, sk::Exec{nullptr, &scratch});
  CHECK(huge.status().code() == absl::StatusCode::kInvalidArgument);
  auto ok = sk::SegmentMeanStd(d_x.data(), 10, {{10, 0}, {0, 10}}, sk::Exec{nullptr, &scratch});
  REQUIRE(ok.ok());
  CHECK((*ok)[1].mean == 1.0);
  CHECK((*ok)[1].stddev == 0.0);
}
