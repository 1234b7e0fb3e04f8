// sketchps python core: the C++ API of libsketchps_python_core.so, which the Python extension
// sketchps._core (python/src/module.cc) binds. The library holds the whole C++ core the package needs
// (the job spec, the data order, the round session over the parameter servers or the peers); this
// header is its only surface and includes standard headers only (no absl, gRPC or torch types), so
// the extension compiles with pybind11 alone against any torch and any Python (python/setup.py).
//
// Memory: the model's flat parameter and gradient buffers are the caller's (Python makes them as
// torch tensors, python/sketchps/_flat.py) and are passed as addresses; they live where the loaded
// kernels library runs (KernelsBackend(): host memory for "cpu", CUDA device memory for "cuda") and
// the core never reads them on the host otherwise. They must stay valid while the Worker lives.
//
// Errors: every function throws sketchps::pycore::Error, whose kind() says which exception of
// python/sketchps/errors.py it is (chosen by the core's status code and reason, never by message).
// Otherwise only std::bad_alloc, and std::runtime_error for a CUDA error in the kernels.
//
// Thread-safety: the free functions are thread-safe; a Worker is not (one Python thread drives it),
// except GradientAccumulated, which autograd threads may call while another call runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#define SKETCHPS_PYCORE_API __attribute__((visibility("default")))

namespace sketchps {
struct JobSpec;
}  // namespace sketchps

namespace sketchps::pycore {

// Which Python exception an Error is (python/sketchps/errors.py).
enum class ErrorKind {
  kConfig,         // ConfigError: a bad job, environment variable, argument or model
  kModelMismatch,  // ModelMismatchError: the model differs between ranks or from the job
  kOrder,          // OrderError: a call out of order
  kTransport,      // TransportError: servers or peers unreachable, a failed round
};

class SKETCHPS_PYCORE_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ~Error() override;
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

using Shape = std::vector<std::int64_t>;
using Layout = std::vector<std::pair<std::string, Shape>>;  // (name, shape) in flat order

// A parsed and validated job spec (job/job_spec.h), as Python reads it.
struct SKETCHPS_PYCORE_API Job {
  std::string job_id, mode, model, data_path, scheme, optimizer, effective_yaml;
  std::uint32_t workers = 0, servers = 0, batch_size = 0;
  std::uint64_t train_samples = 0, seed = 0, eval_every_rounds = 0, eval_samples = 0, total_rounds = 0;
  std::uint64_t checkpoint_every = 0;  // checkpoint.every_rounds: where the shards checkpoint
  std::string checkpoint_dir;          // checkpoint.dir ("": the launcher's RUN_DIR/checkpoints)
  double rounds_per_epoch = 0, density = 0, lr = 0, momentum = 0, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0;
  bool nesterov = false;
  std::vector<std::string> no_decay;
  // train.local_steps (H) and train.outer_optimizer's name ("average", "nesterov"), lr and momentum;
  // has_local_steps: whether rounds exchange pseudo-gradients (H > 1 or a nesterov outer optimizer).
  std::uint64_t local_steps = 1;
  std::string outer_optimizer;
  double outer_lr = 0, outer_momentum = 0;
  bool has_local_steps = false;
  Layout layout;
  bool train_samples_set = false;  // whether the spec (file or overrides) sets data.train_samples
  std::string peer_on_failure;     // "regroup" or "stop" (decentralized mode)
  // The learning-rate schedule keys of `optimizer` that change the rate over the job, as (key, value)
  // ("schedule": "cosine", "warmup": "2 epochs", "milestones": "[3, 6]", "min_lr": "0.001"); empty: a
  // constant rate.
  std::vector<std::pair<std::string, std::string>> schedule_settings;

