"""sketchps._resume: the script's own state saved with the job, so that `sketchps run --resume` of a
script ends bitwise where the uninterrupted run would (docs/pytorch.md "Resume").

Why: with optimizer.name external (the DDP comm hook, DistributedOptimizer(apply="torch")) the
weights, the torch optimizer's state (momentum, Adam's moments) and the LR schedulers live in the
script, not on the servers; and BatchNorm's running statistics (buffers) are in no checkpoint of
any mode. The servers' checkpoints and the C++ worker's state file (tools/resume_round.h) hold the
rest.

What, per rank, after R rounds, R a multiple of checkpoint.every_rounds (where the shards checkpoint
and the C++ worker keeps its state file of R): the model's state_dict (parameters and buffers), the
state_dict of every object registered with register() in its order (the torch optimizer, LR
schedulers, a GradScaler: anything with state_dict/load_state_dict), torch's CPU RNG state and,
where the script has used CUDA, the CUDA RNG state of every visible device.
When: at the first training forward of round R (torch.is_grad_enabled()): by then the script's
optimizer and schedulers have stepped for round R - 1, as the loop left them.
File: $SKETCHPS_STATE_DIR/worker-<rank>-script-<R, 12 digits>.pt (ScriptStateFileName in
tools/resume_round.h: the launcher resumes an external job only from a round every rank saved, and
refuses before it moves anything otherwise), written whole (a rename); the newest three are kept.
Without SKETCHPS_STATE_DIR nothing is saved.

Restore, when the position's first round R is > 0 (a resumed job): the file of R is read at once
and the model loaded from it (full: "model"; the buffers only: "buffers", when the servers gave the
weights; "buffers-if-saved": the buffers when the file exists, else nothing, for DistributedOptimizer
with apply="sketchps" and broadcast_buffers=False, whose worker restarted alone still rejoins); each
object is loaded when registered (entries matched by order and type), and then every registered
torch optimizer again, since a scheduler's constructor sets its optimizer's lr. The RNG
states are restored at the first training forward, where they were saved. The file is read with
weights_only=False: it is this job's own, and torch >= 2.6's default (tensors and plain containers
only) would refuse a registered object's state such as a NumPy random state. Errors: ConfigError
naming the file when it is missing or unreadable, and at the first training forward when it holds
CUDA RNG states for another number of devices than this process sees; OrderError at the first
training forward when an entry saved was never registered (the resumed script must register what the
first run did).

At the first save, what a resume would silently restart is named on stderr, once: no torch optimizer
registered (the comm hook's, whose momentum or moments live in the script), or a registered
optimizer whose param_groups carry an LR scheduler's initial_lr while no scheduler is registered.
Random data augmentation that draws from torch's RNG while the batch of round R is made (before its
first training forward) is not restored: seed it from the round or epoch (docs/pytorch.md "Resume").
"""
import inspect
import os
import sys

import torch

from sketchps.errors import ConfigError, OrderError

KEEP = 3  # files kept per rank: the newest rounds a --resume may go back to


def file_name(rank, rounds_applied):
    return f"worker-{rank}-script-{rounds_applied:012d}.pt"


def _entry_name(obj):
    return type(obj).__name__


def _saved_state(obj):
    """obj.state_dict() without the object's own bound methods: torch 1.13's OneCycleLR keeps its
    anneal_func as one, which would pickle the scheduler and its optimizer (a DistributedOptimizer
    cannot be unpickled); loading leaves the attribute as the constructor made it."""
    state = obj.state_dict()
    if not isinstance(state, dict):
        return state
    return {k: v for k, v in state.items() if not (inspect.ismethod(v) and v.__self__ is obj)}


