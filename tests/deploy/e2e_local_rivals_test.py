#!/usr/bin/env python3
"""Tests of issue 35's local-step rivals in bench/e2e (no namespaces or daemons): local_rivals.py's
DiLoCo outer step against a hand computation and its post-local SGD synchronisation points against
torch's PeriodicModelAverager; run.py's planning of the rivals and of sketchps' local steps on each
workload (what it accepts and what it refuses, naming the flag; the local-step job's round-counted
keys as exchanges); and a smoke of the workload scripts with each rival: 2 ranks over gloo on the CPU,
a few rounds on a cut of Fashion-MNIST, checking the records, the evaluated rounds and that every
rank ends with the same weights (ddp_train.py, the cnn's script, too). unittest, also under pytest;
exit 1 when a test fails.
"""
from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
E2E = REPO / "bench" / "e2e"
sys.path.insert(0, str(E2E))
sys.path.insert(0, str(REPO / "deploy" / "emulate"))
import job as jobspec  # noqa: E402
import local_rivals  # noqa: E402
import run  # noqa: E402
import systems  # noqa: E402
import torch  # noqa: E402

DATA = Path("/usr/share/datasets/fashion-mnist")


class OuterStepTest(unittest.TestCase):
    def test_nesterov_outer_step_by_hand(self):
        anchor, buf = [torch.tensor([1.0, -2.0])], [torch.zeros(2)]
        for g in ([0.5, 1.0], [0.25, -1.0]):
            local_rivals.nesterov_outer_step(anchor, [torch.tensor(g)], buf, 0.7, 0.9)
        # step 1: buf = g1 = (0.5, 1); anchor -= 0.7 (g1 + 0.9 buf) = 0.7 (0.95, 1.9) -> (0.335, -3.33)
        # step 2: buf = 0.9 (0.5, 1) + (0.25, -1) = (0.7, -0.1); anchor -= 0.7 ((0.25, -1) + 0.9 (0.7, -0.1))
        #         = 0.7 (0.88, -1.09) = (0.616, -0.763) -> (-0.281, -2.567)
        self.assertEqual([round(v, 5) for v in buf[0].tolist()], [0.7, -0.1])
        self.assertEqual([round(v, 5) for v in anchor[0].tolist()], [-0.281, -2.567])
        reference = torch.nn.Parameter(torch.tensor([1.0, -2.0]))  # torch's Nesterov SGD agrees
        opt = torch.optim.SGD([reference], lr=0.7, momentum=0.9, nesterov=True)
        for g in ([0.5, 1.0], [0.25, -1.0]):
            reference.grad = torch.tensor(g)
            opt.step()
        self.assertTrue(torch.allclose(reference.detach(), anchor[0]))

    def test_diloco_period_by_hand(self):
        """Two periods of H = 2 plain SGD steps (lr 0.5, no momentum) on loss w . x with x = (1, 2): each
        step takes 0.5 x off w. The other rank's pseudo-gradient is given: the mean is what the outer
        step sees; the model continues from the outer step's weights; the inner state persists."""
        model = torch.nn.Linear(2, 1, bias=False)
        with torch.no_grad():
            model.weight.copy_(torch.tensor([[1.0, -2.0]]))
        other = torch.tensor([3.0, 1.0])  # the other rank's pseudo-gradient
        seen = []

        def reduce_mean(flat):
            seen.append(flat.clone())
            return (flat + other) / 2

        inner = torch.optim.SGD(model.parameters(), lr=0.5)
        rival = local_rivals.DiLoCo(model, inner, period=2, lr=0.7, momentum=0.9, reduce_mean=reduce_mean)
        x = torch.tensor([[1.0, 2.0]])
        for r in range(4):
            inner.zero_grad()
            model(x).sum().backward()
            inner.step()
            rival.end_step(r, 4)
            self.assertEqual(rival.synced_round, 1 if r in (1, 2) else (3 if r == 3 else -1), f"round {r}")
        # period 1: w = (1, -2) -> (0, -4): own pseudo-gradient (1, 2), mean g1 = (2, 1.5);
        #   buf = (2, 1.5); w = (1, -2) - 0.7 ((2, 1.5) + 0.9 (2, 1.5)) = (1, -2) - (2.66, 1.995) = (-1.66, -3.995)
        # period 2: from (-1.66, -3.995) two steps -> (-2.66, -5.995): own (1, 2), mean g2 = (2, 1.5);
        #   buf = 0.9 (2, 1.5) + (2, 1.5) = (3.8, 2.85); w -= 0.7 ((2, 1.5) + 0.9 (3.8, 2.85))
        #   = 0.7 (5.42, 4.065) = (3.794, 2.8455) -> (-5.454, -6.8405)
        self.assertEqual([[round(v, 5) for v in s.tolist()] for s in seen], [[1.0, 2.0], [1.0, 2.0]])
        self.assertEqual([round(v, 4) for v in model.weight.detach().view(-1).tolist()], [-5.454, -6.8405])
        self.assertEqual([round(v, 4) for v in rival.eval_module().weight.detach().view(-1).tolist()], [-5.454, -6.8405])

    def test_diloco_average_with_inner_reset_equals_a_fresh_optimizer_per_period(self):
        """Outer lr 1 and momentum 0 with reset_inner: each period is H steps of a freshly built SGD
        with momentum from the mean weights (the reference, written out here); keeping the state
        instead ends elsewhere (so the test sees the reset)."""
        x, other = torch.tensor([[1.0, 2.0]]), torch.tensor([0.5, -1.0])
        w0 = torch.tensor([[1.0, -2.0]])

        def rival_weights(reset):
            model = torch.nn.Linear(2, 1, bias=False)
            with torch.no_grad():
                model.weight.copy_(w0)
            inner = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            rival = local_rivals.DiLoCo(model, inner, period=3, lr=1.0, momentum=0.0,
                                        reduce_mean=lambda flat: (flat + other) / 2, reset_inner=reset)
            for r in range(6):
                inner.zero_grad()
                (model(x) ** 2).sum().backward()
                inner.step()
                rival.end_step(r, 6)
            return model.weight.detach().view(-1)

        w = w0.view(-1).clone()
        for _ in range(2):  # the reference: a fresh momentum buffer every period, then the mean
            start, v = w.clone(), torch.zeros(2)
            for h in range(3):
                g = 2 * float(w @ x.view(-1)) * x.view(-1)
                v = g.clone() if h == 0 else 0.9 * v + g
                w = w - 0.1 * v
            w = start - ((start - w) + other) / 2
        self.assertTrue(torch.allclose(rival_weights(True), w, atol=1e-6), f"{rival_weights(True)} against {w}")
        self.assertFalse(torch.allclose(rival_weights(False), w, atol=1e-3))
        with self.assertRaisesRegex(ValueError, "inner-state reset is DiLoCo's"):
            local_rivals.make("postlocal", torch.nn.Linear(1, 1), lambda m: None, 4, reset_inner=True)

    def test_periods_end_every_h_rounds_and_at_the_last(self):
        self.assertEqual([r for r in range(10) if local_rivals.period_ends(r, 10, 4)], [3, 7, 9])
        with self.assertRaisesRegex(ValueError, "local rival 'powersgd'"):
            local_rivals.make("powersgd", torch.nn.Linear(1, 1), lambda m: None, 4)

    def test_postlocal_sync_points_are_torchs(self):
        """postlocal_synced() against PeriodicModelAverager itself (its averaging call recorded)."""
        from torch.distributed.algorithms.model_averaging import averagers, utils
        calls = []
        saved = utils.average_parameters_or_parameter_groups
        utils.average_parameters_or_parameter_groups = lambda params, group: calls.append(averager.step)
        try:
            averager = averagers.PeriodicModelAverager(period=8, warmup_steps=10, process_group=object())
            for _ in range(40):
                averager.average_parameters([])
        finally:
            utils.average_parameters_or_parameter_groups = saved
        self.assertEqual(calls, [10, 18, 26, 34])
        ours = [r for r in range(40) if local_rivals.postlocal_synced(r, 10, 8)]
        self.assertEqual(ours, list(range(10)) + calls)  # the warm-up's all-reduced gradients, then the averages


