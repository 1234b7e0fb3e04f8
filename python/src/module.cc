// sketchps._core: the pybind11 binding of the C++ core (sketchps/python_core.h, in
// libsketchps_python_core.so). It includes no torch header and links no libtorch: the model's
// buffers come as addresses (python/sketchps/_flat.py makes them), data as bytes, so one build works
// with any torch. Python only adapts: the job spec, the environment helpers and the data order are
// the C++ ones, and a Worker runs the rounds on the user's own tensors. pycore::Error becomes the
// exception of sketchps/errors.py its kind names. Blocking calls release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "sketchps/python_core.h"

namespace py = pybind11;

namespace sketchps::pycore {
namespace {

const char* ErrorClass(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kConfig: return "ConfigError";
    case ErrorKind::kModelMismatch: return "ModelMismatchError";
    case ErrorKind::kOrder: return "OrderError";
    case ErrorKind::kTransport: return "TransportError";
  }
  return "Error";
}

void TranslateErrors(std::exception_ptr thrown) {
  try {
    if (thrown) std::rethrow_exception(thrown);
  } catch (const Error& e) {
    const py::object cls = py::module_::import("sketchps.errors").attr(ErrorClass(e.kind()));
    PyErr_SetString(cls.ptr(), e.what());
  }
}

// Runs f without the GIL (a round waits for the network).
template <class F>
auto Released(F&& f) {
  py::gil_scoped_release release;
  return f();
}

template <class T>
py::bytes BytesOf(const std::vector<T>& values) {
  return py::bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

void BindJob(py::module_& m) {
  py::class_<Job>(m, "Job", "A parsed and validated job spec (job/job_spec.h)")
      .def_readonly("job_id", &Job::job_id)
      .def_readonly("mode", &Job::mode)
      .def_readonly("workers", &Job::workers)
      .def_readonly("servers", &Job::servers)
      .def_readonly("model", &Job::model)
      .def_readonly("data_path", &Job::data_path)
      .def_readonly("batch_size", &Job::batch_size)
      .def_readonly("train_samples", &Job::train_samples)
      .def_readonly("seed", &Job::seed)
      .def_readonly("eval_every_rounds", &Job::eval_every_rounds)
      .def_readonly("eval_samples", &Job::eval_samples)
      .def_readonly("scheme", &Job::scheme)
      .def_readonly("density", &Job::density)
      .def_readonly("lr", &Job::lr)
      .def_readonly("momentum", &Job::momentum)
      .def_readonly("nesterov", &Job::nesterov)
      .def_readonly("weight_decay", &Job::weight_decay)
      .def_readonly("optimizer", &Job::optimizer)
      .def_property_readonly("betas", [](const Job& j) { return py::make_tuple(j.beta1, j.beta2); })
      .def_readonly("eps", &Job::eps)
      .def_readonly("no_decay", &Job::no_decay)
      .def_readonly("local_steps", &Job::local_steps)
      .def_readonly("outer_optimizer", &Job::outer_optimizer)
      .def_readonly("outer_lr", &Job::outer_lr)
      .def_readonly("outer_momentum", &Job::outer_momentum)
      .def_readonly("has_local_steps", &Job::has_local_steps)
      .def_readonly("total_rounds", &Job::total_rounds)
      .def_readonly("rounds_per_epoch", &Job::rounds_per_epoch)
      .def_readonly("checkpoint_every", &Job::checkpoint_every)
      .def_readonly("checkpoint_dir", &Job::checkpoint_dir)
      .def_readonly("layout", &Job::layout)
      .def_readonly("train_samples_set", &Job::train_samples_set)
      .def_readonly("peer_on_failure", &Job::peer_on_failure)
      .def_readonly("schedule_settings", &Job::schedule_settings)
      .def_readonly("effective_yaml", &Job::effective_yaml);
  m.def("load_job", &LoadJob, py::arg("path"), py::arg("overrides") = std::vector<std::string>{},
        "Reads and validates a job spec file ('' : the embedded default job) with key=value overrides");
  m.def("layout_text", &LayoutText, "The job's `layers` value for parameters given as (name, shape) pairs");
  m.def("learning_rate", &LearningRate, py::arg("job"), py::arg("round"),
        "The job's learning rate at a round (its optimizer.schedule)");
  m.def("global_batch", &GlobalBatch, py::arg("job"), py::arg("round"),
        "Sample indices of every worker's batch of a round, in rank order (a single-process reference)");
}

void BindEnvironment(py::module_& m) {
  m.def("env_uint32", &EnvUint32, "An environment variable holding a non-negative integer (None when unset)");
  m.def(
      "fashion_mnist",
      [](const std::string& dir, const std::string& split) {
        const FashionMnistSet set = Released([&] { return FashionMnist(dir, split); });
        return py::make_tuple(set.count, BytesOf(set.images), BytesOf(set.labels));
      },
      py::arg("dir"), py::arg("split"),
      "Fashion-MNIST as the C++ worker reads it: (N, N*784 normalized float32 as bytes, N int64 labels as bytes)");
  m.def("shard", &Shard, "Indices of rank's contiguous, balanced part of range(n) split into world parts");
  m.def("kernels_backend", &KernelsBackend, "The kernels this process loaded: 'cpu' or 'cuda'");
  m.def("kernels_description", &KernelsDescription, "The loaded kernels: device or threads, and the file");
  m.def("check_kernels", &CheckKernels, "Raises ConfigError when the loaded kernels cannot run here");
}

void BindCheckpoints(py::module_& m) {
  m.def(
      "load_checkpoints",
      [](const std::string& dir, const std::string& job_id, std::uint32_t shards, const std::string& key_file) {
        const CheckpointedWeights w = Released([&] { return LoadCheckpoints(dir, job_id, shards, key_file); });
        return py::make_tuple(w.rounds, w.layout, BytesOf(w.weights));
      },
      py::arg("dir"), py::arg("job_id"), py::arg("shards"), py::arg("key_file") = "",
      "(rounds, [(name, shape)], flat float32 weights as bytes) from every shard's newest checkpoint "
      "(ps/export.h); key_file: the checkpoint key they were written with (\"\": untagged checkpoints)");
}

void BindWorkerConfig(py::module_& m) {
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
}

std::unique_ptr<Worker> MakeWorker(const Job& job, const WorkerConfig& config, const Layout& layout,
                                   std::uintptr_t params, std::uintptr_t grads, std::uint64_t dim,
                                   const std::string& device, const std::vector<std::string>& buffers, bool overlap) {
  const FlatBuffers flat{params, grads, dim, device};
  return Released([&] { return Worker::Create(job, config, layout, flat, buffers, overlap); });
}

void BindWorker(py::module_& m) {
  py::class_<Worker>(m, "Worker")
      .def(py::init(&MakeWorker), py::arg("job"), py::arg("config"), py::arg("layout"), py::arg("params"),
           py::arg("grads"), py::arg("dim"), py::arg("device"), py::arg("buffers"), py::arg("overlap") = true,
           "Joins the job with the model's flat buffers (addresses: tensor.data_ptr(); device 'cpu' or 'cuda')")
      .def("step",
           [](Worker& w, float loss, double seconds) { return Released([&] { return w.Step(loss, seconds); }); })
      .def("evaluate",
           [](Worker& w, double correct, double samples, double loss_sum, double seconds, bool final) {
             return Released([&] { return w.Evaluate(correct, samples, loss_sum, seconds, final); });
           })
      .def("finish", [](Worker& w) { Released([&] { w.Finish(); }); })
      .def("abandon", [](Worker& w, const std::string& reason) { return Released([&] { return w.Abandon(reason); }); })
      .def("start_round", &Worker::StartRound, py::arg("computed_seconds") = 0.0)
      .def("no_sync", &Worker::SetNoSync)
      .def("ready", &Worker::Ready)
      .def("gradient_accumulated", &Worker::GradientAccumulated)
      .def("keep_round_start", &Worker::KeepRoundStart)
      .def("batch_indices", &Worker::BatchIndices, py::arg("round"), py::arg("step") = 0)
      .def("learning_rate", &Worker::LearningRateAt, py::arg("round"), py::arg("step") = 0)
      .def_property_readonly("local_step", &Worker::local_step)
      .def("epoch_of", &Worker::EpochOf)
      .def_property_readonly("first_round", &Worker::first_round)
      .def_property_readonly("next_round", &Worker::next_round)
      .def_property_readonly("last_round", &Worker::last_round)
      .def_property_readonly("finished", &Worker::finished);
}

}  // namespace
}  // namespace sketchps::pycore

PYBIND11_MODULE(_core, m) {
  m.doc() = "sketchps C++ core (job spec, data order, rounds through the servers or peers)";
  py::register_exception_translator(&sketchps::pycore::TranslateErrors);
  sketchps::pycore::BindJob(m);
  sketchps::pycore::BindEnvironment(m);
  sketchps::pycore::BindWorkerConfig(m);
  sketchps::pycore::BindWorker(m);
  sketchps::pycore::BindCheckpoints(m);
}
