// sketchps-sidco-table: how close each SIDCo variant and fixed stage count comes to its target
// density on synthetic gradients (Laplace, Gaussian, Student-t3; n = 200,000, seed 42), as
// achieved/target. This is the table behind the configurations that tests/kernels/sidco_test.cc
// pins ("Fixed-stage SIDCo configurations within 25% of the target"). SIDCo's cost against a
// memory-bandwidth pass is `sketchps bench --methods sidco_e,sidco_p,sidco_gp`.
//
//   build/ci/bench/sketchps-sidco-table [n] [seed]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/synthetic/distributions.h"
#include "kernels/select.h"
#include "kernels/sidco.h"

namespace sk = sketchps::kernels;
using sketchps::synthetic::Shape;

namespace {

// achieved / target of one fixed configuration on x; negative when the estimator fails.
double Ratio(const std::vector<float>& x, sk::SidcoVariant v, double density, int stages, sk::Scratch& scratch) {
  sk::SidcoOptions o;
  o.variant = v;
  o.density = density;
  o.stage_mode = sk::SidcoStageMode::kFixed;
  o.stages = stages;
  auto est = sk::SidcoEstimator::Create(o);
  if (!est.ok()) return -1;
  sk::Exec exec{nullptr, &scratch};
  sk::DeviceArray<float> d_x(x);
  auto e = est->Estimate(d_x.data(), x.size(), exec);
  if (!e.ok()) return -1;
  auto count = sk::CountAbove(d_x.data(), x.size(), e->threshold, exec);
  if (!count.ok()) return -1;
  return static_cast<double>(*count) / (density * static_cast<double>(x.size()));
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200000;
  const std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 42;
  if (n < 1000) {
    std::fprintf(stderr, "sketchps-sidco-table: n must be >= 1000 (got %s)\n", argc > 1 ? argv[1] : "");
    return 2;
  }
  std::printf("| data | density | variant | M=1 | M=2 | M=3 | M=4 |\n|---|---|---|---|---|---|---|\n");
  sk::Scratch scratch;
  for (Shape shape : {Shape::kLaplace, Shape::kGaussian, Shape::kStudentT3}) {
    const auto x = sketchps::synthetic::SignedSamples(shape, n, seed);
    for (double density : {0.01, 0.001}) {
      for (auto v : {sk::SidcoVariant::kExponential, sk::SidcoVariant::kGeneralizedPareto,
                     sk::SidcoVariant::kGammaGeneralizedPareto}) {
        std::printf("| %s | %g | %s |", sketchps::synthetic::ShapeName(shape), density, sk::SidcoVariantName(v));
        for (int m = 1; m <= 4; ++m) std::printf(" %.2f |", Ratio(x, v, density, m, scratch));
        std::printf("\n");
      }
    }
  }
  return 0;
}
