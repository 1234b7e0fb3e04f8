// The kernels' device memory checks (kernels/backend.h): with the checks on, a host pointer is
// refused with an error naming the kernel and the argument, device memory and registered buffers are
// accepted, and with the checks off only null is refused. The test main turns the checks on for
// every suite; this file switches them explicitly, so it holds whatever the environment says. On the
// CUDA backend the same cases check cudaPointerGetAttributes.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/backend.h"
#include "kernels/select.h"
#include "kernels/vector_ops.h"

namespace sk = sketchps::kernels;

namespace {

// Sets the checks for one scope and restores them after.
class ChecksOn {
 public:
  explicit ChecksOn(bool on) : before_(sk::PointerChecksEnabled()) { sk::SetPointerChecks(on); }
  ~ChecksOn() { sk::SetPointerChecks(before_); }
  ChecksOn(const ChecksOn&) = delete;
  ChecksOn& operator=(const ChecksOn&) = delete;

 private:
  bool before_;
};

}  // namespace

TEST_CASE("With the checks on a host pointer is refused and named, device memory is not", "[pointer_check]") {
  const ChecksOn on(true);
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  std::vector<float> host(64, 1.0f);
  sk::DeviceArray<float> device(host);
  const auto from_host = sk::Axpy(2.0f, host.data(), device.data(), host.size(), exec);
  CHECK(from_host.code() == absl::StatusCode::kInvalidArgument);
  CHECK(from_host.message().find("Axpy: d_x (") == 0);
  CHECK(from_host.message().find(std::string("is not device memory of the ") + sk::BackendName()) != std::string::npos);
  const auto into_host = sk::Axpy(2.0f, device.data(), host.data(), host.size(), exec);
  CHECK(into_host.message().find("Axpy: d_y (") == 0);
  CHECK(host == std::vector<float>(64, 1.0f));  // nothing written
  std::vector<std::uint32_t> idx(8);
  std::vector<float> val(8);
  CHECK(sk::TopK(host.data(), host.size(), 8, idx.data(), val.data(), exec).status().message().find("TopK: ") == 0);
  // Inside a device block, not only at its start.
  CHECK(sk::Axpy(2.0f, device.data() + 10, device.data() + 20, 30, exec).ok());
  CHECK(device.ToHost()[25] == 3.0f);
}

TEST_CASE("A registered buffer counts as device memory on the CPU until it is unregistered", "[pointer_check]") {
  if (sk::ActiveBackend() != sk::Backend::kCpu) return;  // CUDA asks the driver, not the registry
  const ChecksOn on(true);
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  std::vector<float> mine(100, 0.5f);
  CHECK_FALSE(sk::Scale(2.0f, mine.data(), mine.size(), exec).ok());
  sk::RegisterDeviceMemory(mine.data(), mine.size() * sizeof(float));
  CHECK(sk::Scale(2.0f, mine.data() + 50, 50, exec).ok());
  CHECK(mine[99] == 1.0f);
  sk::UnregisterDeviceMemory(mine.data());
  CHECK_FALSE(sk::Scale(2.0f, mine.data(), mine.size(), exec).ok());
  CHECK(mine[0] == 0.5f);
}

TEST_CASE("With the checks off only null is refused", "[pointer_check]") {
  if (sk::ActiveBackend() != sk::Backend::kCpu) return;  // a host pointer would be an illegal address there
  const ChecksOn off(false);
  sk::Scratch scratch;
  const sk::Exec exec{nullptr, &scratch};
  std::vector<float> host(10, 1.0f);
  CHECK(sk::Scale(3.0f, host.data(), host.size(), exec).ok());
  CHECK(host[9] == 3.0f);
  CHECK(sk::Scale(3.0f, nullptr, 1, exec).message() == "Scale: d_x is null");
}
