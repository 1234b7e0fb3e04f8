#include "kernels/index_ops.h"

#include <vector>

#include <catch2/catch.hpp>

namespace sk = sketchps::kernels;

TEST_CASE("OffsetIndices shifts every index, IndexSequence writes start, start + 1, ...", "[kernels][index_ops]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  const std::size_t n = GENERATE(1u, 7u, 100000u);
  std::vector<std::uint32_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::uint32_t>(3 * i + 1);
  sk::DeviceArray<std::uint32_t> idx(host);
  REQUIRE(sk::OffsetIndices(idx.data(), n, 1000, exec).ok());
  const auto shifted = idx.ToHost();
  for (std::size_t i = 0; i < n; ++i) REQUIRE(shifted[i] == host[i] + 1000);
  REQUIRE(sk::IndexSequence(idx.data(), n, 42, exec).ok());
  const auto seq = idx.ToHost();
  for (std::size_t i = 0; i < n; ++i) REQUIRE(seq[i] == 42 + i);
}

TEST_CASE("Index helpers reject overflow and bad arguments without writing", "[kernels][index_ops]") {
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  sk::DeviceArray<std::uint32_t> idx(std::vector<std::uint32_t>{5, 0xFFFFFFF0u, 9});
  const auto st = sk::OffsetIndices(idx.data(), 3, 0x10, exec);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()), Catch::Contains("OffsetIndices"));
  CHECK(idx.ToHost() == std::vector<std::uint32_t>{5, 0xFFFFFFF0u, 9});
  CHECK(sk::OffsetIndices(idx.data(), 3, 0xF, exec).ok());  // the largest index becomes 2^32 - 1
  CHECK(sk::IndexSequence(idx.data(), 3, 0xFFFFFFFEu, exec).code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::IndexSequence(idx.data(), 2, 0xFFFFFFFEu, exec).ok());
  CHECK(sk::OffsetIndices(nullptr, 1, 1, exec).code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::IndexSequence(nullptr, 1, 0, exec).code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::OffsetIndices(idx.data(), 1, 1, sk::Exec{}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(sk::OffsetIndices(nullptr, 0, 1, exec).ok());  // empty is fine
}
