"""What the bench/e2e training scripts share: the job, the data, the schedule, evaluation, metrics and
the two backends. workload_vgg.py and workload_vit.py are a model and a job each over main() here;
ddp_train.py (the CNN of the default job) uses the data order and the DDP hooks.

One script, two backends (--backend), the same job either way:
  ddp       torch.distributed over gloo (env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; set
            GLOO_SOCKET_IFNAME) and DistributedDataParallel with --hook none, fp16
            (default_hooks.fp16_compress_hook), powersgd (powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=--powersgd-rank,
            start_powerSGD_iter=--powersgd-start), torch's defaults otherwise) or sketchps
            (sketchps.ddp.comm_hook: the same loop, the gradients through sketchps; the hook's job
            is SKETCHPS_JOB, with the SKETCHPS_* variables of the sketchps backend, and the
            records also get the round's bytes_up, bytes_down, dense_bytes, compute_s and exchange_s
            from state.last_stats). One script, four DDP backends. Also the local-step rivals of
            local_rivals.py (issue 35), with --period H: --hook postlocal (PyTorch's post-local SGD:
            the job's optimizer under PostLocalSGDOptimizer, models averaged every H steps after
            --local-warmup dense rounds) and --hook diloco (DiLoCo: H steps of the job's optimizer,
            SGD or AdamW, whose state persists across periods, then the outer Nesterov step
            --outer-lr/--outer-momentum on the mean pseudo-gradient); not hooks, but DDP's rivals
            over the same loop, data order and learning rate per step. The job is --job
            (default: the workload's own) with --set overrides; torch's optimizer steps with the
            learning rate set every round by learning_rate(); --metrics-out gets the records.
  sketchps  the sketchps package (run with PYTHONPATH=<build>/python): sps.init() reads RANK,
            WORLD_SIZE, SKETCHPS_JOB (or --job), SKETCHPS_SERVERS or SKETCHPS_PEERS,
            SKETCHPS_TLS_DIR or SKETCHPS_INSECURE=1 and SKETCHPS_METRICS_OUT; the C++ core applies
            the update with the job's schedule and writes the per-round records (worker/trainer.h).
            The job must hold the model's layout (model: custom, layers): `sketchps run --script`
            and bench/e2e/run.py get it by running the script once with SKETCHPS_DESCRIBE set.

The job is a sketchps job spec (job/job_spec.h): data.{path, batch_size, train_samples},
train.{epochs | rounds, eval_every_rounds, eval_samples, seed}, optimizer.{name: sgd | adamw, lr,
momentum, nesterov, betas, eps, weight_decay, no_decay, schedule, warmup, warmup_start_factor,
milestones, gamma, min_lr}, scheme.{name, density, dense_warmup}. Both backends:
  - the same initial weights: torch.manual_seed(train.seed) right before the model is built;
  - the same data order: round r of rank w trains on pi_e[s*P*b + w*b : ... + b], e = r div steps,
    s = r mod steps, steps = train_samples div (P*b), pi_e the seeded permutation of
    worker/fashion_mnist.cc (Batches here; the package's DistributedOptimizer.batch_indices());
  - the same hyper-parameters: the torch optimizer is made from the job's optimizer section
    (make_optimizer; AdamW's param groups: weight_decay for every parameter but those the workload
    exempts, which must be the job's optimizer.no_decay);
  - the same evaluations: after round r when (r + 1) % eval_every_rounds == 0 and r + 1 < rounds,
    on the first eval_samples test images (0: all 10,000), after the last round on all of them;
    rank w evaluates block w of P (share()) and the counts are summed over the ranks.
Rank 0 logs the initial weights' checksum ("weights <hex>"): equal in every run of a workload.
DDP records (one JSON line per round, the fields of ddp_train.py): round, round_start, time, epoch,
loss, lr, and after an evaluation test_accuracy, test_loss, test_round (the round whose weights were
evaluated: the local-step rivals evaluate their last synchronisation's), test_samples, eval_s; then
{"event": "final_eval", start, end, test_accuracy, test_loss, test_round, test_samples, weights} (the
final model's checksum, equal on every rank).
Exit 0 when trained; 2 for bad options, job or data (the message names it).
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import job as jobspec  # noqa: E402  (bench/e2e/job.py: overrides and total_rounds, as the core)
import local_rivals  # noqa: E402  (bench/e2e/local_rivals.py: post-local SGD and DiLoCo, shared with ddp_train.py)

DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
TEST_SAMPLES = 10_000
MASK64 = (1 << 64) - 1


class WorkloadError(Exception):
    """Bad options, job or data (exit 2; the message names it)."""


# --- the workload ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Workload:
    name: str
    job: str                                    # the workload's job (YAML), run.py's base job too
    build: Callable[[], nn.Module]              # the model; torch is seeded first
    expected_accuracy: float                    # DDP dense's final test accuracy, measured (fraction)
    no_decay: Callable[[str, torch.Tensor], bool] = field(default=lambda name, p: False)  # AdamW exemptions

    @property
    def target_accuracy(self) -> float:
        """The up-front time-to-accuracy target: the expected DDP dense accuracy - 1 point (run.py
        uses the measured DDP dense run's instead when there is one)."""
        return self.expected_accuracy - 0.01


def build_model(workload: Workload, seed: int) -> nn.Module:
    """The model with the initial weights of `seed` (every rank and both backends call this)."""
    torch.manual_seed(seed)
    return workload.build()


def checksum(model: nn.Module) -> str:
    """A hash of every parameter's bytes, in order (equal weights <=> equal checksums)."""
    import hashlib
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        h.update(name.encode())
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def make_optimizer(model: nn.Module, section: dict, workload: Workload) -> torch.optim.Optimizer:
    """torch's optimizer for the job's optimizer section (the sketchps package checks they agree)."""
    opt = {k: v for k, v in section.items() if v is not None}  # null: the key is unset (the other optimizer's)
    name, lr, wd = opt.get("name", "sgd"), float(opt.get("lr", 0.05)), float(opt.get("weight_decay", 0.0))
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=float(opt.get("momentum", 0.9)),
                               nesterov=bool(opt.get("nesterov", False)), weight_decay=wd)
    if name != "adamw":
        raise WorkloadError(f"optimizer.name: {name!r}: these workloads use sgd or adamw")
    named = list(model.named_parameters())
    exempt = sorted(n for n, p in named if workload.no_decay(n, p))
    if "no_decay" in opt and sorted(opt["no_decay"]) != exempt:  # (describe mode: not in the job yet)
        raise WorkloadError(f"optimizer.no_decay: the job lists {sorted(opt['no_decay'])}, the workload exempts {exempt}")
    groups = [{"params": [p for n, p in named if n not in exempt], "weight_decay": wd},
              {"params": [p for n, p in named if n in exempt], "weight_decay": 0.0}]
    betas = tuple(float(b) for b in opt.get("betas", [0.9, 0.999]))
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas, eps=float(opt.get("eps", 1e-8)),
                             weight_decay=wd)


