// `sketchps loadgen`: how every scheme's traffic scales with the number of workers P, measured on
// the real servers and the real peer collectives with synthetic workers (no model, no libtorch).
//
// For each configuration (mode, scheme, P) of the sweep:
//   ps             S real `sketchps-server` processes on 127.0.0.1 (free ports, /metrics on a free
//                  port), then P workers as threads of this process, each with its own transport
//                  (worker::ConnectParameterServers: Join, PushPull, replica checks) and its own
//                  Replica (Replica::Create with the scheme bound from the job spec);
//   decentralized  P Peer servers and aggregators in this process (worker::StartPeers per worker);
//                  the pseudo-scheme gtopk_tree is gtopk with the aggregators' gTop-k tree merge
//                  (PeerConfig::gtopk_tree, which no job key selects; StartPeers leaves it off).
// Every worker runs warmup_rounds + rounds rounds with Replica::RunRound on its own gradient (synthetic,
// bench/loadgen_synth.h, or real dumps cycled over the workers). Rounds are lock-stepped: all
// workers draw their gradients, meet at a barrier, run the round, meet again; a round's time is
// barrier to barrier, so gradient generation is not timed. Counters are read at the barriers after
// the warm-up rounds and after the last round (bench/loadgen_figures.h derives the figures).
//
// The sweep runs each configuration in a child `sketchps loadgen --single mode:scheme:P` process
// with a deadline (timeout_seconds): a configuration that fails or times out is reported with its
// error and the sweep goes on. Progress (configuration, round counter) goes to stderr; the result is
// JSON (--json / --out) or a table. Time figures come from whatever machine runs it (threads share
// its cores with the servers); byte figures do not depend on speed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "bench/loadgen_figures.h"
#include "bench/loadgen_synth.h"
#include "common/layout.h"

namespace sketchps::bench {

inline constexpr std::uint64_t kCnnDim = 220234;  // the default job's CNN

struct LoadgenOptions {
  std::vector<std::string> modes = {"ps"};                   // --mode: ps, decentralized (comma list)
  std::vector<std::uint32_t> workers = {4, 8, 16, 32, 64};    // --workers
  std::uint32_t servers = 2;                                 // --servers (ps)
  std::vector<std::string> schemes;                          // --schemes (empty: every registered scheme)
  std::uint64_t dim = kCnnDim;                               // --dim
  std::string layout = "auto";                               // --layout cnn | flat | auto (cnn iff dim = 220,234)
  double density = 0.01;                                     // --density
  std::uint64_t rounds = 5;                                  // --rounds (timed)
  std::uint64_t warmup_rounds = 2;                           // --warmup-rounds (untimed, first)
  std::vector<std::string> overrides;                        // --set key=value (job spec)
  std::string gradients_dir;                                 // --gradients: grad-r*-w*.skgd
  std::string bin_dir;                                       // --bin-dir: where sketchps-server is
  double correlation = kDefaultCorrelation;                  // --correlation
  std::uint64_t seed = 1;                                    // --seed (gradients)
  double epoch = 10;                                         // --epoch: RoundInfo.epoch of every round
  double timeout_seconds = 900;                              // --timeout-seconds per configuration
  bool json = false;                                         // --json: JSON on stdout
  std::string out;                                           // --out FILE: JSON
  std::string work_dir;                                      // --work-dir (default: a new /tmp dir)
  bool calibrate = false;                                    // --calibrate: print the union table, no sweep
  // Internal (the sweep's child processes).
  std::string single;                                        // --single mode:scheme:P
  double stream_bytes_per_second = 0;                        // --stream-bytes-per-second
};

// The default scheme list: every registered scheme, in registry order.
std::vector<std::string> DefaultSchemes();

// The CNN's layer table (conv1, conv2, fc1, fc2 with biases: 220,234 parameters), or one layer
// "flat" of `dim` elements.
LayerTable CnnLayers();
LayerTable FlatLayers(std::uint64_t dim);

// One configuration, run in this process.
struct ConfigSpec {
  std::string mode = "ps";            // ps | decentralized
  std::string scheme;                 // a registered scheme, or gtopk_tree (decentralized)
  std::uint32_t workers = 4;
  std::uint32_t servers = 2;
  LayerTable layers;
  double density = 0.01;
  std::uint64_t warmup_rounds = 2;
  std::uint64_t rounds = 5;
  std::vector<std::string> overrides;  // job spec overrides; scheme.<other scheme>.* ones are dropped
  std::string gradients_dir;           // "" : synthetic
  double correlation = kDefaultCorrelation;
  std::uint64_t seed = 1;
  double epoch = 10;
  std::string server_bin;              // ps: the sketchps-server executable
  std::string work_dir;                // job.yaml, server logs and port files (created)
  double timeout_seconds = 900;        // the whole configuration, setup included
  double stream_bytes_per_second = 0;  // the yardstick, for the figures
  std::function<void(const std::string&)> progress;  // one line per event (may be empty)
};

// Runs one configuration and returns its counters. Errors: InvalidArgument (bad configuration),
// DeadlineExceeded (timeout_seconds passed: the rounds stop at the next round boundary, the
// servers are stopped), or the first worker's or server's failure, naming it.
absl::StatusOr<Measurement> RunConfiguration(const ConfigSpec& spec);

// Loads every grad-r*-w*.skgd in `dir`, sorted by (round, worker). Errors: none found, unreadable
// dumps, or dumps whose layer tables differ.
struct LoadedGradients {
  LayerTable layers;
  std::vector<std::vector<float>> gradients;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> origin;  // (round, worker) of each
};
absl::StatusOr<LoadedGradients> LoadGradientDumps(const std::string& dir);

// Bytes per second of one streaming pass (kernels::SumAbs, vectorized) over `floats` floats with
// `threads` OpenMP threads (0: the runtime's default): the median of `repeats` passes.
absl::StatusOr<double> StreamBytesPerSecond(std::size_t floats, int threads, int repeats = 5);

// Registers the `loadgen` subcommand on `app`.
CLI::App* AddLoadgenCommand(CLI::App& app, LoadgenOptions& options);
// Runs it; returns the exit code (0: every configuration measured; 1: some failed; 2: bad options).
int RunLoadgen(const LoadgenOptions& options);

}  // namespace sketchps::bench
