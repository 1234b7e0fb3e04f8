"""The trained model of a parameter-server run as a PyTorch state_dict (what `sketchps export` runs).

    python3 -m sketchps.export RUN_DIR [--out RUN_DIR/model.pt]
    python3 -m sketchps.export --job job.yaml --checkpoints DIR --out model.pt [--checkpoint-key-file KEY]

Reads every shard's newest checkpoint (the servers' master copy, ps/export.h) and saves
{parameter name: tensor} with torch.save; `model.load_state_dict(torch.load(path))` loads it (with
strict=False when the model had frozen parameters, which the job does not train or hold). Checkpoints
written with a checkpoint key need it: --checkpoint-key-file, else env SKETCHPS_CHECKPOINT_KEY_FILE,
else RUN_DIR/checkpoint.key when it exists (`sketchps run` makes one)."""
import argparse
import collections
import math
import os
import sys

import torch

from sketchps import _core
from sketchps.errors import ConfigError, Error


def state_dict_from_checkpoints(job_path, checkpoints, key_file=""):
    """(rounds, state_dict) of the job's shards' newest checkpoints in `checkpoints` (key_file: the
    checkpoint key they were written with, "" for untagged checkpoints)."""
    job = _core.load_job(job_path)
    if job.mode != "ps":
        raise ConfigError("mode: decentralized jobs have no servers and no checkpoints; save the model from the "
                          "script (torch.save on rank 0)")
    if job.optimizer == "external":
        raise ConfigError("optimizer.name: external (a torch optimizer applied the updates): the servers hold the "
                          "last aggregated gradient, not weights; save the model from the script (torch.save on "
                          "rank 0)")
    rounds, layout, flat = _core.load_checkpoints(checkpoints, job.job_id, job.servers, key_file)
    state, offset = collections.OrderedDict(), 0
    for name, shape in layout:
        n = math.prod(shape)
        state[name] = flat[offset:offset + n].view(shape).clone()
        offset += n
    return rounds, state


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sketchps export", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", help="a run directory of `sketchps run` (its job.yaml, checkpoints/)")
    parser.add_argument("--job", help="the job spec (default RUN_DIR/job.yaml)")
    parser.add_argument("--checkpoints", help="the servers' checkpoint folder (default RUN_DIR/checkpoints)")
    parser.add_argument("--out", help="the state_dict file (default RUN_DIR/model.pt)")
    parser.add_argument("--checkpoint-key-file", default=os.environ.get("SKETCHPS_CHECKPOINT_KEY_FILE", ""),
                        help="the key the checkpoints were written with (env SKETCHPS_CHECKPOINT_KEY_FILE; "
                        "default RUN_DIR/checkpoint.key when it exists)")
    args = parser.parse_args(argv)
    if not args.run_dir and not (args.job and args.checkpoints and args.out):
        parser.error("give RUN_DIR, or --job, --checkpoints and --out")
    job = args.job or os.path.join(args.run_dir, "job.yaml")
    checkpoints = args.checkpoints or os.path.join(args.run_dir, "checkpoints")
    out = args.out or os.path.join(args.run_dir, "model.pt")
    key_file = args.checkpoint_key_file
    if not key_file and args.run_dir and os.path.exists(os.path.join(args.run_dir, "checkpoint.key")):
        key_file = os.path.join(args.run_dir, "checkpoint.key")
    try:
        rounds, state = state_dict_from_checkpoints(job, checkpoints, key_file)
    except Error as e:
        print(f"sketchps export: {e}", file=sys.stderr)
        return 2
    torch.save(state, out)
    count = sum(t.numel() for t in state.values())
    print(f"sketchps export: {len(state)} tensors ({count} parameters) after round {rounds} -> {out}", file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