# --- the job, its clock and the learning-rate schedule (the core's) ---------------------------

Clock, clock_of, span_rounds, powersgd_start = jobspec.Clock, jobspec.clock, jobspec.span_rounds, jobspec.powersgd_start


def warmup_epochs(opt: dict, clock: Clock) -> float:
    if "warmup_epochs" in opt:  # the round-1 key, in epochs as given
        return float(opt["warmup_epochs"])
    return span_rounds(opt.get("warmup", 0), clock, "optimizer.warmup") / clock.rounds_per_epoch


def learning_rate(opt: dict, round_: int, clock: Clock) -> float:
    """The learning rate of round `round_`: engine/optimizer.cc LearningRate at epoch round /
    rounds_per_epoch, the schedule's value times the linear warm-up factor while in warm-up."""
    epoch = round_ / clock.rounds_per_epoch
    base, kind = float(opt.get("lr", 0.05)), opt.get("schedule", "constant")
    if kind == "constant":
        lr = base
    elif kind == "step":
        lr = base
        for m in opt.get("milestones", []):
            lr *= float(opt.get("gamma", 0.1)) if epoch >= float(m) else 1.0
    elif kind == "cosine":
        lo = float(opt.get("min_lr", 0.0))
        t = min(1.0, max(0.0, epoch / clock.total_epochs))
        lr = lo + 0.5 * (base - lo) * (1.0 + math.cos(math.pi * t))
    else:
        raise WorkloadError(f"optimizer.schedule: {kind!r} is not constant, step or cosine")
    warm = warmup_epochs(opt, clock)
    if warm > 0.0 and epoch < warm:
        start = float(opt.get("warmup_start_factor", 1.0))
        lr *= start + (1.0 - start) * (epoch / warm)
    return lr


