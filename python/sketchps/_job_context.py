"""sketchps._job_context: what sketchps.torch.init() found (the job, this rank, how to reach the
others) and the environment it reads; `current` is that Context once init() ran (None before), and
the position (DistributedOptimizer or sketchps.ddp.CommHookState) registers itself there.

Read by every module of the package at call time (sketchps._job_context.current), so that init()
can set it and tests can clear it. The environment variables: init()'s docstring (sketchps/torch.py).
"""
import os

from sketchps import _core
from sketchps.errors import ConfigError

current = None  # the Context of init(), or None


class Context:
    """What init() found: the job (sketchps._core.Job), this rank and how to reach the others."""

    def __init__(self, job, config, describe):
        self.job = job
        self.config = config
        self.describe = describe  # SKETCHPS_DESCRIBE: write the model's job keys there and exit
        self.optimizer = None  # the DistributedOptimizer, once made (DistributedSampler draws from it)
        self.position = None  # the DistributedOptimizer or sketchps.ddp.CommHookState: left at exit if not finished
        self.train_samples = None  # describe pass: len(dataset) of a DistributedSampler made before it
        self.sampler_made = False  # a sketchps.torch.DistributedSampler was made

    @property
    def rank(self):
        return self.config.rank

    @property
    def world_size(self):
        return self.job.workers


def _env(name, default=""):
    return os.environ.get(name, default)


def _rank():
    for name in ("RANK", "JOB_COMPLETION_INDEX"):
        value = _core.env_uint32(name)
        if value is not None:
            return value
    raise ConfigError("RANK: not set (torchrun and `sketchps run --script` set RANK and WORLD_SIZE; "
                      "a Kubernetes Indexed Job sets JOB_COMPLETION_INDEX)")


def _config(job, rank):
    c = _core.WorkerConfig()
    c.rank = rank
    c.tls_dir = _env("SKETCHPS_TLS_DIR")
    c.insecure = _env("SKETCHPS_INSECURE") == "1"
    c.metrics_out = _env("SKETCHPS_METRICS_OUT").replace("{rank}", str(rank))  # one file per rank
    c.state_dir = _env("SKETCHPS_STATE_DIR")  # ps: the schemes' state across restarts (files named by rank)
    every = _env("SKETCHPS_STATE_EVERY_ROUNDS", "1")
    if not every.isdigit() or int(every) < 1:
        raise ConfigError(f"SKETCHPS_STATE_EVERY_ROUNDS: '{every}' is not a whole number >= 1")
    c.state_every_rounds = int(every)
    # ps: the state files' integrity key (--checkpoint-key-file of sketchps-worker; `sketchps run` sets it)
    c.checkpoint_key_file = _env("SKETCHPS_CHECKPOINT_KEY_FILE")
    if job.mode == "ps":
        c.servers = _env("SKETCHPS_SERVERS")
        if not c.servers:
            raise ConfigError(f"SKETCHPS_SERVERS: not set (job mode ps: the {job.servers} servers' addresses, "
                              "comma-separated in shard order)")
    else:
        c.listen = _env("SKETCHPS_LISTEN", "0.0.0.0:7080")
        c.peers = _env("SKETCHPS_PEERS")
        c.peers_file = _env("SKETCHPS_PEERS_FILE")
        c.port_file = _env("SKETCHPS_PORT_FILE")
        if bool(c.peers) == bool(c.peers_file):
            raise ConfigError("SKETCHPS_PEERS / SKETCHPS_PEERS_FILE: set exactly one (job mode decentralized: every "
                              "rank's Peer address, comma-separated in rank order)")
    timeout = _env("SKETCHPS_PEER_TIMEOUT_SECONDS")
    if timeout:
        c.peer_timeout_seconds = float(timeout)
    return c
