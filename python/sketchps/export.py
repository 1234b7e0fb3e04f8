"""The trained model of a parameter-server run as a PyTorch state_dict (what `sketchps export` runs).

    python3 -m sketchps.export RUN_DIR [--out RUN_DIR/model.pt]
    python3 -m sketchps.export --job job.yaml --checkpoints DIR --out model.pt [--checkpoint-key-file KEY]

Reads every shard's newest checkpoint (the servers' master copy, ps/export.h) and saves
{parameter name: tensor} with torch.save; `model.load_state_dict(torch.load(path))` loads it (with
strict=False when the model had frozen parameters, which the job does not train or hold). Checkpoints
written with a checkpoint key need it: --checkpoint-key-file, else env SKETCHPS_CHECKPOINT_KEY_FILE,
else RUN_DIR/checkpoint.key (`sketchps run` makes it), else checkpoint.key beside the checkpoints folder,
when it exists. With RUN_DIR the checkpoints are the job's checkpoint.dir when it sets one, else
RUN_DIR/checkpoints, as `sketchps run` placed them."""
import argparse
import collections
import math
import os
import sys

import torch

from sketchps import _core, data
from sketchps.errors import ConfigError, Error


def checkpoint_key_file(checkpoints, key_file=None, run_dir=None):
    """The key file of the checkpoints in `checkpoints`: `key_file` when given ("" : none, untagged
    checkpoints), else env SKETCHPS_CHECKPOINT_KEY_FILE, else run_dir's checkpoint.key, else
    checkpoint.key beside the folder (a `sketchps run` directory: RUN_DIR/checkpoints and
    RUN_DIR/checkpoint.key), the first that exists, else ""."""
    if key_file is not None:
        return key_file
    if os.environ.get("SKETCHPS_CHECKPOINT_KEY_FILE"):
        return os.environ["SKETCHPS_CHECKPOINT_KEY_FILE"]
    for folder in ([run_dir] if run_dir else []) + [os.path.dirname(os.path.abspath(checkpoints))]:
        if os.path.exists(os.path.join(folder, "checkpoint.key")):
            return os.path.join(folder, "checkpoint.key")
    return ""


def state_dict_from_checkpoints(job_path, checkpoints, key_file=None, run_dir=None):
    """(rounds, state_dict) of the job's shards' newest checkpoints in `checkpoints` (None: the job's
    checkpoint.dir, else run_dir/checkpoints; key_file: the checkpoint key they were written with;
    None: checkpoint_key_file's rule)."""
    job = _core.load_job(job_path)
    if checkpoints is None:
        checkpoints = job.checkpoint_dir or os.path.join(run_dir, "checkpoints")
    if job.mode != "ps":
        raise ConfigError("mode: decentralized jobs have no servers and no checkpoints; save the model from the "
                          "script (torch.save on rank 0)")
    if job.optimizer == "external":
        raise ConfigError("optimizer.name: external (a torch optimizer applied the updates): the servers hold the "
                          "last aggregated gradient, not weights; save the model from the script (torch.save on "
                          "rank 0)")
    key = checkpoint_key_file(checkpoints, key_file, run_dir)
    rounds, layout, weights = _core.load_checkpoints(checkpoints, job.job_id, job.servers, key)
    flat = data.tensor_of_bytes(weights, torch.float32, (len(weights) // 4,))
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
    parser.add_argument("--checkpoint-key-file", default=None,
                        help="the key the checkpoints were written with (env SKETCHPS_CHECKPOINT_KEY_FILE; "
                        "default: checkpoint.key beside the checkpoints folder, RUN_DIR/checkpoint.key, when it exists)")
    args = parser.parse_args(argv)
    if not args.run_dir and not (args.job and args.checkpoints and args.out):
        parser.error("give RUN_DIR, or --job, --checkpoints and --out")
    job = args.job or os.path.join(args.run_dir, "job.yaml")
    out = args.out or os.path.join(args.run_dir, "model.pt")
    try:
        rounds, state = state_dict_from_checkpoints(job, args.checkpoints, args.checkpoint_key_file, args.run_dir)
    except Error as e:
        print(f"sketchps export: {e}", file=sys.stderr)
        return 2
    try:
        torch.save(state, out)
    except (OSError, RuntimeError) as e:  # torch.save names an unwritable path in a RuntimeError
        print(f"sketchps export: --out {out}: cannot write it ({e})", file=sys.stderr)
        return 2
    count = sum(t.numel() for t in state.values())
    print(f"sketchps export: {len(state)} tensors ({count} parameters) after round {rounds} -> {out}", file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