# --- data ------------------------------------------------------------------------------------

def read_idx(path: Path, magic: int, dims: int) -> np.ndarray:
    """An IDX ubyte file (gzip or not) as a uint8 array."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise WorkloadError(f"cannot read {path}: {e.strerror}")
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if int.from_bytes(raw[:4], "big") != magic:
        raise WorkloadError(f"{path}: bad magic (not an IDX file of the expected kind)")
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims)
    if data.size != math.prod(shape):
        raise WorkloadError(f"{path}: {data.size} bytes of data, header says {shape}")
    return data.reshape(shape)


def load_split(data_dir: str, prefix: str) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images [N, 28, 28] and int64 labels [N] of `prefix` ("train" or "t10k")."""
    d = Path(data_dir)
    images = read_idx(d / f"{prefix}-images-idx3-ubyte.gz", 0x803, 3)
    labels = read_idx(d / f"{prefix}-labels-idx1-ubyte.gz", 0x801, 1)
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


def normalize(images: torch.Tensor) -> torch.Tensor:
    """uint8 [B, 28, 28] -> float32 [B, 1, 28, 28], the sketchps normalization."""
    return ((images.float() / 255.0 - MEAN) / STD).unsqueeze(1)


class SplitMix64:
    def __init__(self, seed: int):
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        limit = MASK64 - (MASK64 % n)
        x = self.next()
        while x >= limit:
            x = self.next()
        return x % n


def epoch_permutation(n: int, seed: int, epoch: int) -> list[int]:
    """EpochPermutation of worker/fashion_mnist.cc: Fisher-Yates with SplitMix64."""
    rng = SplitMix64(SplitMix64(seed).next() ^ ((0xD1B54A32D192ED03 * (epoch + 1)) & MASK64))
    perm = list(range(n))
    for i in range(n, 1, -1):
        j = rng.below(i)
        perm[i - 1], perm[j] = perm[j], perm[i - 1]
    return perm


