// sketchps._core: the C++ core for the Python package (python/sketchps). Python only adapts: the job
// spec, the environment helpers and the data order are the C++ ones, and a PyWorker (py_worker.h)
// runs the rounds on views of the user's own tensors. Errors become the exceptions of
// sketchps/errors.py (errors.cc).
#include <pybind11/stl.h>
#include <torch/extension.h>

#include "common/config/cli.h"
#include "common/wire/file_key.h"
#include "engine/shard.h"
#include "job/job_spec.h"
#include "job/model_layout.h"
#include "ps/export.h"
#include "python/src/errors.h"
#include "python/src/py_worker.h"
#include "worker/fashion_mnist.h"
#include "worker/models.h"

namespace py = pybind11;

namespace sketchps::python {
namespace {

template <class T>
T Unwrap(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> Layout(const JobSpec& job) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (const auto& l : job.layout.layers) out.emplace_back(l.name, l.shape);
  return out;
}

void BindJob(py::module_& m) {
  py::class_<JobSpec>(m, "Job", "A parsed and validated job spec (job/job_spec.h)")
      .def_readonly("job_id", &JobSpec::job_id)
      .def_property_readonly("mode", [](const JobSpec& j) { return std::string(ModeName(j.mode)); })
      .def_readonly("workers", &JobSpec::workers)
      .def_readonly("servers", &JobSpec::servers)
      .def_readonly("model", &JobSpec::model)
      .def_property_readonly("data_path", [](const JobSpec& j) { return j.data.path; })
      .def_property_readonly("batch_size", [](const JobSpec& j) { return j.data.batch_size; })
      .def_property_readonly("train_samples", [](const JobSpec& j) { return j.data.train_samples; })
      .def_property_readonly("seed", [](const JobSpec& j) { return j.train.seed; })
      .def_property_readonly("eval_every_rounds", [](const JobSpec& j) { return j.train.eval_every_rounds; })
      .def_property_readonly("eval_samples", [](const JobSpec& j) { return j.train.eval_samples; })
      .def_property_readonly("scheme", [](const JobSpec& j) { return j.scheme.name; })
      .def_property_readonly("density", [](const JobSpec& j) { return j.scheme.density; })
      .def_property_readonly("lr", [](const JobSpec& j) { return j.optimizer.lr.base_lr; })
      .def_property_readonly("momentum", [](const JobSpec& j) { return j.optimizer.momentum; })
      .def_property_readonly("nesterov", [](const JobSpec& j) { return j.optimizer.nesterov; })
      .def_property_readonly("weight_decay", [](const JobSpec& j) { return j.optimizer.weight_decay; })
      .def_property_readonly("optimizer", [](const JobSpec& j) { return std::string(OptimizerName(j.optimizer.kind)); })
      .def_property_readonly("betas",
                             [](const JobSpec& j) { return py::make_tuple(j.optimizer.beta1, j.optimizer.beta2); })
      .def_property_readonly("eps", [](const JobSpec& j) { return j.optimizer.eps; })
      .def_property_readonly("no_decay", [](const JobSpec& j) { return j.optimizer.no_decay; })
      .def_property_readonly("total_rounds", &JobSpec::total_rounds)
      .def_property_readonly("rounds_per_epoch", &JobSpec::rounds_per_epoch)
      .def_property_readonly("layout", &Layout)
      .def_readonly("effective_yaml", &JobSpec::effective_yaml);
  m.def(
      "load_job",
      [](const std::string& path, const std::vector<std::string>& overrides) {
        return Unwrap(LoadJobSpec(path, overrides));
      },
      py::arg("path"), py::arg("overrides") = std::vector<std::string>{},
      "Reads and validates a job spec file ('' : the embedded default job) with key=value overrides");
  m.def(
      "layout_text",
      [](const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& shapes) {
        return LayoutText(MakeLayerTable(shapes));
      },
      "The job's `layers` value for parameters given as (name, shape) pairs");
}

void BindEnvironment(py::module_& m) {
  m.def(
      "env_uint32", [](const std::string& name) { return Unwrap(EnvUint32(name.c_str())); },
      "An environment variable holding a non-negative integer (None when unset)");
  m.def(
      "fashion_mnist",
      [](const std::string& dir, const std::string& split) {
        if (split != "train" && split != "test")
          Raise(absl::InvalidArgumentError("split: '" + split + "' is not train or test"));
        const auto data =
            Unwrap(worker::LoadFashionMnist(dir, split == "train" ? worker::Split::kTrain : worker::Split::kTest));
        std::vector<std::uint64_t> all(data.size());
        for (std::uint64_t i = 0; i < all.size(); ++i) all[i] = i;
        auto batch = Unwrap(worker::MakeBatch(data, all));
        return py::make_tuple(batch.input, batch.target);
      },
      py::arg("dir"), py::arg("split"),
      "Fashion-MNIST as the C++ worker reads it: (images [N,1,28,28] normalized, labels)");
  m.def(
      "builtin_initial_weights",
      [](const std::string& name, std::uint64_t seed) {
        auto model = Unwrap(worker::Model::Create(name, seed));
        return model.flat().params_tensor().clone();
      },
      py::arg("name"), py::arg("seed"),
      "The flat initial weights sketchps-worker gives a built-in model (mlp, cnn, resnet, vgg) for a seed");
  m.def(
      "learning_rate",
      [](const JobSpec& job, std::uint64_t round) {
        return LearningRate(job.optimizer.lr, EpochOfRound(round, job.rounds_per_epoch()));
      },
      py::arg("job"), py::arg("round"), "The job's learning rate at a round (its optimizer.schedule)");
  m.def(
      "global_batch",
      [](const JobSpec& job, std::uint64_t round) {
        // The union of every worker's batch of `round`, in rank order: one process with batch P*b
        // sees exactly these samples (the data order rule of worker/fashion_mnist.h).
        const std::uint64_t steps = worker::StepsPerEpoch(job.data.train_samples, 1, job.workers * job.data.batch_size);
        if (steps == 0) Raise(absl::InvalidArgumentError("data.train_samples: fewer than one global batch"));
        const auto perm = worker::EpochPermutation(job.data.train_samples, job.train.seed, round / steps);
        const auto span = Unwrap(worker::StepIndices(perm, round % steps, 0, 1, job.workers * job.data.batch_size));
        return std::vector<std::uint64_t>(span.begin(), span.end());
      },
      py::arg("job"), py::arg("round"),
      "Sample indices of every worker's batch of a round, in rank order (a single-process reference)");
  m.def(
      "shard",
      [](std::uint64_t n, std::uint32_t rank, std::uint32_t world) { return Unwrap(worker::Shard(n, rank, world)); },
      "Indices of rank's contiguous, balanced part of range(n) split into world parts");
}

void BindCheckpoints(py::module_& m) {
  m.def(
      "load_checkpoints",
      [](const std::string& dir, const std::string& job_id, std::uint32_t shards, const std::string& key_file) {
        std::optional<FileKey> key;
        if (!key_file.empty()) key = Unwrap(FileKey::Load(key_file));
        auto model = Unwrap(ps::LoadCheckpointedModel(dir, job_id, shards, key ? &*key : nullptr));
        std::vector<std::pair<std::string, std::vector<std::int64_t>>> layout;
        for (const auto& l : model.layers.layers) layout.emplace_back(l.name, l.shape);
        at::Tensor flat =
            torch::from_blob(model.weights.data(), {static_cast<std::int64_t>(model.weights.size())}, torch::kFloat)
                .clone();
        return py::make_tuple(model.rounds_applied, layout, flat);
      },
      py::arg("dir"), py::arg("job_id"), py::arg("shards"), py::arg("key_file") = "",
      "(rounds, [(name, shape)], flat weights) from every shard's newest checkpoint (ps/export.h); key_file: "
      "the checkpoint key they were written with (\"\": untagged checkpoints)");
}

void BindWorker(py::module_& m) {
  py::class_<WorkerConfig>(m, "WorkerConfig")
      .def(py::init<>())
      .def_readwrite("rank", &WorkerConfig::rank)
      .def_readwrite("servers", &WorkerConfig::servers)
      .def_readwrite("listen", &WorkerConfig::listen)
      .def_readwrite("peers", &WorkerConfig::peers)
      .def_readwrite("peers_file", &WorkerConfig::peers_file)
      .def_readwrite("port_file", &WorkerConfig::port_file)
      .def_readwrite("tls_dir", &WorkerConfig::tls_dir)
      .def_readwrite("insecure", &WorkerConfig::insecure)
      .def_readwrite("metrics_out", &WorkerConfig::metrics_out)
      .def_readwrite("state_dir", &WorkerConfig::state_dir)
      .def_readwrite("state_every_rounds", &WorkerConfig::state_every_rounds)
      .def_readwrite("checkpoint_key_file", &WorkerConfig::checkpoint_key_file)
      .def_readwrite("patience_seconds", &WorkerConfig::patience_seconds)
      .def_readwrite("peer_timeout_seconds", &WorkerConfig::peer_timeout_seconds);
  py::class_<PyWorker>(m, "Worker")
      .def(py::init([](const JobSpec& job, const WorkerConfig& config,
                       std::vector<std::pair<std::string, at::Tensor>> params, const std::vector<std::string>& buffers,
                       bool overlap) {
             absl::StatusOr<std::unique_ptr<PyWorker>> w;
             {
               py::gil_scoped_release release;
               w = PyWorker::Create(job, config, std::move(params), buffers, overlap);
             }
             return Unwrap(std::move(w));
           }),
           py::arg("job"), py::arg("config"), py::arg("params"), py::arg("buffers"), py::arg("overlap") = true)
      .def("step",
           [](PyWorker& w, float loss, double compute_seconds) {
             absl::StatusOr<std::string> r;
             {
               py::gil_scoped_release release;
               r = w.Step(loss, compute_seconds);
             }
             return Unwrap(std::move(r));
           })
      .def("evaluate",
           [](PyWorker& w, double correct, double samples, double loss_sum, double seconds, bool final) {
             absl::StatusOr<std::string> r;
             {
               py::gil_scoped_release release;
               r = w.Evaluate(correct, samples, loss_sum, seconds, final);
             }
             return Unwrap(std::move(r));
           })
      .def("finish",
           [](PyWorker& w) {
             absl::Status st;
             {
               py::gil_scoped_release release;
               st = w.Finish();
             }
             Check(st);
           })
      .def("abandon",
           [](PyWorker& w, const std::string& reason) {
             absl::Status st;
             {
               py::gil_scoped_release release;
               st = w.Abandon(reason);
             }
             return std::string(st.message());  // best effort: "" when every server was told
           })
      .def("zero_grad", [](PyWorker& w) { Check(w.ZeroGrad()); })
      .def("no_sync", [](PyWorker& w, bool on) { Check(w.SetNoSync(on)); })
      .def("ready", [](PyWorker& w, const std::vector<std::uint32_t>& params) { Check(w.GradientsReady(params)); })
      .def("batch_indices", [](PyWorker& w, std::uint64_t round) { return Unwrap(w.BatchIndices(round)); })
      .def("learning_rate", &PyWorker::learning_rate)
      .def("epoch_of", &PyWorker::epoch_of)
      .def_property_readonly("first_round", &PyWorker::first_round)
      .def_property_readonly("next_round", &PyWorker::next_round)
      .def_property_readonly("last_round", &PyWorker::last_round)
      .def_property_readonly("finished", &PyWorker::finished)
      .def_property_readonly("params", &PyWorker::params)
      .def_property_readonly("grads", &PyWorker::grads);
}

}  // namespace
}  // namespace sketchps::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "sketchps C++ core (job spec, data order, rounds through the servers or peers)";
  sketchps::python::BindJob(m);
  sketchps::python::BindEnvironment(m);
  sketchps::python::BindWorker(m);
  sketchps::python::BindCheckpoints(m);
}