def _cuda_rng():
    """Every visible device's CUDA RNG state once the script has used CUDA, else None."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.get_rng_state_all()
    return None


def _set_cuda_rng(states, path):
    """Restores what _cuda_rng saved (nothing when it saved None)."""
    if states is None:
        return
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible != len(states):
        raise ConfigError(f"--resume: {path} holds the CUDA RNG state of {len(states)} device(s) but this process "
                          f"sees {visible}: dropout and random augmentation would not continue where the run "
                          "stopped (resume with the same CUDA_VISIBLE_DEVICES)")
    torch.cuda.set_rng_state_all(states)


class ScriptState:
    """One rank's script state: saves it at checkpoint rounds, restores it on a resume.

    module: the torch.nn.Module whose state_dict is saved; restore: "model", "buffers",
    "buffers-if-saved" (the buffers when the file exists; without it nothing is restored) or None
    (nothing to restore); first_round: the round the position starts at."""

    def __init__(self, job, rank, module, first_round, restore):
        self.dir = os.environ.get("SKETCHPS_STATE_DIR", "")
        self.every = int(job.checkpoint_every)
        self.last = int(job.total_rounds)
        self.rank = rank
        self.module = module
        self.objects = []
        self.saved = first_round  # the round (re)started at needs no file
        self.pending = None  # a resume's file content, until its first training forward
        self.saved_once = False  # whether a file was written (the first one warns: unsaved())
        if first_round > 0 and restore is not None:
            self.pending = self._read(first_round, required=restore != "buffers-if-saved")
            if self.pending is not None:
                self._load_module(self.pending, restore)
        self._prune(after=first_round)  # files of a trajectory the resume abandoned

    def register(self, *objects):
        """Saves these objects' state_dict with the job from now on; on a resume, loads theirs."""
        for obj in objects:
            if not (callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))):
                raise ConfigError(f"checkpoint: a {type(obj).__name__} has no state_dict/load_state_dict")
            self.objects.append(obj)
            if self.pending is not None:
                self._load_object(len(self.objects) - 1, obj)
        if self.pending is not None:
            for i, obj in enumerate(self.objects):  # last: a scheduler's constructor set their lr
                if isinstance(obj, torch.optim.Optimizer):
                    obj.load_state_dict(self.pending["objects"][i][1])

    def at_forward(self, round):
        """A training forward of `round` (the next round): restores the RNG of a resume's first
        round, or saves the state when `round` is a checkpoint round not yet saved."""
        if self.pending is not None:
            self._finish_restore()
        elif round > self.saved and round < self.last and self.every > 0 and round % self.every == 0 and self.dir:
            self.saved = round
            self._write(round)

    def _path(self, round):
        return os.path.join(self.dir, file_name(self.rank, round))

    def _read(self, round, required):
        path = self._path(round) if self.dir else file_name(self.rank, round)
        if not required and not (self.dir and os.path.exists(path)):
            return None
        if not self.dir or not os.path.exists(path):
            raise ConfigError(f"--resume: rank {self.rank} rejoins the job at round {round}, but its script's state "
                              f"of that round ({path}; SKETCHPS_STATE_DIR, which `sketchps run` sets) is missing: the "
                              "weights, the torch optimizer's state, the schedulers and the buffers would start over; "
                              "restart the job with another --out")
        try:
            return torch.load(path, weights_only=False)  # the job's own file (module docstring)
        except Exception as e:  # a truncated or foreign file
            raise ConfigError(f"--resume: {path}: not a script state file ({type(e).__name__}: {e})") from e

    def _load_module(self, saved, restore):
        state = saved["model"]
        if restore != "model":
            buffers = {n for n, _ in self.module.named_buffers()}
            state = {k: v for k, v in state.items() if k in buffers}
        self.module.load_state_dict(state, strict=restore == "model")

    def _load_object(self, i, obj):
        saved = self.pending["objects"]
        if i >= len(saved) or saved[i][0] != _entry_name(obj):
            was = saved[i][0] if i < len(saved) else "nothing"
            raise ConfigError(f"checkpoint: object {i} registered is a {_entry_name(obj)}, the run being resumed saved "
                              f"{was} there (register the same objects in the same order)")
        obj.load_state_dict(saved[i][1])

    def _finish_restore(self):
        saved, self.pending = self.pending, None
        if len(self.objects) < len(saved["objects"]):
            missing = [name for name, _ in saved["objects"][len(self.objects):]]
            raise OrderError(f"checkpoint: the run being resumed saved the state of {', '.join(missing)}, which this "
                             "script did not register before its first forward (checkpoint(...) right after making "
                             "them: they would start over)")
        torch.set_rng_state(saved["rng"])
        _set_cuda_rng(saved.get("cuda_rng"), self._path(saved["round"]))

    def unsaved(self):
        """What a resume would restart because it is not registered: a list of sentences."""
        optimizers = [o for o in self.objects if isinstance(o, torch.optim.Optimizer)]
        found = []
        if not optimizers:
            found.append("no torch optimizer was passed to checkpoint() (the comm hook's: state.checkpoint(opt)), so "
                         "its state (momentum, Adam's moments) would start over")
        scheduled = any("initial_lr" in g for o in optimizers for g in o.param_groups)
        if scheduled and not any(hasattr(o, "base_lrs") and hasattr(o, "last_epoch") for o in self.objects):
            found.append("an LR scheduler drives the optimizer (its param_groups have initial_lr) but none was passed "
                         "to checkpoint(), so the schedule would start over")
        return found

    def _write(self, round):
        if self.saved_once is False:
            self.saved_once = True
            for what in self.unsaved():
                print(f"sketchps: rank {self.rank}: warning: a --resume from this job's checkpoints would not be "
                      f"exact: {what} (docs/pytorch.md \"Resume\")", file=sys.stderr, flush=True)
        state = {"round": round, "rank": self.rank, "model": self.module.state_dict(),
                 "objects": [(_entry_name(o), _saved_state(o)) for o in self.objects], "rng": torch.get_rng_state(),
                 "cuda_rng": _cuda_rng()}
        path = self._path(round)
        os.makedirs(self.dir, exist_ok=True)
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
        self._prune()

    def _prune(self, after=None):
        """Removes this rank's files but the newest KEEP, or (after) those of rounds after `after`."""
        if not self.dir or not os.path.isdir(self.dir):
            return
        prefix = f"worker-{self.rank}-script-"
        mine = sorted(f for f in os.listdir(self.dir) if f.startswith(prefix) and f.endswith(".pt"))
        if after is not None:
            doomed = [f for f in mine if int(f[len(prefix):-3]) > after]
        else:
            doomed = mine[:-KEEP]
        for old in doomed:
            try:
                os.remove(os.path.join(self.dir, old))
            except OSError:
                pass