def args_of(*argv):
    return run.parse_args(["--bin-dir", "/nonexistent", "--dry-run", *argv])


class PlanTest(unittest.TestCase):
    """What run.py accepts and refuses (--dry-run: no root, no binaries needed for DDP-only plans)."""

    def plan(self, *argv):
        bandwidths, workloads, planned, jobs, *_ = run.check_args(args_of(*argv))
        return run.dry_run(planned, jobs, bandwidths)

    def test_local_rivals_on_every_workload(self):
        lines = self.plan("--workload", "cnn,vgg,vit", "--schemes", "", "--ddp", "dense,postlocal8,diloco4")
        self.assertEqual(lines, [
            "cnn 100mbit | DDP dense | 468 rounds | --compression none",
            "cnn 100mbit | DDP post-local SGD 8 | 468 rounds | --compression postlocal --period 8",
            "cnn 100mbit | DDP DiLoCo H4 | 468 rounds | --compression diloco --period 4",
            "vgg 100mbit | DDP dense | 200 rounds | --hook none",
            "vgg 100mbit | DDP post-local SGD 8 | 200 rounds | --hook postlocal --period 8",
            "vgg 100mbit | DDP DiLoCo H4 | 200 rounds | --hook diloco --period 4",
            "vit 100mbit | DDP dense | 320 rounds | --hook none",
            "vit 100mbit | DDP post-local SGD 8 | 320 rounds | --hook postlocal --period 8",
            "vit 100mbit | DDP DiLoCo H4 | 320 rounds | --hook diloco --period 4"])

    def test_diloco_ablations(self):
        lines = self.plan("--workload", "vit", "--schemes", "", "--ddp", "diloco4avg,diloco4avgreset,diloco8reset")
        self.assertEqual(lines, [
            "vit 100mbit | DDP DiLoCo H4 average | 320 rounds | --hook diloco --period 4 --outer-lr 1 --outer-momentum 0",
            "vit 100mbit | DDP DiLoCo H4 average inner reset | 320 rounds | --hook diloco --period 4 --outer-lr 1 "
            "--outer-momentum 0 --inner-reset",
            "vit 100mbit | DDP DiLoCo H8 inner reset | 320 rounds | --hook diloco --period 8 --inner-reset"])

    def test_sketchps_local_steps_on_vgg_with_the_cpp_worker(self):
        planned = run.plan_systems(args_of("--workload", "vgg", "--cpp-worker", "--schemes", "topk,topk/ls4",
                                           "--ddp", "none"))
        self.assertEqual([(s.name, s.worker, systems.runs_on(s, "vgg"), systems.runs_on(s, "cnn")) for s in planned],
                         [("sketchps topk", "script", True, True),
                          ("sketchps topk H4 nesterov", "script", True, True),  # DistributedOptimizer's local steps
                          ("sketchps topk C++ worker", "cpp", True, False),
                          ("sketchps topk H4 nesterov C++ worker", "cpp", True, False)])
        self.assertTrue(systems.runs_on(planned[1], "vit"))  # vit has no C++ model: the script's package runs them
        vgg = jobspec.make_job([], "vgg")
        ls4 = planned[3]
        self.assertEqual(systems.own_overrides(ls4, vgg),
                         ["train.local_steps=4", "train.outer_optimizer.name=nesterov", "train.rounds=50",
                          "train.eval_every_rounds=6", "optimizer.warmup=2.5 rounds"])
        self.assertEqual(run.system_rounds(vgg, ls4), 50)
        ctx = systems.Context(net=None, bandwidth="none", server_bin="", worker_bin="", sketchps_bin="", ddp_script="",
                              job_path=Path("/vgg.yaml"), overrides=[], ddp_args=[], workers=4, servers=2, rounds=50,
                              timeout=1, workload="vgg", job=vgg)
        self.assertEqual(systems.job_flags(ls4, ctx)["overrides"][:3], ["scheme.name=topk", "mode=ps", "model=vgg"])
        self.assertEqual(systems.job_flags(ls4, ctx)["overrides"][3:], systems.own_overrides(ls4, vgg))

    def test_round_counted_keys_become_exchanges(self):
        cnn = jobspec.make_job([], "cnn")  # one epoch: the rounds follow train.local_steps already
        self.assertEqual(jobspec.local_step_overrides(cnn, 8), ["train.eval_every_rounds=12"])
        self.assertEqual(jobspec.local_step_overrides(cnn, 1), [])
        job = jobspec.make_job(["train.rounds=30", "optimizer.warmup=[6 rounds, 1 epoch]",
                                "scheme.dense_warmup=10%"], "vgg")
        self.assertEqual(jobspec.local_step_overrides(job, 4), ["train.rounds=8", "train.eval_every_rounds=6",
                                                                 "optimizer.warmup=[1.5 rounds, 1 epoch]"])

    def test_refusals_name_the_flag(self):
        for argv, message in [
                (["--workload", "vgg", "--cpp-worker", "--mode", "ps,decentralized", "--schemes", "topk/ls4"],
                 "in ps mode only, not --mode decentralized"),
                (["--workload", "vgg", "--ddp", "diloco0"], "--ddp: 'diloco0'")]:
            with self.assertRaisesRegex(run.UsageError, message, msg=" ".join(argv)):
                run.check_args(args_of(*argv))
        # the same scheme where it runs: the cnn's daemons (stand-in binaries: a dry run checks they exist)
        with tempfile.TemporaryDirectory() as bin_dir:
            for name in ("sketchps-server", "sketchps-worker", "sketchps"):
                (Path(bin_dir) / name).write_text("#!/bin/sh\n")
                (Path(bin_dir) / name).chmod(0o755)
            bandwidths, _, planned, jobs, *_ = run.check_args(run.parse_args(
                ["--bin-dir", bin_dir, "--dry-run", "--workload", "cnn", "--schemes", "topk/ls4", "--ddp", "none"]))
        self.assertEqual(run.dry_run(planned, jobs, bandwidths),
                         ["cnn 100mbit | sketchps topk H4 nesterov | 117 rounds (117 exchanges x 4 steps) | "
                          "sketchps-worker: scheme.name=topk mode=ps train.local_steps=4 "
                          "train.outer_optimizer.name=nesterov train.eval_every_rounds=25"])


