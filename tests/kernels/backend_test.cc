#include "kernels/backend.h"

#include <catch2/catch.hpp>

namespace sk = sketchps::kernels;

TEST_CASE("DeviceArray round-trips host data and zeroes", "[backend]") {
  std::vector<float> host = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  sk::DeviceArray<float> arr(host);
  REQUIRE(arr.size() == host.size());
  CHECK(arr.ToHost() == host);
  CHECK(arr.ToHost(2) == std::vector<float>{1.5f, -2.0f});
  arr.Zero();
  CHECK(arr.ToHost() == std::vector<float>(5, 0.0f));
}

TEST_CASE("DeviceArray move leaves the source empty", "[backend]") {
  sk::DeviceArray<int> a(std::vector<int>{1, 2, 3});
  sk::DeviceArray<int> b(std::move(a));
  CHECK(a.size() == 0);
  CHECK(a.data() == nullptr);
  CHECK(b.ToHost() == std::vector<int>{1, 2, 3});
}

TEST_CASE("Scratch reuses blocks instead of allocating again", "[backend]") {
  sk::Scratch scratch;
  char* first = scratch.allocate(1024);
  scratch.deallocate(first, 1024);
  char* second = scratch.allocate(512);  // fits in the cached 1024-byte block
  CHECK(second == first);
  CHECK(scratch.SystemAllocations() == 1);
  char* third = scratch.allocate(4096);  // larger than anything cached: a new block
  CHECK(third != first);
  CHECK(scratch.SystemAllocations() == 2);
  CHECK(scratch.HeldBytes() == 1024 + 4096);
  scratch.Release();
  CHECK(scratch.HeldBytes() == 0);
}

TEST_CASE("Backend identifies itself", "[backend]") {
  const std::string name = sk::BackendName();
  CHECK((name == "cpu" || name == "cuda"));
  CHECK(sk::BackendParallelism() >= 1);
}