  // The spec itself, for the core's own calls.
  std::shared_ptr<const JobSpec> spec;
};

// Reads and validates a job spec file ("": the embedded default job) with key=value overrides.
SKETCHPS_PYCORE_API Job LoadJob(const std::string& path, const std::vector<std::string>& overrides);
// The job's `layers` value for these parameters.
SKETCHPS_PYCORE_API std::string LayoutText(const Layout& layout);
// An environment variable holding a non-negative integer (nullopt when unset).
SKETCHPS_PYCORE_API std::optional<std::uint32_t> EnvUint32(const std::string& name);
// The job's learning rate at a round (its optimizer.schedule).
SKETCHPS_PYCORE_API double LearningRate(const Job& job, std::uint64_t round);
// Sample indices of every worker's batch of a round, in rank order (a single-process reference).
SKETCHPS_PYCORE_API std::vector<std::uint64_t> GlobalBatch(const Job& job, std::uint64_t round);
// Indices of rank's contiguous, balanced part of range(n) split into world parts.
SKETCHPS_PYCORE_API std::vector<std::uint64_t> Shard(std::uint64_t n, std::uint32_t rank, std::uint32_t world);

// Fashion-MNIST as the C++ worker reads it (worker/fashion_mnist.h): `count` images of 28x28
// normalized float32, image-major, and their labels.
struct FashionMnistSet {
  std::uint64_t count = 0;
  std::vector<float> images;
  std::vector<std::int64_t> labels;
};
// split: "train" or "test".
SKETCHPS_PYCORE_API FashionMnistSet FashionMnist(const std::string& dir, const std::string& split);

// Every shard's newest checkpoint (ps/export.h): the rounds applied, the layout and the flat weights.
struct CheckpointedWeights {
  std::uint64_t rounds = 0;
  Layout layout;
  std::vector<float> weights;
};
// key_file: the checkpoint key they were written with ("": untagged checkpoints).
SKETCHPS_PYCORE_API CheckpointedWeights LoadCheckpoints(const std::string& dir, const std::string& job_id,
                                                        std::uint32_t shards, const std::string& key_file);

// The kernels library this process loaded (kernels/backend.h): "cpu" or "cuda"; a line describing it
// (device or threads, and the file); CheckKernels throws kConfig when it cannot run here (the CUDA
// kernels without a device), naming what was looked for.
SKETCHPS_PYCORE_API std::string KernelsBackend();
SKETCHPS_PYCORE_API std::string KernelsDescription();
SKETCHPS_PYCORE_API void CheckKernels();

struct WorkerConfig {
  std::uint32_t rank = 0;
  std::string servers;  // ps: comma-separated by shard, or one address with {shard} (common/config/cli.h)
  std::string listen;   // decentralized: this worker's Peer service
  std::string peers;    // decentralized: every rank's address, comma-separated ("" : peers_file)
  std::string peers_file;
  std::string port_file;
  std::string tls_dir;    // `sketchps certs` folder ...
  bool insecure = false;  // ... or plaintext: exactly one of the two (common/config/cli.h ResolveTls)
  std::string metrics_out;
  std::string state_dir;  // ps: the schemes' state across restarts ("" : none)
  std::uint64_t state_every_rounds = 1;
  std::string checkpoint_key_file;  // the state files' integrity key ("" : untagged)
  double patience_seconds = 120;
  double peer_timeout_seconds = 0;  // 0: the job's peer.timeout_seconds
};

// The model's two flat float32 buffers of `dim` values each, by address (torch's data_ptr()).
struct FlatBuffers {
  std::uintptr_t params = 0;
  std::uintptr_t grads = 0;
  std::uint64_t dim = 0;
  std::string device;  // where they live: "cpu" or "cuda" (must be KernelsBackend())
};

class PyWorker;

// One Python training process's part in the job (python/src/py_worker.h has the whole contract).
class SKETCHPS_PYCORE_API Worker {
 public:
  // Joins the job: afterwards the parameter buffer holds the servers' weights (ps mode). `layout`
  // names the parameters in flat order; `buffer_names` the model's buffers (must be none).
  static std::unique_ptr<Worker> Create(const Job& job, const WorkerConfig& config, const Layout& layout,
                                        const FlatBuffers& buffers, const std::vector<std::string>& buffer_names,
                                        bool overlap);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The round with the gradients in the buffer; returns its record (JSON).
  std::string Step(float loss, double compute_seconds);
  // Sums the evaluation counts over the workers into the last round's record (once per round: a
  // second call is an OrderError); returns {"accuracy", "loss", "samples"} (JSON).
  std::string Evaluate(double correct, double samples, double loss_sum, double seconds, bool final);
  void Finish();
  // Leaves the job on an error; returns "" when every server was told, else what went wrong.
  std::string Abandon(const std::string& reason);
  // Starts the round (with overlap: in flight, armed for the gradients' readiness). The caller zeroes
  // the gradient buffer. computed_seconds: how long the round's compute (forward, backward) already ran.
  void StartRound(double computed_seconds = 0);
  void SetNoSync(bool on);
  // These parameters' gradients are complete (the DDP comm hook); refused outside an armed round.
  void Ready(const std::vector<std::uint32_t>& params);
  // An autograd hook: parameter `param`'s gradient was accumulated; ignored outside an armed round.
  void GradientAccumulated(std::uint32_t param);
  // train.local_steps with a torch optimizer: call before its inner step (keeps the round's start).
  void KeepRoundStart();
  // This worker's samples of inner step `step` (0 without local steps) of `round`.
  std::vector<std::uint64_t> BatchIndices(std::uint64_t round, std::uint64_t step = 0);

  double LearningRateAt(std::uint64_t round, std::uint64_t step = 0) const;
  std::uint64_t local_step() const;  // inner steps taken in the next round (0 without local steps)
  double EpochOf(std::uint64_t round) const;
  std::uint64_t first_round() const;
  std::uint64_t next_round() const;
  std::uint64_t last_round() const;
  bool finished() const;

 private:
  explicit Worker(std::unique_ptr<PyWorker> impl);
  std::unique_ptr<PyWorker> impl_;
};

}  // namespace sketchps::pycore