def cut_fashion_mnist(folder: Path, train: int, test: int) -> None:
    """The first images and labels of each split, as IDX files (gzip)."""
    for split, n in (("train", train), ("t10k", test)):
        for kind, dims, item in (("images", 3, 28 * 28), ("labels", 1, 1)):
            raw = gzip.decompress((DATA / f"{split}-{kind}-idx{dims}-ubyte.gz").read_bytes())
            header = bytearray(raw[:4 + 4 * dims])
            header[4:8] = n.to_bytes(4, "big")
            (folder / f"{split}-{kind}-idx{dims}-ubyte.gz").write_bytes(
                gzip.compress(bytes(header) + raw[4 + 4 * dims:4 + 4 * dims + n * item]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(DATA.is_dir(), f"no Fashion-MNIST in {DATA}")
class WorkloadSmokeTest(unittest.TestCase):
    """Each rival through a workload script: 2 ranks over gloo (loopback), 6 rounds, batch 4."""

    ROUNDS = 6

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="sketchps-local-rivals-")
        cls.data = Path(cls.tmp.name) / "data"
        cls.data.mkdir()
        cut_fashion_mnist(cls.data, 64, 40)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def train(self, workload: str, *hook: str) -> list[list[dict]]:
        """Both ranks' records; fails the test with the logs when a rank fails."""
        folder = Path(tempfile.mkdtemp(dir=self.tmp.name))
        port = free_port()
        sets = ["workers=2", f"data.path={self.data}", "data.batch_size=4", "data.train_samples=64",
                f"train.rounds={self.ROUNDS}", "train.eval_every_rounds=2", "train.eval_samples=20"]
        procs = []
        for rank in range(2):
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                   "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
            if workload == "cnn":  # ddp_train.py: the same job in its options
                argv = ["/usr/bin/python3", str(E2E / "ddp_train.py"), "--compression", *hook, "--rounds",
                        str(self.ROUNDS), "--batch", "4", "--train-samples", "64", "--data", str(self.data),
                        "--eval-every", "2", "--eval-samples", "20"]
            else:
                argv = ["/usr/bin/python3", str(E2E / f"workload_{workload}.py"), "--backend", "ddp", "--hook", *hook,
                        *[a for kv in sets for a in ("--set", kv)]]
            argv += ["--metrics-out", str(folder / f"rank-{rank}.jsonl")]
            procs.append(subprocess.Popen(argv, env=env, stdout=open(folder / f"rank-{rank}.log", "w"),
                                          stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 240
        for p in procs:
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
        logs = "\n".join((folder / f"rank-{r}.log").read_text() for r in range(2))
        self.assertEqual([p.returncode for p in procs], [0, 0], logs)
        return [[json.loads(line) for line in (folder / f"rank-{r}.jsonl").read_text().splitlines()] for r in range(2)]

    def check(self, records, evaluated_rounds):
        for rank in records:
            self.assertEqual([x["round"] for x in rank if "round" in x], list(range(self.ROUNDS)))
            self.assertEqual([x["test_round"] for x in rank if "test_accuracy" in x and "round" in x], evaluated_rounds)
            final = [x for x in rank if x.get("event") == "final_eval"]
            self.assertEqual((len(final), final[0]["test_samples"]), (1, 40))
        self.assertEqual(records[0][-1]["weights"], records[1][-1]["weights"])  # every rank ends alike

    def test_vgg_postlocal(self):
        # warm-up 2 rounds (0, 1), then averages after rounds 2 and 4; evaluations after rounds 1 and 3
        self.check(self.train("vgg", "postlocal", "--period", "2", "--local-warmup", "2"), [1, 2])

    def test_vgg_diloco(self):
        # outer steps after rounds 2 and 5; evaluations after rounds 1 (the initial weights) and 3
        self.check(self.train("vgg", "diloco", "--period", "3"), [-1, 2])

    def test_cnn_postlocal_through_ddp_train(self):
        # warm-up 1 round (0), then averages after rounds 1 and 4; evaluations after rounds 1 and 3
        self.check(self.train("cnn", "postlocal", "--period", "3", "--local-warmup", "1"), [1, 1])

    def test_vit_diloco_with_adamw_inside(self):
        # the ablation's flags (plain averaging, AdamW's state cleared at each outer step) through the script
        self.check(self.train("vit", "diloco", "--period", "2", "--outer-lr", "1", "--outer-momentum", "0",
                              "--inner-reset"), [1, 3])


if __name__ == "__main__":
    unittest.main(verbosity=1)
