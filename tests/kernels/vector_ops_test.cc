#include "kernels/vector_ops.h"

#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "support/reference.h"
#include "support/sparse_reference.h"

namespace sk = sketchps::kernels;
using sketchps::testing::Gaussian;
using sketchps::testing::StudentT3;

namespace {

double NaiveSumAbs(const std::vector<float>& x) {
  double s = 0.0;
  for (float v : x) s += std::fabs(static_cast<double>(v));
  return s;
}

double NaiveSumSquares(const std::vector<float>& x) {
  double s = 0.0;
  for (float v : x) s += static_cast<double>(v) * static_cast<double>(v);
  return s;
}

// Two-pass mean and population standard deviation in long double.
std::pair<double, double> NaiveMeanStd(const std::vector<float>& x) {
  long double sum = 0.0L;
  for (float v : x) sum += v;
  const long double mean = sum / static_cast<long double>(x.size());
  long double ss = 0.0L;
  for (float v : x) ss += (v - mean) * (v - mean);
  return {static_cast<double>(mean), static_cast<double>(std::sqrt(ss / static_cast<long double>(x.size())))};
}

}  // namespace

TEST_CASE("Reductions equal naive double loops", "[vector_ops]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  const auto n = GENERATE(0, 1, 2, 1000, 1000003);
  const auto x = StudentT3(static_cast<std::size_t>(n), 11);
  sk::DeviceArray<float> d_x(x);
  const double tol = 1e-12 * std::max(1, n);

  auto sum_abs = sk::SumAbs(d_x.data(), x.size(), exec);
  REQUIRE(sum_abs.ok());
  // SumAbs sums in float inside 16384-entry chunks (vector lanes), in double across chunks.
  CHECK(*sum_abs == Approx(NaiveSumAbs(x)).epsilon(1e-5).margin(1e-300));
  auto sum_sq = sk::SumSquares(d_x.data(), x.size(), exec);
  REQUIRE(sum_sq.ok());
  CHECK(*sum_sq == Approx(NaiveSumSquares(x)).epsilon(tol).margin(1e-300));
  auto norm = sk::Norm2(d_x.data(), x.size(), exec);
  REQUIRE(norm.ok());
  CHECK(*norm == Approx(std::sqrt(NaiveSumSquares(x))).epsilon(tol).margin(1e-300));
  if (n > 0) {
    auto moments = sk::MeanStd(d_x.data(), x.size(), exec);
    REQUIRE(moments.ok());
    const auto [want_mean, want_std] = NaiveMeanStd(x);
    CHECK(moments->mean == Approx(want_mean).epsilon(1e-9).margin(1e-12));
    CHECK(moments->std == Approx(want_std).epsilon(1e-9).margin(1e-12));
  }
}

TEST_CASE("Reductions of a small known vector", "[vector_ops]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  sk::DeviceArray<float> d_x(std::vector<float>{3.0f, -4.0f});
  CHECK(*sk::SumAbs(d_x.data(), 2, exec) == 7.0);
  CHECK(*sk::SumSquares(d_x.data(), 2, exec) == 25.0);
  CHECK(*sk::Norm2(d_x.data(), 2, exec) == 5.0);
  const auto m = *sk::MeanStd(d_x.data(), 2, exec);
  CHECK(m.mean == -0.5);
  CHECK(m.std == 3.5);
}

TEST_CASE("MeanStd keeps its precision under a large common offset", "[vector_ops]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  auto x = Gaussian(1 << 20, 5, 0.01f);
  for (auto& v : x) v += 1000.0f;  // |mean| / std = 1e5: a plain Σx² - n·mean² loses everything
  sk::DeviceArray<float> d_x(x);
  const auto m = sk::MeanStd(d_x.data(), x.size(), exec);
  REQUIRE(m.ok());
  const auto [want_mean, want_std] = NaiveMeanStd(x);
  CHECK(m->mean == Approx(want_mean).epsilon(1e-12));
  CHECK(m->std == Approx(want_std).epsilon(1e-6));
}

