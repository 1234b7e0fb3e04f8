// `sketchps run`: a whole job on this machine. Starts S sketchps-server and P sketchps-worker
// processes on loopback (free ports), or in decentralized mode (job mode, or --mode) only the P
// workers, which reach each other's Peer services; shows a live progress line, and writes the run
// directory:
//   job.yaml              the effective job spec (after --set overrides)
//   server-<s>.log, worker-<r>.log        each process's log
//   worker-<r>.jsonl      each worker's per-round metrics (worker/trainer.h)
//   metrics.jsonl         the reporting rank's per-round metrics (a copy, at the end; rank 0 unless
//                         it was killed, tools/summary.h)
//   checkpoints/          the servers' checkpoints
//   tls/                  the job's CA and every process's certificate (`sketchps certs`); every
//                         connection, loopback included, is mutual TLS unless --insecure
//   gradients/            with --dump-gradients: every worker's gradient of those rounds
//                         (common/wire/gradient_dump.h; `sketchps bench --input` reads them)
//   summary.json          tools/summary.h
//   accuracy.png, accuracy.svg   test accuracy against wall time, rounds and bytes (tools/plot.h),
//                         when python3 with matplotlib is there (else a warning) and not --no-plot
//   recovery.png, .svg    residual norms, recovered shares, hit rates against rounds (compressed rounds)
// Before any process starts the whole job is checked (tools/preflight.h): a job that cannot run
// exits 2 with the key named.
//
// A run directory that holds a previous run (its summary.json or worker metrics, or checkpoints in
// the checkpoint folder: <out>/checkpoints, or the job's checkpoint.dir) is refused (exit 2) unless
// --resume is given. With --resume (ps mode only) the servers start from their newest checkpoints:
// the launcher says from which round, keeps the workers' records of the rounds before it, and
// refuses (exit 2) when every shard's checkpoint already holds the job's last round (nothing to
// train), when no round is held by every shard, or when a damaged file would be loaded
// (tools/resume_round.h: the round is one every shard and every worker holds intact, so the workers
// restart with their compression state of that round and the resumed job ends bitwise as an
// uninterrupted one; checkpoint.on_damaged: older passes damaged files over).
//
// Every worker saves its state after every round (--state-dir <out>/worker-state, a failed write
// stops it), and every file the launcher writes is checked (common/file_write.h): a full disk fails
// the run naming the file, and the launcher then says how full the run directory's disk is.
//
// Any process that fails stops the run: everything is stopped (the workers first: tools/local_cluster.h)
// and the failing process is named with the last lines of its log. Ctrl-C (SIGINT) or SIGTERM stops
// everything too. A shard that exits because its accept loop stalled is started again instead.
//
// Fault injection (--kill, repeatable), once rank 0 has finished `round` rounds:
//   server:<s>@<round>  SIGKILL shard s, then restart it with the same flags; the run must still
//                       complete (checkpoints, docs/protocol.md);
//   worker:<r>@<round>  SIGKILL worker r. In ps mode it is restarted with the same flags and
//                       restores its state (the run completes bitwise as without the kill); refused
//                       in an elastic job. In decentralized mode for good: its own exit does not fail
//                       the run, what the others do does (they detect the dead peer and regroup
//                       without it, or stop with peer.on_failure: stop).
// The progress line and the rounds of --kill follow rank 0's metrics; once rank 0 is killed they no
// longer advance (the run itself goes on).
// faults.json in the run directory records each kill and restart and the first failure that followed, with
// wall-clock times (unix seconds) and rank 0's rounds at that moment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/cli.h"
#include "tools/faults.h"
#include "tools/run_script.h"

namespace sketchps::tools {

struct RunOptions {
  JobFlags job;         // --mode ps|decentralized is an override of the job's `mode`
  std::string out;      // run directory ("" : runs/<job_id>-<time>)
  std::string bin_dir;  // where sketchps-server / sketchps-worker are ("" : next to this binary)
  std::vector<std::string> kills;
  // --scale ROUND:N (repeatable; tools/scale_plan.h): an elastic job whose workers join and leave on
  // this schedule (ps mode). Every worker process starts at once; a joining one waits for its round.
  std::vector<std::string> scale;
  int worker_threads = 1;
  double peer_timeout_seconds = 0;         // decentralized mode: > 0 overrides the job's peer.timeout_seconds
  bool progress = true;                    // live progress (a redrawn line on a terminal, else a line every 10%)
  std::vector<std::uint64_t> dump_rounds;  // workers write their gradients of these rounds to <out>/gradients
  bool insecure = false;                   // plaintext; default: mutual TLS with certificates made in <out>/tls
  bool resume = false;                     // continue a previous run in `out` from its checkpoints (see above)
  bool plots = true;                       // write accuracy.png / .svg at the end
  ScriptOptions script;                    // --script: the workers run the user's Python script (tools/run_script.h)
  // --servers-only (ps mode): start the shards, write the workers' environment to <out>/workers.env
  // (and print it), and wait until the shards exit, which they do once every worker has left; the
  // workers are started by another launcher (torchrun, docs/pytorch.md). The summary is written when
  // the workers left their records in <out>.
  bool servers_only = false;
};

// Returns the process exit code: 0 success, 1 a process failed, 2 bad options, 130 interrupted.
int RunJob(const RunOptions& options);

}  // namespace sketchps::tools
