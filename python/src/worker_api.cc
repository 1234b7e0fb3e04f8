// sketchps::pycore::Worker (sketchps/python_core.h): checks the buffers it is given, then forwards
// to PyWorker (py_worker.h), turning its statuses into Errors.
#include "absl/strings/str_cat.h"
#include "common/layout.h"
#include "common/status.h"
#include "job/job_spec.h"
#include "kernels/backend.h"
#include "python/src/errors.h"
#include "python/src/py_worker.h"
#include "sketchps/python_core.h"

namespace sketchps::pycore {
namespace {

absl::Status CheckBufferNames(const std::vector<std::string>& names) {
  if (names.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("model: has buffer '", names.front(),
                                                 "' (state outside the flat vector, e.g. BatchNorm running "
                                                 "statistics); use GroupNorm/LayerNorm or no normalization"));
}

// The buffers must be where the loaded kernels run: the CUDA kernels cannot read host memory, and
// the CPU kernels would read CUDA memory as host memory.
absl::Status CheckDevice(const std::string& device) {
  if (device == kernels::BackendName()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("model: its parameters are on ", device, ", but the ",
                                                 kernels::BackendName(), " kernels are loaded (",
                                                 kernels::BackendDescription(), "); SKETCHPS_KERNELS chooses them"));
}

absl::StatusOr<ModelBuffers> BuffersOf(const Layout& layout, const FlatBuffers& flat,
                                       const std::vector<std::string>& buffer_names) {
  SKETCHPS_RETURN_IF_ERROR(CheckBufferNames(buffer_names));
  if (layout.empty()) return absl::InvalidArgumentError("model: no parameters");
  ModelBuffers model;
  model.layers = MakeLayerTable(layout);
  SKETCHPS_RETURN_IF_ERROR(ValidateLayerTable(model.layers));
  if (flat.dim != model.layers.dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("buffers: ", flat.dim, " values, the layout's parameters ", model.layers.dim()));
  }
  if (flat.params == 0 || flat.grads == 0) return absl::InvalidArgumentError("buffers: a null address");
  SKETCHPS_RETURN_IF_ERROR(CheckDevice(flat.device));
  model.params = reinterpret_cast<float*>(flat.params);
  model.grads = reinterpret_cast<float*>(flat.grads);
  const std::size_t bytes = flat.dim * sizeof(float);
  model.params_memory = kernels::DeviceMemoryRegistration(model.params, bytes);
  model.grads_memory = kernels::DeviceMemoryRegistration(model.grads, bytes);
  return model;
}

}  // namespace

std::unique_ptr<Worker> Worker::Create(const Job& job, const WorkerConfig& config, const Layout& layout,
                                       const FlatBuffers& buffers, const std::vector<std::string>& buffer_names,
                                       bool overlap) {
  if (job.spec == nullptr) throw Error(ErrorKind::kConfig, "job: not made by load_job");
  ModelBuffers model = Unwrap(BuffersOf(layout, buffers, buffer_names));
  return std::unique_ptr<Worker>(new Worker(Unwrap(PyWorker::Create(*job.spec, config, std::move(model), overlap))));
}

Worker::Worker(std::unique_ptr<PyWorker> impl) : impl_(std::move(impl)) {}
Worker::~Worker() = default;

std::string Worker::Step(float loss, double compute_seconds) { return Unwrap(impl_->Step(loss, compute_seconds)); }

std::string Worker::Evaluate(double correct, double samples, double loss_sum, double seconds, bool final) {
  return Unwrap(impl_->Evaluate(correct, samples, loss_sum, seconds, final));
}

void Worker::Finish() { Check(impl_->Finish()); }

std::string Worker::Abandon(const std::string& reason) {
  return std::string(impl_->Abandon(reason).message());  // best effort: "" when every server was told
}

void Worker::StartRound(double computed_seconds) { Check(impl_->StartRound(computed_seconds)); }
void Worker::SetNoSync(bool on) { Check(impl_->SetNoSync(on)); }
void Worker::Ready(const std::vector<std::uint32_t>& params) { Check(impl_->GradientsReady(params)); }
void Worker::GradientAccumulated(std::uint32_t param) { impl_->GradientAccumulated(param); }
void Worker::KeepRoundStart() { Check(impl_->KeepRoundStart()); }
std::vector<std::uint64_t> Worker::BatchIndices(std::uint64_t round, std::uint64_t step) {
  return Unwrap(impl_->BatchIndices(round, step));
}

double Worker::LearningRateAt(std::uint64_t round, std::uint64_t step) const {
  return impl_->learning_rate(round, step);
}
std::uint64_t Worker::local_step() const { return impl_->local_step(); }
double Worker::EpochOf(std::uint64_t round) const { return impl_->epoch_of(round); }
std::uint64_t Worker::first_round() const { return impl_->first_round(); }
std::uint64_t Worker::next_round() const { return impl_->next_round(); }
std::uint64_t Worker::last_round() const { return impl_->last_round(); }
bool Worker::finished() const { return impl_->finished(); }

}  // namespace sketchps::pycore