TEST_CASE("MeanStd rejects an empty range", "[vector_ops]") {
  sk::Scratch scratch;
  float x = 0.0f;
  auto m = sk::MeanStd(&x, 0, sk::Exec{nullptr, &scratch});
  REQUIRE(m.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(m.status().message().find("n = 0") != std::string::npos);
}

TEST_CASE("AllFinite catches NaN and Inf at any position", "[vector_ops]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  const std::size_t n = GENERATE(1, 2, 17, 100003);
  const float bad = GENERATE(std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN());
  auto x = Gaussian(n, 3);
  sk::DeviceArray<float> d_x(x);
  REQUIRE(*sk::AllFinite(d_x.data(), n, exec));
  for (std::size_t pos : {std::size_t{0}, n / 2, n - 1}) {
    auto y = x;
    y[pos] = bad;
    sk::DeviceArray<float> d_y(y);
    CHECK_FALSE(*sk::AllFinite(d_y.data(), n, exec));
  }
  // The largest finite values and denormals are finite.
  x[0] = std::numeric_limits<float>::max();
  x[n - 1] = -std::numeric_limits<float>::denorm_min();
  sk::DeviceArray<float> d_z(x);
  CHECK(*sk::AllFinite(d_z.data(), n, exec));
  CHECK(*sk::AllFinite(nullptr, 0, exec));
}

TEST_CASE("Elementwise updates equal naive loops", "[vector_ops]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  const std::size_t n = GENERATE(0, 1, 1000, 100003);
  const auto x = Gaussian(n, 7);
  const auto y = Gaussian(n, 8);
  const float a = -0.37f;

  SECTION("Axpy") {
    sk::DeviceArray<float> d_x(x), d_y(y);
    REQUIRE(sk::Axpy(a, d_x.data(), d_y.data(), n, exec).ok());
    const auto got = d_y.ToHost();
    for (std::size_t i = 0; i < n; ++i) {
      const float want = y[i] + a * x[i];
      CHECK(got[i] == Approx(want).epsilon(1e-6).margin(1e-7));  // nvcc may fuse to an FMA
    }
  }
  SECTION("Scale") {
    sk::DeviceArray<float> d_x(x);
    REQUIRE(sk::Scale(a, d_x.data(), n, exec).ok());
    const auto got = d_x.ToHost();
    for (std::size_t i = 0; i < n; ++i) CHECK(got[i] == a * x[i]);
  }
  SECTION("Copy") {
    sk::DeviceArray<float> d_x(x), d_y(y);
    REQUIRE(sk::Copy(d_x.data(), d_y.data(), n, exec).ok());
    CHECK(d_y.ToHost() == x);
  }
  SECTION("Fill") {
    sk::DeviceArray<float> d_x(x);
    REQUIRE(sk::Fill(2.5f, d_x.data(), n, exec).ok());
    CHECK(d_x.ToHost() == std::vector<float>(n, 2.5f));
  }
}

TEST_CASE("Vector ops reject null pointers and a null scratch", "[vector_ops]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  sk::DeviceArray<float> y(std::vector<float>{0.0f});
  CHECK(sk::SumAbs(nullptr, 3, exec).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::AllFinite(nullptr, 3, exec).status().code() == absl::StatusCode::kInvalidArgument);
  const auto axpy = sk::Axpy(1.0f, nullptr, y.data(), 1, exec);
  CHECK(axpy.code() == absl::StatusCode::kInvalidArgument);
  CHECK(axpy.message().find("d_x") != std::string::npos);
  const auto copy = sk::Copy(y.data(), nullptr, 1, exec);
  CHECK(copy.message().find("d_dst") != std::string::npos);
  CHECK(sk::Fill(1.0f, y.data(), 1, sk::Exec{}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(y.ToHost()[0] == 0.0f);  // nothing written on error
}