class Batches:
    """This rank's training batches by the data order rule (one permutation per epoch)."""

    def __init__(self, images, labels, n: int, seed: int, batch: int, rank: int, world: int):
        if n > len(labels):
            raise WorkloadError(f"data.train_samples {n} > the {len(labels)} samples of the data set")
        self.images, self.labels = images, labels
        self.n, self.seed, self.b, self.rank, self.world = n, seed, batch, rank, world
        self.steps = max(1, n // (world * batch))
        self.perm, self.perm_epoch = None, -1

    def indices(self, r: int) -> torch.Tensor:
        epoch, step = divmod(r, self.steps)
        if epoch != self.perm_epoch:
            self.perm, self.perm_epoch = torch.tensor(epoch_permutation(self.n, self.seed, epoch)), epoch
        first = step * self.world * self.b + self.rank * self.b
        return self.perm[first:first + self.b]

    def __call__(self, r: int) -> tuple[torch.Tensor, torch.Tensor]:
        idx = self.indices(r)
        return normalize(self.images[idx]), self.labels[idx]


# --- evaluation and metrics --------------------------------------------------------------------

def share(n: int, rank: int, world: int) -> tuple[int, int]:
    """Rank `rank`'s contiguous block [lo, hi) of range(n), as worker/fashion_mnist.cc Shard: n div
    world each, the first n mod world ranks one more."""
    base, rem = divmod(n, world)
    lo = rank * base + min(rank, rem)
    return lo, lo + base + (1 if rank < rem else 0)


def count_correct(model: nn.Module, images, labels, lo: int, hi: int, chunk: int = 500) -> tuple[float, float, float]:
    """(correct, samples, loss_sum) of the model on images[lo:hi], without gradients."""
    correct = loss_sum = 0.0
    with torch.no_grad():
        for start in range(lo, hi, chunk):
            end = min(hi, start + chunk)
            logits = model(normalize(images[start:end]))
            loss_sum += F.cross_entropy(logits, labels[start:end], reduction="sum").item()
            correct += (logits.argmax(1) == labels[start:end]).sum().item()
    return correct, float(hi - lo), loss_sum


def eval_due(r: int, rounds: int, every: int) -> bool:
    """An intermediate evaluation after round r (the last round's is the final one)."""
    return every > 0 and (r + 1) % every == 0 and r + 1 < rounds


def write(out, record: dict) -> None:
    if out:
        out.write(json.dumps(record) + "\n")
        out.flush()


def say(message: str) -> None:
    print(f"{Path(sys.argv[0]).stem}: {message}", file=sys.stderr, flush=True)


# --- DDP -------------------------------------------------------------------------------------

def wrap_ddp(model: nn.Module, hook: str, powersgd_rank: int = 2, powersgd_start: int = 10):
    """(DistributedDataParallel over the joined process group with the gradient communication hook,
    the hook's sketchps.ddp.CommHookState for --hook sketchps, else None)."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    ddp = nn.parallel.DistributedDataParallel(model)
    state = None
    if hook == "fp16":
        ddp.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
    elif hook == "powersgd":
        ps_state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=powersgd_rank,
                                               start_powerSGD_iter=powersgd_start)
        ddp.register_comm_hook(ps_state, powersgd_one_bucket_at_a_time)
    elif hook == "sketchps":  # the two lines of docs/pytorch.md "DDP's comm hook", after sps.init()
        import sketchps.ddp
        # The describe pass (SKETCHPS_DESCRIBE) exits 0 here. job_schedule: train_ddp sets the lr from the
        # job's schedule itself (learning_rate below), which the hook would otherwise refuse as unapplied.
        state = sketchps.ddp.CommHookState(ddp, job_schedule=True)
        ddp.register_comm_hook(state, sketchps.ddp.comm_hook)
    elif hook != "none":
        raise WorkloadError(f"--hook {hook!r}: expected none, fp16, powersgd or sketchps")
    return ddp, state


def powersgd_one_bucket_at_a_time(state, bucket):
    """powerSGD_hook, finished before DDP hands over the next bucket. Once compressing, the hook
    issues its later all-reduces (P, then Q) from future callbacks on gloo's threads; with two
    buckets in flight they interleave in a different order on different ranks, and gloo, which
    matches collectives by issue order, aborts ("op.preamble.length <= op.nbytes", measured here
    with vgg and vit from the first compressed round; the cnn fits one bucket). Same arithmetic;
    what is lost is the overlap of a bucket's exchange with the rest of the backward pass."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    fut = powerSGD_hook.powerSGD_hook(state, bucket)
    fut.wait()
    return fut


HOOK_STATS = ("bytes_up", "bytes_down", "dense_bytes", "compute_s", "exchange_s")  # of the hook's round record


def all_sum(values: list[float]) -> list[float]:
    """The element-wise sum of `values` over all ranks."""
    import torch.distributed as dist
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


# --- the training loop -------------------------------------------------------------------------

def train_ddp(workload: Workload, job: dict, args) -> None:
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    describing = bool(os.environ.get("SKETCHPS_DESCRIBE"))  # `--hook sketchps` as a world of one
    if world != int(job.get("workers", 4)) and not describing:
        raise WorkloadError(f"WORLD_SIZE {world} disagrees with the job's workers: {job.get('workers')}")
    data, train, opt_section = job.get("data", {}), job.get("train", {}), job.get("optimizer", {})
    if args.hook == "sketchps":
        import sketchps.torch as sps
        sps.init()  # SKETCHPS_JOB: the job with the model's layout and optimizer.name external
    model = build_model(workload, int(train.get("seed", 1)))
    start = args.powersgd_start if args.powersgd_start is not None else powersgd_start(job)
    rival = None
    if args.hook in local_rivals.KINDS:
        rival = local_rivals.from_args(args.hook, model, lambda m: make_optimizer(m, opt_section, workload), args)
        ddp, optimizer, state = rival.model, rival.optimizer, None
    else:
        ddp, state = wrap_ddp(model, args.hook, args.powersgd_rank, start)
        optimizer = make_optimizer(model, opt_section, workload)
    path = data.get("path", DATA_DIR)
    batches = Batches(*load_split(path, "train"), int(data.get("train_samples", 60000)), int(train.get("seed", 1)),
                      int(data.get("batch_size", 32)), rank, world)
    test_x, test_y = load_split(path, "t10k")
    clock = clock_of(job)
    rounds, every = clock.total_rounds, int(train.get("eval_every_rounds", 200))
    n_eval = min(int(train.get("eval_samples", 0)) or len(test_y), len(test_y))
    out = open(args.metrics_out, "a") if args.metrics_out else None
    if rank == 0:
        how = {"powersgd": f" rank {args.powersgd_rank} from round {start}"}.get(args.hook, "")
        if rival is not None:
            how = ": " + local_rivals.describe_args(args.hook, args)
        say(f"ddp ({args.hook}{how}): {sum(p.numel() for p in model.parameters()):,} parameters, "
            f"weights {checksum(model)}, {rounds} rounds")
    if state is not None and state.rounds != rounds:
        raise WorkloadError(f"the hook's job runs {state.rounds} rounds, workload_common.clock_of says {rounds}")
    for r in range(rounds):
        record = {"round": r, "round_start": time.time()}
        x, y = batches(r)
        lr = learning_rate(opt_section, r, clock)
        for g in optimizer.param_groups:
            g["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x), y)
        if state is not None:
            state.record_loss(loss)
        loss.backward()
        optimizer.step()
        if rival is not None:
            rival.end_step(r, rounds)
        record.update(time=time.time(), epoch=r / clock.rounds_per_epoch, loss=loss.item(), lr=lr)
        if state is not None:
            record.update({k: state.last_stats[k] for k in HOOK_STATS if k in state.last_stats})
        if eval_due(r, rounds, every):
            t0 = time.time()
            net = rival.eval_module() if rival is not None else model
            c, n, ls = all_sum(list(count_correct(net, test_x, test_y, *share(n_eval, rank, world))))
            record.update(test_accuracy=c / n, test_loss=ls / n, test_samples=int(n),
                          test_round=rival.synced_round if rival is not None else r, eval_s=time.time() - t0)
        write(out, record)
        if rank == 0 and (r % 20 == 0 or r + 1 == rounds):
            say(f"round {r + 1}/{rounds} loss {record['loss']:.4f} lr {lr:.5f}")
    if rival is not None:
        rival.finish()  # post-local SGD: the ranks' models differ since the last averaging
    t0 = time.time()
    c, n, ls = all_sum(list(count_correct(model, test_x, test_y, *share(len(test_y), rank, world))))
    write(out, {"event": "final_eval", "start": t0, "end": time.time(), "test_round": rounds - 1,
                "test_accuracy": c / n, "test_loss": ls / n, "test_samples": int(n), "weights": checksum(model)})
    if rank == 0:
        say(f"final test accuracy {c / n:.4f}")
    if out:
        out.close()
    if state is not None:
        state.finish()  # leaves the job: the shards exit once every rank has
    dist.barrier()


def train_sketchps(workload: Workload, args) -> None:
    import sketchps.torch as sps
    ctx = sps.init(job=args.job)
    job = yaml.safe_load(ctx.job.effective_yaml)
    model = build_model(workload, ctx.job.seed)
    weights = checksum(model)
    opt = sps.DistributedOptimizer(make_optimizer(model, job.get("optimizer", {}), workload), model)
    clock = clock_of(job)
    if opt.rounds != clock.total_rounds:
        raise WorkloadError(f"the core runs {opt.rounds} rounds, workload_common.clock_of says {clock.total_rounds}")
    train_x, train_y = load_split(ctx.job.data_path, "train")
    test_x, test_y = load_split(ctx.job.data_path, "t10k")
    rank, world, every = ctx.rank, ctx.world_size, ctx.job.eval_every_rounds
    n_eval = min(ctx.job.eval_samples or len(test_y), len(test_y))
    if rank == 0:
        say(f"sketchps {ctx.job.scheme}: {sum(p.numel() for p in model.parameters()):,} parameters, weights {weights}, "
            f"{opt.rounds} rounds")
    with opt:
        while not opt.done:
            r = opt.round
            opt.zero_grad()  # starts the round's clock (round_start), as the DDP loop's
            idx = opt.batch_indices()
            loss = F.cross_entropy(model(normalize(train_x[idx])), train_y[idx])
            loss.backward()
            opt.step(loss=loss)
            if opt.round == r and not opt.done:
                continue  # train.local_steps: an inner step; the round ends with its last one
            if eval_due(r, opt.rounds, every):
                t0 = time.time()
                counts = count_correct(model, test_x, test_y, *share(n_eval, rank, world))
                opt.evaluate(*counts, seconds=time.time() - t0)
            if rank == 0 and (r % 20 == 0 or opt.done):
                say(f"round {r + 1}/{opt.rounds} loss {loss.item():.4f}")
        t0 = time.time()
        counts = count_correct(model, test_x, test_y, *share(len(test_y), rank, world))
        result = opt.evaluate(*counts, final=True, seconds=time.time() - t0)
    if rank == 0:
        say(f"final test accuracy {result['accuracy']:.4f}")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="a bench/e2e workload under DDP or sketchps (see workload_common.py)")
    ap.add_argument("--backend", choices=["ddp", "sketchps"], required=True)
    ap.add_argument("--job", help="the job spec (ddp: default the workload's own; sketchps: default $SKETCHPS_JOB)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="ddp: a job override")
    ap.add_argument("--hook", choices=["none", "fp16", "powersgd", "sketchps", *local_rivals.KINDS], default="none",
                    help="ddp: gradient compression (sketchps: sketchps.ddp.comm_hook, the job from SKETCHPS_JOB), or "
                         "a local-step rival (postlocal: post-local SGD; diloco: DiLoCo; local_rivals.py)")
    local_rivals.add_arguments(ap, "ddp --hook")
    ap.add_argument("--powersgd-rank", type=int, default=2, help="ddp --hook powersgd: matrix_approximation_rank")
    ap.add_argument("--powersgd-start", type=int, default=None,
                    help="ddp --hook powersgd: start_powerSGD_iter (default: the job's scheme.dense_warmup rounds, "
                         "or 10 without one)")
    ap.add_argument("--metrics-out", help="ddp: append one JSON line per round here (sketchps: SKETCHPS_METRICS_OUT)")
    args = ap.parse_args(argv)
    if args.backend == "sketchps" and (args.set or args.metrics_out or args.hook != "none"):
        ap.error("--set, --metrics-out and --hook are for --backend ddp (sketchps takes the job and the environment)")
    if args.powersgd_rank < 1 or (args.powersgd_start is not None and args.powersgd_start < 2):
        ap.error("--powersgd-rank must be >= 1 and --powersgd-start >= 2")
    local_rivals.check_arguments(ap, args, args.hook)
    return args


def ddp_job(workload: Workload, args) -> dict:
    """The job the ddp backend trains: --job (or the workload's) with --set applied."""
    try:
        job = yaml.safe_load(Path(args.job).read_text() if args.job else workload.job)
        for kv in args.set:
            jobspec.apply_override(job, kv)
    except (OSError, yaml.YAMLError, jobspec.JobError) as e:
        raise WorkloadError(f"--job/--set: {e}")
    return job


def main(workload: Workload, argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    try:
        if args.backend == "ddp":
            train_ddp(workload, ddp_job(workload, args), args)
        else:
            train_sketchps(workload, args)
    except (WorkloadError, jobspec.JobError) as e:
        say(str(e))
        sys.stderr.flush()
        os._exit(2)
    except SystemExit as e:  # the describe pass of --hook sketchps: keys written, past DDP's construction
        sys.stderr.flush()
        os._exit(e.code if isinstance(e.code, int) else 2)
    # Leave at once: with torch 1.13 and gloo, tearing down the DDP reducer at interpreter exit can
    # deadlock (ddp_train.py); everything is written and every rank has passed the final barrier.
    sys.stderr.flush()
    os._exit(0)
