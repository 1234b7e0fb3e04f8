#!/usr/bin/env python3
"""Unit tests of the end-to-end benchmark's own logic (bench/e2e), no namespaces or daemons needed:
the jobs and their DDP mirror, the figures derived from synthetic metrics files (time to accuracy
with the evaluation time taken out, a target never reached, the busiest link), the targets of every
workload, the table and the generated doc block, option checks, ddp_train.py's sketchps-compatible
data order and initialisation, and the workload scripts' shared parts: the same initial weights on
two builds, the optimizers, and the learning-rate schedule and data order against the sketchps
package's (a one-worker decentralized job joined in-process; the package is found on PYTHONPATH,
else the newest build/*/python, else those tests are skipped, saying so). Exit 1 when any test fails
(unittest).
"""
from __future__ import annotations

import json
import math
import os
import socket
import sys
import tempfile
import unittest
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench/e2e"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO / "launch/py"))
import ddp_train  # noqa: E402
import figures  # noqa: E402
import job as jobspec  # noqa: E402
import launcher  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402
import systems  # noqa: E402
import targets  # noqa: E402
import workload_common as wc  # noqa: E402
import workload_vgg  # noqa: E402
import workload_vit  # noqa: E402


def find_package() -> str | None:
    """The folder holding the sketchps package: PYTHONPATH's, else the newest build/*/python."""
    for folder in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if folder and list(Path(folder).glob("sketchps/_core*.so")):
            return folder
    built = sorted(REPO.glob("build/*/python/sketchps/_core*.so"), key=lambda p: p.stat().st_mtime)
    return str(built[-1].parents[1]) if built else None


def write_jsonl(folder: Path, name: str, records: list[dict]) -> str:
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def proc(name, role, start, end, cpu):
    return {"name": name, "role": role, "start": start, "end": end, "exit": 0, "cpu_s": cpu}


class JobTest(unittest.TestCase):
    def test_default_rounds_and_overrides(self):
        self.assertEqual(jobspec.total_rounds(jobspec.make_job([])), 468)
        self.assertEqual(jobspec.total_rounds(jobspec.make_job(["train.rounds=12"])), 12)
        self.assertEqual(jobspec.total_rounds(jobspec.make_job(["workers=2", "train.epochs=0.5"])), 469)
        self.assertEqual(jobspec.make_job(["scheme.topk.x=1"])["scheme"]["topk"], {"x": 1})

    def test_bad_overrides_name_the_key(self):
        with self.assertRaisesRegex(jobspec.JobError, "expected key.path=value"):
            jobspec.make_job(["train.rounds"])
        with self.assertRaisesRegex(jobspec.JobError, "'model' is not a mapping"):
            jobspec.make_job(["model.x=1"])

    def test_ddp_mirror(self):
        args = jobspec.ddp_args(jobspec.make_job(["train.eval_every_rounds=6", "optimizer.lr=0.1"]))
        pairs = dict(zip(args[::2], args[1::2]))
        self.assertEqual((pairs["--rounds"], pairs["--eval-every"], pairs["--lr"], pairs["--batch"]), ("468", "6", "0.1", "32"))
        self.assertEqual(pairs["--eval-samples"], "2000")  # the default job's, as job/job_spec.cc has it
        pairs = jobspec.ddp_args(jobspec.make_job(["train.eval_samples=500"]))
        self.assertIn("500", pairs)
        with self.assertRaisesRegex(jobspec.JobError, "model"):
            jobspec.ddp_args(jobspec.make_job(["model=mlp"]))
        with self.assertRaisesRegex(jobspec.JobError, "optimizer.nesterov"):
            jobspec.ddp_args(jobspec.make_job(["optimizer.nesterov=true"]))


class FiguresTest(unittest.TestCase):
    """A sketchps-like run (no round_start: derived) and a DDP-like one (final_eval event)."""

    def sketchps_run(self, folder: Path) -> dict:
        base = {"compute_s": 0.5, "compress_s": 0.1, "communicate_s": 0.4, "bytes_up": 100, "bytes_down": 50,
                "dense_bytes": 1000}
        r0 = [{**base, "round": 0, "time": 1010.0}, {**base, "round": 1, "time": 1011.0},
              {**base, "round": 2, "time": 1012.0, "test_accuracy": 0.5, "test_round": 0},
              {**base, "round": 3, "time": 1013.0, "test_accuracy": 0.7, "test_round": 3}]
        r1 = [{**base, "round": i, "time": 1010.0 + i, "bytes_up": 300, "bytes_down": 150} for i in range(4)]
        procs = [proc("server-0", "server", 1000.0, 1030.0, 2.0), proc("worker-0", "worker", 1001.0, 1020.0, 10.0),
                 proc("worker-1", "worker", 1001.0, 1014.0, 5.0)]
        return {"launch": 1000.0, "procs": procs, "expected_rounds": 4,
                "metrics": {"0": write_jsonl(folder, "w0.jsonl", r0), "1": write_jsonl(folder, "w1.jsonl", r1)}}

    def test_sketchps_figures(self):
        with tempfile.TemporaryDirectory() as tmp:
            f = figures.derive(self.sketchps_run(Path(tmp)))
        self.assertAlmostEqual(f["startup_s"], 9.0)       # round_start = 1010 - 1.0
        self.assertAlmostEqual(f["train_loop_s"], 4.0)    # 1009 -> 1013
        self.assertAlmostEqual(f["final_eval_s"], 7.0)    # 1013 -> last worker exit 1020
        self.assertAlmostEqual(f["wall_s"], 30.0)
        self.assertAlmostEqual(f["cpu_s"], 17.0)
        self.assertEqual(f["cpu_by_role_s"], {"server": 2.0, "worker": 15.0})
        self.assertEqual((f["accuracy"], f["rounds"], f["eval_in_loop_s"]), (0.7, 4, 0.0))
        self.assertAlmostEqual(f["wire_up"], 200.0)
        self.assertAlmostEqual(f["ratio_down"], 10.0)
        self.assertEqual([(p["t"], p["t_train"], p["accuracy"]) for p in f["curve"]], [(10.0, 1.0, 0.5), (13.0, 4.0, 0.7)])

    def test_ddp_figures_and_final_eval_event(self):
        with tempfile.TemporaryDirectory() as tmp:
            r0 = [{"round": 0, "round_start": 1003.0, "time": 1004.0, "loss": 2.0},
                  {"round": 1, "round_start": 1004.0, "time": 1006.0, "loss": 1.0, "test_accuracy": 0.4, "test_round": 1,
                   "eval_s": 0.75},
                  {"event": "final_eval", "start": 1006.0, "end": 1008.0, "test_accuracy": 0.8, "test_round": 1}]
            run_ = {"launch": 1000.0, "procs": [proc("worker-0", "worker", 1000.0, 1009.0, 4.0)],
                    "metrics": {"0": write_jsonl(Path(tmp), "w0.jsonl", r0)}}
            f = figures.derive(run_)
        self.assertEqual((f["startup_s"], f["train_loop_s"], f["final_eval_s"]), (3.0, 3.0, 3.0))
        self.assertEqual((f["accuracy"], f["eval_in_loop_s"]), (0.8, 0.75))
        self.assertNotIn("wire_up", f)
        self.assertEqual(f["curve"], [{"t": 6.0, "t_train": 3.0, "accuracy": 0.8, "round": 1}])  # the final eval wins

    def test_final_eval_without_round_is_the_last_round(self):
        rank0 = [{"round": 0, "time": 5.0}, {"round": 1, "time": 7.0}, {"event": "final_eval", "test_accuracy": 0.6}]
        self.assertEqual(figures.accuracy_curve(rank0, 1.0), [{"t": 6.0, "t_train": 2.0, "accuracy": 0.6, "round": 1}])

    def test_accuracy_from_another_rank(self):
        acc, source = figures.final_accuracy({0: [{"round": 0}], 2: [{"round": 0, "test_accuracy": 0.3, "test_round": 0}]})
        self.assertEqual((acc, source), (0.3, "last test_accuracy of any rank"))
        self.assertEqual(figures.final_accuracy({0: [{"round": 0}]})[0], None)

    def test_broken_metrics_name_file_and_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "w0.jsonl"
            path.write_text('{"round": 0, "time": 1}\n{"round": 1, \n')
            with self.assertRaisesRegex(figures.MetricsError, r"w0.jsonl:2: not JSON"):
                figures.read_jsonl(path)
            path.write_text('{"event": "final_eval"}\n')
            with self.assertRaisesRegex(figures.MetricsError, "no round records"):
                figures.derive({"launch": 0, "procs": [], "metrics": {"0": str(path)}})


class TimeToAccuracyTest(unittest.TestCase):
    """Rank 0 of a run: rounds of 1 s from t=100, evaluations after rounds 1 and 3 of 2 s each (the next
    round starts after them), the final one (all test images) after round 5."""

    RANK0 = [{"round": 0, "round_start": 100.0, "time": 101.0},
             {"round": 1, "round_start": 101.0, "time": 102.0, "test_accuracy": 0.6, "test_round": 1, "eval_s": 2.0},
             {"round": 2, "round_start": 104.0, "time": 105.0},
             {"round": 3, "round_start": 105.0, "time": 106.0, "test_accuracy": 0.82, "test_round": 3, "eval_s": 2.0},
             {"round": 4, "round_start": 108.0, "time": 109.0},
             {"round": 5, "round_start": 109.0, "time": 110.0, "test_accuracy": 0.84, "test_round": 5, "eval_s": 3.0,
              "final": True}]

    def test_evaluation_time_is_subtracted(self):
        curve = figures.accuracy_curve(self.RANK0, 90.0)
        self.assertEqual([(p["round"], p["t"], p["t_train"]) for p in curve], [(1, 12.0, 2.0), (3, 16.0, 4.0), (5, 20.0, 6.0)])
        self.assertEqual(figures.time_to_accuracy(curve, 0.8), (4.0, 3))    # 106 - 100 - the 2 s of round 1's
        self.assertEqual(figures.time_to_accuracy(curve, 0.84), (6.0, 5))   # reached at the final evaluation
        self.assertEqual(figures.time_to_accuracy(curve, 0.6), (2.0, 1))

    def test_target_never_reached(self):
        curve = figures.accuracy_curve(self.RANK0, 90.0)
        self.assertEqual(figures.time_to_accuracy(curve, 0.85), (None, None))
        self.assertEqual(figures.time_to_accuracy(curve, None), (None, None))

    def test_final_evaluation_is_not_in_the_loop_evaluations(self):
        with tempfile.TemporaryDirectory() as tmp:
            run_ = {"launch": 90.0, "procs": [proc("worker-0", "worker", 90.0, 112.0, 1.0)],
                    "metrics": {"0": write_jsonl(Path(tmp), "w0.jsonl", self.RANK0)}}
            f = figures.derive(run_)
        self.assertEqual((f["eval_in_loop_s"], f["train_loop_s"], f["accuracy"]), (4.0, 10.0, 0.84))

    def test_target_rule(self):
        def r(system, bw, acc, workload="vgg"):
            return {**row(system, bw, 10.0, acc=acc), "workload": workload}
        rows = [r("DDP dense", "1gbit", 0.86), r("DDP dense", "100mbit", 0.85), r("sketchps topk", "1gbit", 0.80)]
        self.assertAlmostEqual(figures.accuracy_target(rows, "vgg", "1gbit", 0.5)[0], 0.84)   # 100mbit's wins
        rows = rows[:1] + rows[2:]
        self.assertAlmostEqual(figures.accuracy_target(rows, "vgg", "1gbit", 0.5)[0], 0.85)   # else the same bandwidth's
        target, source = figures.accuracy_target(rows, "vit", "1gbit", 0.79)                  # else the stated one
        self.assertEqual((target, source), (0.79, "the workload's stated target (no DDP dense run)"))

    def test_rows_get_their_time_to_accuracy(self):
        rows = [{**row("DDP dense", "100mbit", 10.0, acc=0.83), "workload": "vgg"},
                {**row("sketchps topk", "100mbit", 5.0, acc=0.81), "workload": "vgg"}]
        rows[0]["figures"]["curve"] = [{"round": 9, "t_train": 50.0, "accuracy": 0.83}]
        rows[1]["figures"]["curve"] = [{"round": 4, "t_train": 9.0, "accuracy": 0.819},
                                       {"round": 9, "t_train": 20.0, "accuracy": 0.825}]
        figures.add_time_to_accuracy(rows, {})
        self.assertEqual([(r["figures"]["tta_s"], r["figures"]["tta_round"]) for r in rows], [(50.0, 9), (20.0, 9)])
        cells = report.row_cells(rows[1], rows)
        self.assertEqual(cells[report.COLUMNS.index("time to accuracy s")], "20.0 (round 10)")
        self.assertEqual(cells[report.COLUMNS.index("TTA / DDP dense")], "0.40")
        self.assertIn("vgg 100mbit: target 82.00% (DDP dense 100mbit final accuracy - 1 point)", report.table(rows))
        rows[1]["figures"]["curve"] = [{"round": 9, "t_train": 20.0, "accuracy": 0.8}]
        figures.add_time_to_accuracy(rows, {})
        self.assertEqual(report.row_cells(rows[1], rows)[report.COLUMNS.index("time to accuracy s")], "not reached")

    def test_busiest_link_during_the_train_loop(self):
        # server-0 receives 100 B/s from t=10 on (start-up traffic before: 5000 B); worker-0 sends 60 B/s
        samples = [[0.0, {"server-0": [0, 0], "worker-0": [0, 0]}],
                   [10.0, {"server-0": [5000, 0], "worker-0": [0, 0]}],
                   [20.0, {"server-0": [6000, 500], "worker-0": [0, 600]}],
                   [30.0, {"server-0": [7000, 900], "worker-0": [0, 1200]}]]
        f = figures.busiest_link(samples, 15.0, 25.0, 4)   # interpolated at the loop's start and end
        self.assertEqual(f, {"busiest_link_bytes": 1000.0, "busiest_link_host": "server-0 rx",
                             "busiest_link_per_round": 250.0})
        self.assertEqual(figures.busiest_link([[0.0, {}], [9.0, {}]], 1.0, 2.0, 4), {})
        self.assertEqual(figures.busiest_link(None, 1.0, 2.0, 4), {})
        self.assertEqual(systems.link_sample(None)[1], {})

    def test_port_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "server-0.port"
            path.write_text('{"grpc": 41123, "health": 41124}\n')
            self.assertEqual(systems.grpc_port(path), 41123)
            path.write_text('{"peer": 7080}')
            with self.assertRaisesRegex(systems.RunFailure, "no gRPC port"):
                systems.grpc_port(path)
            path.write_text("7070\n")  # the plain number of the daemons before port files were JSON
            with self.assertRaisesRegex(systems.RunFailure, "not a port file"):
                systems.grpc_port(path)


def row(system, bw, train, cpu=10.0, acc=0.8, kind=None, scheme=None, tta=None, workload=None):
    kind = kind or ("ddp" if system.startswith("DDP") else "sketchps")
    scheme = scheme or system.split()[-1]
    f = {"startup_s": 1.0, "train_loop_s": train, "final_eval_s": 2.0, "wall_s": train + 3, "cpu_s": cpu,
         "accuracy": acc, "rounds": 4, "expected_rounds": 4, "curve": [], "job_end_s": train + 3,
         "cpu_by_role_s": {"server": 0.0, "worker": cpu}, "tta_s": tta}
    r = {"system": system, "bandwidth": bw, "kind": kind, "scheme": scheme, "figures": f, "procs": []}
    return {**r, "workload": workload} if workload else r


class TargetsTest(unittest.TestCase):
    def rows(self):
        return [row("sketchps gs_sgd", "100mbit", 40.0, cpu=12.0, acc=0.795), row("sketchps dense", "100mbit", 90.0),
                row("sketchps topk", "100mbit", 85.0, acc=0.70), row("DDP dense", "100mbit", 80.0, cpu=10.0, acc=0.80),
                row("DDP fp16", "100mbit", 48.0), row("sketchps gs_sgd", "none", 20.0, cpu=14.0), row("DDP dense", "none", 10.0)]

    def test_checks(self):
        checks = {(c["id"], c["bandwidth"], c["text"].split()[1]): c for c in targets.evaluate(self.rows(), "sketchps gs_sgd")}
        t1 = checks[("T1", "100mbit", "gs_sgd")]
        self.assertEqual((t1["status"], t1["measured"]), ("PASS", 0.5))   # 40 / 80, at the limit
        t2 = checks[("T2", "100mbit", "gs_sgd")]
        self.assertEqual(t2["status"], "MISS")                            # 40 / 48 > 0.8
        self.assertEqual(checks[("T3", "100mbit", "gs_sgd")]["status"], "PASS")   # -0.5 points
        self.assertEqual(checks[("T4", "100mbit", "topk")]["status"], "MISS")     # 85 > 80
        self.assertNotIn(("T4", "100mbit", "dense"), checks)              # dense compresses nothing
        self.assertEqual(checks[("T5", "none", "gs_sgd")]["status"], "MISS")      # 20 / 10 > 1.5
        self.assertEqual(checks[("T6", "100mbit", "gs_sgd")]["status"], "PASS")   # 12 / 10 <= 1.3
        self.assertEqual(checks[("T6", "none", "gs_sgd")]["status"], "MISS")      # 14 / 10
        self.assertEqual(checks[("T7", "100mbit", "gs_sgd")]["status"], "N/A")    # no PowerSGD run
        rows = self.rows() + [row("DDP PowerSGD r2", "100mbit", 45.0), row("DDP PowerSGD r4", "100mbit", 39.0)]
        t7 = next(c for c in targets.evaluate(rows, "sketchps gs_sgd") if c["id"] == "T7")
        self.assertEqual(t7["status"], "MISS")                                    # 40 against the better 39
        self.assertAlmostEqual(t7["measured"], 40 / 39)

    def test_accuracy_miss_and_missing_system(self):
        rows = [row("sketchps gs_sgd", "100mbit", 40.0, acc=0.78), row("DDP dense", "100mbit", 80.0, acc=0.80)]
        checks = {c["id"]: c for c in targets.evaluate(rows, "sketchps gs_sgd")}
        self.assertEqual(checks["T3"]["status"], "MISS")
        self.assertAlmostEqual(checks["T3"]["measured"], -2.0)
        self.assertEqual(checks["T2"]["status"], "N/A")
        self.assertIn("not run: DDP fp16", checks["T2"]["text"])
        self.assertIn("MISS", targets.describe(checks["T3"]))


class WorkloadTargetsTest(unittest.TestCase):
    """vgg/vit targets on time to accuracy (None: never reached) and B1 across bandwidths."""

    def rows(self, workload, topk_tta=15.0, gs_tta=25.0, dense_tta=100.0, r2=None, r4=30.0):
        return [row("sketchps gs_sgd", "100mbit", 50, tta=gs_tta, workload=workload, acc=0.83),
                row("sketchps topk", "100mbit", 40, tta=topk_tta, workload=workload, acc=0.835),
                row("DDP dense", "100mbit", 200, tta=dense_tta, workload=workload, acc=0.845),
                row("DDP PowerSGD r2", "100mbit", 60, tta=r2, workload=workload, kind="ddp", scheme="powersgd"),
                row("DDP PowerSGD r4", "100mbit", 60, tta=r4, workload=workload, kind="ddp", scheme="powersgd"),
                row("sketchps topk", "1gbit", 30, tta=12.0, workload=workload)]

    def checks(self, rows):
        return {c["id"]: c for c in targets.evaluate(rows, "sketchps gs_sgd")}

    def test_vgg(self):
        c = self.checks(self.rows("vgg"))
        self.assertEqual((c["V1"]["status"], c["V1"]["measured"]), ("PASS", 0.15))  # topk is the best: 15 / 100
        self.assertIn("best scheme (sketchps topk)", c["V1"]["text"])
        self.assertEqual((c["V2"]["status"], c["V2"]["measured"]), ("PASS", 0.5))   # r2 never got there: r4's 30
        self.assertEqual((c["V3"]["status"], c["V3"]["measured"]), ("PASS", 0.25))  # gs_sgd 25 / 100
        self.assertEqual((c["B1"]["status"], c["B1"]["measured"]), ("PASS", 1.25))  # 15 / 12 at 1gbit
        c = self.checks(self.rows("vgg", topk_tta=None, gs_tta=None))
        self.assertEqual((c["V1"]["status"], c["V1"]["measured"]), ("MISS", math.inf))
        self.assertIn("never reached", targets.describe(c["V1"]))
        self.assertEqual(c["V3"]["status"], "MISS")
        c = self.checks(self.rows("vgg", r4=None))
        self.assertEqual((c["V2"]["status"], c["V2"]["measured"]), ("PASS", 0.0))   # no PowerSGD reached it

    def test_vit(self):
        c = self.checks(self.rows("vit", topk_tta=28.0, r4=30.0))
        self.assertNotIn("V1", c)
        self.assertEqual((c["X1"]["status"], c["X1"]["measured"]), ("PASS", 0.25))  # gs_sgd 25 is the best now
        self.assertEqual(c["X2"]["status"], "PASS")                                 # 25 / 30 <= 0.9
        self.assertEqual(c["X3"]["status"], "MISS")                                 # gs_sgd 83.0% against 84.5%
        self.assertAlmostEqual(c["X3"]["measured"], -1.5)
        self.assertEqual(c["B1"]["status"], "N/A")                                  # gs_sgd did not run at 1gbit

    def test_missing_rivals_are_not_applicable(self):
        rows = [row("sketchps topk", "100mbit", 40, tta=15.0, workload="vgg")]
        c = self.checks(rows)
        self.assertEqual((c["V1"]["status"], c["V2"]["status"]), ("N/A", "N/A"))
        self.assertIn("not run: DDP dense", c["V1"]["text"])
        self.assertNotIn("B1", c)                                                   # no fast bandwidth run


class ReportTest(unittest.TestCase):
    def test_table_ratios(self):
        rows = TargetsTest().rows()
        text = report.table(rows)
        line = next(l for l in text.splitlines() if l.startswith("| cnn | sketchps gs_sgd | 100mbit"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        self.assertEqual(cells[report.COLUMNS.index("train / DDP dense")], "0.50")
        self.assertEqual(cells[report.COLUMNS.index("train / DDP fp16")], "0.83")
        self.assertEqual(cells[report.COLUMNS.index("CPU / DDP dense")], "1.20")
        self.assertEqual(cells[report.COLUMNS.index("acc - DDP dense (points)")], "-0.50")
        none_line = next(l for l in text.splitlines() if l.startswith("| cnn | sketchps gs_sgd | none"))
        self.assertIn("| 2.00 | - |", none_line)  # no DDP fp16 run uncapped

    def test_accuracy_against_bytes(self):
        """link_bytes_at: the rounds up to the point times the mean per round; plot_bytes draws the rows
        that have link counters (both files) and leaves out the others."""
        curve = [{"round": 9, "t_train": 1.0, "accuracy": 0.5}, {"round": 19, "t_train": 2.0, "accuracy": 0.8}]
        with_bytes = {"system": "a", "bandwidth": "1gbit", "workload": "vit",
                      "figures": {"curve": curve, "busiest_link_per_round": 250_000.0, "train_loop_s": 3.0,
                                  "target_accuracy": 0.7, "tta_s": 2.0, "tta_round": 19}}
        without = {"system": "b", "bandwidth": "1gbit", "workload": "vit",
                   "figures": {"curve": curve, "train_loop_s": 3.0}}
        self.assertEqual([report.link_bytes_at(with_bytes, p) for p in curve], [2.5, 5.0])
        self.assertIsNone(report.link_bytes_at(without, curve[0]))
        with tempfile.TemporaryDirectory() as d:
            paths = report.plot_bytes([with_bytes, without], "vit", "1gbit", "t", Path(d) / "bytes")
            self.assertEqual([p.name for p in paths if p.stat().st_size > 0], ["bytes.png", "bytes.svg"])
            self.assertIn("250 kB per round", paths[1].read_text())
            self.assertNotIn(">b (", paths[1].read_text())

    def test_doc_block_is_replaced_and_hand_text_kept(self):
        with tempfile.TemporaryDirectory() as tmp:
            doc = Path(tmp) / "performance.md"
            report.write_doc(doc, "first table")
            self.assertIn("first table", doc.read_text())
            doc.write_text(doc.read_text() + "\nMy analysis stays.\n")
            report.write_doc(doc, "second table")
            text = doc.read_text()
        self.assertNotIn("first table", text)
        self.assertEqual(text.count(report.BEGIN), 1)
        self.assertIn("second table", text)
        self.assertIn("My analysis stays.", text)


class FromResultsTest(unittest.TestCase):
    """--from-results on a synthetic run: figures derived again, table, plots, targets, doc."""

    def test_rerender_writes_everything(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            record = FiguresTest().sketchps_run(folder)
            machine = {"nproc": 2, "cpu_model": "cpu", "kernel": "k", "loadavg": [1.0, 1.0, 1.0], "date": "today",
                       "command": "sudo bash bench/e2e/run.sh --x", "commit": "abc", "python": "3", "torch": "1"}
            row = {**record, "system": "sketchps gs_sgd", "kind": "sketchps", "scheme": "gs_sgd", "bandwidth": "100mbit",
                   "figures": {"stale": True}}
            results = {"machine": machine, "job": jobspec.make_job([]), "systems": ["sketchps gs_sgd"], "runs": [row]}
            (folder / "results.json").write_text(json.dumps(results))
            doc = folder / "docs/reports/performance.md"
            doc.parent.mkdir(parents=True)
            self.assertEqual(run.main(["--from-results", str(folder / "results.json"), "--write-doc", str(doc)]), 0)
            again = json.loads((folder / "results.json").read_text())
            text = doc.read_text()
            self.assertEqual(again["runs"][0]["figures"]["train_loop_s"], 4.0)
            self.assertTrue((folder / "accuracy-cnn-100mbit.png").read_bytes().startswith(b"\x89PNG"))
            self.assertTrue((doc.parent / "img/performance-accuracy-cnn-100mbit.svg").is_file())
            self.assertIn("](img/performance-accuracy-cnn-100mbit.png)", text)
            # a results.json of before --workload: cnn, the stated target 87% (never reached: 50% and 70%)
            self.assertIn("| cnn | sketchps gs_sgd | 100mbit | not reached | - | 9.0 | 4.0 |", text)
            self.assertIn("cnn 100mbit: target 87.00% (the workload's stated target (no DDP dense run))", text)
            self.assertIn("sudo bash bench/e2e/run.sh --x", text)
            self.assertIn("N/A", text)  # no DDP run: the targets cannot be checked

    def test_rerender_of_a_workload_with_its_target(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            r0 = [{"round": r, "round_start": 100.0 + 2 * r, "time": 101.0 + 2 * r} for r in range(4)]
            r0[1].update(test_accuracy=0.7, test_round=1, eval_s=1.0)
            r0[3].update(test_accuracy=0.8, test_round=3, eval_s=1.0, final=True)
            dense = {"launch": 90.0, "procs": [proc("worker-0", "worker", 90.0, 110.0, 3.0)], "expected_rounds": 4,
                     "metrics": {"0": write_jsonl(folder, "dense.jsonl", r0)}, "system": "DDP dense", "kind": "ddp",
                     "scheme": "none", "workload": "vgg", "bandwidth": "100mbit"}
            fast = [{**x, "time": x["time"] - 0.5} for x in r0]
            fast[1]["test_accuracy"] = 0.795
            mine = {**dense, "metrics": {"0": write_jsonl(folder, "topk.jsonl", fast)}, "system": "sketchps topk",
                    "kind": "sketchps", "scheme": "topk"}
            machine = {"nproc": 2, "cpu_model": "cpu", "kernel": "k", "loadavg": [1.0, 1.0, 1.0], "date": "today",
                       "command": "sudo bash bench/e2e/run.sh --workload vgg", "commit": "abc", "python": "3", "torch": "1"}
            results = {"machine": machine, "jobs": {"vgg": jobspec.make_job([], "vgg")}, "systems": [], "runs": [mine, dense],
                       "default_system": "sketchps topk", "upfront_targets": {"vgg": 0.83}}
            (folder / "results.json").write_text(json.dumps(results))
            doc = folder / "perf.md"
            self.assertEqual(run.main(["--from-results", str(folder / "results.json"), "--write-doc", str(doc)]), 0)
            again = json.loads((folder / "results.json").read_text())
            text = doc.read_text()
            self.assertTrue((folder / "accuracy-vgg-100mbit.svg").is_file())
        figs = {r["system"]: r["figures"] for r in again["runs"]}
        self.assertAlmostEqual(figs["DDP dense"]["target_accuracy"], 0.79)      # its final 80% - 1 point
        # 79% first reached: topk after round 1 (102.5 - 100), DDP dense after round 3 (107 - 100 - round 1's 1 s)
        self.assertEqual((figs["sketchps topk"]["tta_s"], figs["DDP dense"]["tta_s"]), (2.5, 6.0))
        self.assertIn("Workload vgg:", text)
        self.assertIn("MISS  [vgg 100mbit] V3 sketchps topk time to accuracy <= 0.3 x DDP dense: ratio 0.42", text)
        self.assertIn("N/A   [vgg 100mbit] V2 best scheme (sketchps topk) time to accuracy <= 0.8 x the better DDP PowerSGD "
                      "(not run: DDP PowerSGD)", text)
        self.assertIn("| vgg | sketchps topk | 100mbit | 2.5 (round 2) | 0.42 |", text)
        self.assertIn("![accuracy against time, vgg, 100mbit](img/performance-accuracy-vgg-100mbit.png)", text)

    def test_merge_of_two_invocations_replaces_rerun_rows(self):
        machine = {"command": "run.sh --a", "commit": "abc"}
        first = {"machine": dict(machine), "jobs": {"cnn": {"workers": 4}}, "workloads": ["cnn"],
                 "systems": ["sketchps topk", "DDP dense"], "bandwidths": ["100mbit"], "upfront_targets": {"cnn": 0.87},
                 "runs": [{"system": "sketchps topk", "bandwidth": "100mbit", "workload": "cnn", "n": 1},
                          {"system": "DDP dense", "bandwidth": "100mbit", "workload": "cnn", "n": 2}]}
        second = {"machine": {"command": "run.sh --b", "commit": "def"}, "jobs": {"vgg": {"workers": 4}},
                  "workloads": ["cnn", "vgg"], "systems": ["sketchps topk"], "bandwidths": ["100mbit"],
                  "upfront_targets": {"vgg": 0.83},
                  "runs": [{"system": "sketchps topk", "bandwidth": "100mbit", "workload": "cnn", "n": 3},
                           {"system": "sketchps topk", "bandwidth": "100mbit", "workload": "vgg", "n": 4}]}
        merged = run.merge(first, second)
        self.assertEqual([r["n"] for r in merged["runs"]], [2, 3, 4])  # the rerun replaced row 1
        self.assertEqual(merged["workloads"], ["cnn", "vgg"])
        self.assertEqual(set(merged["jobs"]), {"cnn", "vgg"})
        self.assertEqual(merged["upfront_targets"], {"cnn": 0.87, "vgg": 0.83})
        self.assertEqual(merged["machine"]["command"], "run.sh --a\nrun.sh --b")
        self.assertEqual(merged["machine"]["commit"], "abc (and def)")

    def test_bad_results_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "results.json").write_text("{}")
            self.assertEqual(run.main(["--from-results", str(Path(tmp) / "results.json")]), 2)


class OptionsTest(unittest.TestCase):
    def test_systems_and_bad_options(self):
        args = run.parse_args(["--schemes", "gs_sgd,topk", "--mode", "ps,decentralized"])
        names = [s.name for s in run.plan_systems(args)]
        self.assertEqual(names, ["sketchps gs_sgd", "sketchps topk", "sketchps gs_sgd decentralized",
                                 "sketchps topk decentralized", "DDP dense", "DDP fp16", "DDP PowerSGD r2",
                                 "DDP PowerSGD r4"])
        hooked = run.plan_systems(run.parse_args(["--schemes", "topk", "--ddp", "dense", "--hook", "topk,gs_sgd"]))
        self.assertEqual([(s.name, s.kind, s.scheme, s.worker) for s in hooked],
                         [("sketchps topk", "sketchps", "topk", "script"),
                          ("DDP + sketchps hook topk", "sketchps", "topk", "hook"),
                          ("DDP + sketchps hook gs_sgd", "sketchps", "gs_sgd", "hook"),
                          ("DDP dense", "ddp", "none", "script")])
        powersgd = run.plan_systems(run.parse_args(["--ddp", "powersgd-r8"]))[-1]
        self.assertEqual((powersgd.name, powersgd.scheme, powersgd.powersgd_rank), ("DDP PowerSGD r8", "powersgd", 8))
        for argv, message in [(["--schemes", "gs-sgd"], "--schemes: unknown scheme 'gs-sgd'"),
                              (["--bandwidth", "100"], "--bandwidth '100'"),
                              (["--set", "scheme.name=topk"], "--set scheme.name=topk"),
                              (["--ddp", "bf16"], "--ddp: 'bf16'"),
                              (["--hook", "powersgd"], "--hook: unknown scheme 'powersgd'"),
                              (["--ddp", "powersgd-r0"], "--ddp: 'powersgd-r0'"),
                              (["--workload", "cnn,resnet"], "--workload 'resnet'")]:
            with self.assertRaisesRegex(run.UsageError, message):
                run.check_args(run.parse_args(argv))
        with self.assertRaisesRegex(run.UsageError, "--python-path: no sketchps package .* in /nonexistent"):
            run.python_path(run.parse_args(["--workload", "vgg", "--python-path", "/nonexistent"]))
        self.assertEqual(run.workloads_of(run.parse_args(["--workload", "vgg,vit", "--workload", "vgg"])), ["vgg", "vit"])

    def test_local_step_systems(self):
        planned = run.plan_systems(run.parse_args(["--schemes", "topk,topk/ls4,topk/ls8avg,topk/ls4avgkeep",
                                                   "--ddp", "dense,postlocal8,diloco16"]))
        self.assertEqual([(s.name, s.kind, s.scheme, s.period, s.overrides) for s in planned],
                         [("sketchps topk", "sketchps", "topk", 0, ()),
                          ("sketchps topk H4 nesterov", "sketchps", "topk", 0,
                           ("train.local_steps=4", "train.outer_optimizer.name=nesterov")),
                          ("sketchps topk H8 average", "sketchps", "topk", 0,
                           ("train.local_steps=8", "train.outer_optimizer.name=average")),
                          ("sketchps topk H4 average kept state", "sketchps", "topk", 0,
                           ("train.local_steps=4", "train.outer_optimizer.name=average", "train.inner_state=keep")),
                          ("DDP dense", "ddp", "none", 0, ()),
                          ("DDP post-local SGD 8", "ddp", "postlocal", 8, ()),
                          ("DDP DiLoCo H16", "ddp", "diloco", 16, ())])
        job = jobspec.make_job([], "cnn")
        self.assertEqual([run.system_rounds(job, s) for s in planned[:5]], [468, 117, 58, 117, 468])
        self.assertEqual([systems.ddp_system_args(s) for s in planned[4:]], [[], ["--period", "8"], ["--period", "16"]])
        ctx = systems.Context(net=None, bandwidth="none", server_bin="", worker_bin="", sketchps_bin="", ddp_script="",
                              job_path=Path("/job.yaml"), overrides=["train.rounds=5"], ddp_args=[], workers=4,
                              servers=2, rounds=5, timeout=1)
        self.assertEqual(systems.job_flags(planned[1], ctx)["overrides"],
                         ["train.rounds=5", "scheme.name=topk", "mode=ps", "train.local_steps=4",
                          "train.outer_optimizer.name=nesterov"])
        for argv, message in [(["--schemes", "topk/ls0"], "unknown scheme 'topk/ls0'"),
                              (["--schemes", "topk/ls4keepavg"], "unknown scheme 'topk/ls4keepavg'"),
                              (["--schemes", "nope/ls4"], "unknown scheme 'nope'"),
                              (["--ddp", "postlocal0"], "--ddp: 'postlocal0'"),
                              (["--ddp", "diloco"], "--ddp: 'diloco'")]:
            with self.assertRaisesRegex(run.UsageError, message):
                run.check_args(run.parse_args(argv))
        args = ddp_train.parse_args(["--compression", "diloco", "--period", "8"])
        self.assertEqual((args.period, args.outer_lr, args.outer_momentum, args.local_warmup), (8, 0.7, 0.9, 10))
        with self.assertRaises(SystemExit):
            ddp_train.parse_args(["--compression", "postlocal", "--period", "0"])

    def test_missing_binary_is_named(self):
        args = run.parse_args(["--bin-dir", "/nonexistent"])
        with self.assertRaisesRegex(run.UsageError, "sketchps-server: no executable at /nonexistent/server/sketchps-server"):
            run.binaries(args)

    def test_sketchps_is_needed_for_the_launcher_even_when_insecure(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("sketchps-server", "sketchps-worker"):
                (Path(tmp) / name).write_text("#!/bin/sh\n")
                (Path(tmp) / name).chmod(0o755)
            for extra in ([], ["--insecure"]):
                with self.assertRaisesRegex(run.UsageError, f"sketchps: no executable at {tmp}/tools/sketchps"):
                    run.binaries(run.parse_args(["--bin-dir", tmp, *extra]))
            (Path(tmp) / "sketchps").write_text("#!/bin/sh\n")
            (Path(tmp) / "sketchps").chmod(0o755)
            self.assertEqual(run.binaries(run.parse_args(["--bin-dir", tmp]))["sketchps"], f"{tmp}/sketchps")

    def test_daemons_get_their_command_lines_from_the_launcher(self):
        """`sketchps launch argv` of the build (SKETCHPS_BUILD_DIR, set by ctest) gives every flag;
        the harness's own binary replaces the program."""
        build = os.environ.get("SKETCHPS_BUILD_DIR")
        if not build:
            self.skipTest("SKETCHPS_BUILD_DIR is not set (ctest sets it): no sketchps to ask")
        sketchps = str(Path(build) / "tools" / "sketchps")
        argv = launcher.daemon_argv(sketchps, "server", "/my/server", tls_args=["--tls-dir", "/c"], shard=1,
                                    listen="0.0.0.0:0", port_file="/p.json", job="j.yaml", overrides=["a=1"])
        self.assertEqual(argv[0], "/my/server")
        for pair in (["--tls-dir", "/c"], ["--set", "a=1"], ["--shard", "1"], ["--listen", "0.0.0.0:0"],
                     ["--port-file", "/p.json"], ["--job", "j.yaml"]):
            self.assertIn(pair, [argv[i:i + 2] for i in range(len(argv) - 1)])
        argv = launcher.daemon_argv(sketchps, "worker", "/my/worker", tls_args=["--insecure"], rank=2, world_size=4,
                                    servers=["a:1", "b:2"], job="j.yaml")
        self.assertIn("--insecure", argv)
        self.assertIn(["--servers", "a:1,b:2"], [argv[i:i + 2] for i in range(len(argv) - 1)])
        with self.assertRaisesRegex(launcher.LaunchError, "exited 2"):
            launcher.daemon_argv(sketchps, "worker", "/w", job="j.yaml")  # no --rank


class DdpScriptTest(unittest.TestCase):
    def test_permutation_matches_sketchps(self):
        # pinned in tests/worker/fashion_mnist_test.cc
        self.assertEqual(ddp_train.epoch_permutation(1000, 3, 0)[:3], [903, 899, 775])
        self.assertEqual(sorted(ddp_train.epoch_permutation(1000, 3, 1)), list(range(1000)))

    def test_splitmix_reference_and_vectorised_stream(self):
        self.assertEqual(ddp_train.SplitMix64(0).next(), 0xE220A8397B1DCDAF)  # the published test vector
        rng = ddp_train.SplitMix64(7)
        scalar = [(rng.next() >> 40) * 2.0 ** -24 for _ in range(5)]
        self.assertEqual(ddp_train.splitmix_uniform(7, 5).tolist(), scalar)

    def test_data_order_rule(self):
        perm = ddp_train.epoch_permutation(1000, 3, 1)
        steps = 1000 // (4 * 8)
        images, labels = ddp_train.torch.zeros(60000, 28, 28, dtype=ddp_train.torch.uint8), ddp_train.torch.arange(60000)
        batches = [ddp_train.Batches(images, labels, 1000, 3, 8, rank, 4) for rank in range(4)]
        got = [b(steps + 2)[1].tolist() for b in batches]  # epoch 1, step 2
        self.assertEqual(sum(got, []), perm[2 * 32:3 * 32])
        with self.assertRaisesRegex(wc.WorkloadError, "data.train_samples 70000 > the 60000 samples"):
            ddp_train.Batches(images, labels, 70000, 3, 8, 0, 4)

    def test_init_is_deterministic_and_bounded(self):
        a, b = ddp_train.Cnn(), ddp_train.Cnn()
        ddp_train.init_like_sketchps(a, 1)
        ddp_train.init_like_sketchps(b, 1)
        self.assertEqual(sum(p.numel() for p in a.parameters()), 220234)
        for p, q in zip(a.parameters(), b.parameters()):
            self.assertTrue(ddp_train.torch.equal(p, q))
        self.assertLessEqual(a.fc1.weight.abs().max().item(), 1 / 3136 ** 0.5)
        self.assertGreater(a.fc1.weight.abs().max().item(), 0.9 / 3136 ** 0.5)


class WorkloadTest(unittest.TestCase):
    """The workload scripts' shared parts (bench/e2e/workload_common.py) and their harness side."""

    def test_same_initial_weights_on_two_builds(self):
        for w, params in ((workload_vgg.WORKLOAD, 5_629_322), (workload_vit.WORKLOAD, 3_214_090)):
            a, b, other = wc.build_model(w, 1), wc.build_model(w, 1), wc.build_model(w, 2)
            self.assertEqual(sum(p.numel() for p in a.parameters()), params, w.name)
            self.assertEqual(wc.checksum(a), wc.checksum(b), w.name)
            self.assertNotEqual(wc.checksum(a), wc.checksum(other), w.name)
            wc.torch.manual_seed(99)  # what ran before must not matter: build_model seeds
            self.assertEqual(wc.checksum(wc.build_model(w, 1)), wc.checksum(a), w.name)

    def test_vgg_is_mostly_dense_layers(self):
        model = wc.build_model(workload_vgg.WORKLOAD, 1)
        linear = sum(p.numel() for m in model.modules() if isinstance(m, wc.nn.Linear) for p in m.parameters())
        self.assertGreater(linear / sum(p.numel() for p in model.parameters()), 0.99)

    def test_optimizers_follow_the_job(self):
        vgg = wc.build_model(workload_vgg.WORKLOAD, 1)
        sgd = wc.make_optimizer(vgg, yaml.safe_load(workload_vgg.JOB)["optimizer"], workload_vgg.WORKLOAD)
        self.assertEqual((type(sgd).__name__, sgd.param_groups[0]["momentum"], sgd.param_groups[0]["lr"]), ("SGD", 0.9, 0.1))
        vit = wc.build_model(workload_vit.WORKLOAD, 1)
        section = yaml.safe_load(workload_vit.JOB)["optimizer"]
        adamw = wc.make_optimizer(vit, section, workload_vit.WORKLOAD)
        decay, none = adamw.param_groups
        self.assertEqual((type(adamw).__name__, decay["weight_decay"], none["weight_decay"]), ("AdamW", 0.05, 0.0))
        self.assertEqual((decay["betas"], decay["eps"]), ((0.9, 0.999), 1e-8))
        names = {id(p): n for n, p in vit.named_parameters()}
        exempt = sorted(names[id(p)] for p in none["params"])
        self.assertIn("cls_token", exempt)
        self.assertIn("pos_embed", exempt)
        self.assertIn("blocks.0.norm1.weight", exempt)
        self.assertIn("blocks.0.attn.in_proj_bias", exempt)
        self.assertNotIn("blocks.0.attn.in_proj_weight", exempt)
        self.assertTrue(all(p.ndim == 2 for p in decay["params"]))
        with self.assertRaisesRegex(wc.WorkloadError, "optimizer.no_decay: the job lists"):
            wc.make_optimizer(vit, {**section, "no_decay": ["head.bias"]}, workload_vit.WORKLOAD)
        self.assertEqual(len(wc.make_optimizer(vit, {**section, "no_decay": exempt}, workload_vit.WORKLOAD).param_groups), 2)

    def test_spans_and_powersgd_start(self):
        clock = jobspec.Clock(100.0, 250)
        self.assertEqual([jobspec.span_rounds(v, clock, "k") for v in (0, "30 rounds", "0.5 epochs", "10%",
                                                                       ["2 epochs", "20%"], "1 round")],
                         [0.0, 30.0, 50.0, 25.0, 50.0, 1.0])
        with self.assertRaisesRegex(jobspec.JobError, "k: '5' is not a span"):
            jobspec.span_rounds("5", clock, "k")
        self.assertEqual(jobspec.powersgd_start(jobspec.make_job([])), 10)          # no dense warm-up
        self.assertEqual(jobspec.powersgd_start(jobspec.make_job(["scheme.dense_warmup=2%"])), 10)  # ceil(9.36)
        self.assertEqual(jobspec.powersgd_start(jobspec.make_job(["scheme.dense_warmup=50 rounds"])), 50)
        self.assertEqual(jobspec.powersgd_start(jobspec.make_job(["scheme.warmup_rounds=1"])), 2)   # torch's minimum
        self.assertEqual(jobspec.ddp_args(jobspec.make_job(["scheme.dense_warmup=0.1 epochs"]))[-2:],
                         ["--powersgd-start", "47"])

    def test_workload_jobs_and_ddp_argv(self):
        job = jobspec.make_job(["train.rounds=6"], "vgg")
        self.assertEqual((job["job_id"], jobspec.total_rounds(job)), ("e2e-vgg", 6))
        self.assertEqual(jobspec.total_rounds(jobspec.make_job([], "vit")), 320)
        keys = ["model=custom", 'layers=[["w", [2, 3]]]', "optimizer.lr=0.1"]
        mine = systems.system_job(job, systems.System("sketchps topk decentralized", "sketchps", "topk", "decentralized"), keys)
        self.assertEqual((mine["scheme"]["name"], mine["mode"], mine["model"], mine["layers"]),
                         ("topk", "decentralized", "custom", [["w", [2, 3]]]))
        self.assertNotIn("model", job)  # the workload's own job is left alone
        ctx = systems.Context(net=None, bandwidth="none", server_bin="s", worker_bin="w", sketchps_bin="x",
                              ddp_script="d", job_path=Path("job.yaml"), overrides=[], ddp_args=[], workers=4, servers=2, rounds=6,
                              timeout=1, tls_args=["--tls-dir", "/c"], workload="vgg", script="vgg.py")
        self.assertEqual(systems.tls_env(ctx), {"SKETCHPS_TLS_DIR": "/c"})
        ctx.tls_args = ["--insecure"]
        self.assertEqual(systems.tls_env(ctx), {"SKETCHPS_INSECURE": "1"})

        class Recorder:
            def __init__(self):
                self.argv = []

            def start(self, name, role, ns, argv, env, log):
                self.argv.append(argv)
        ctx.net = type("Net", (), {"ns": {f"worker-{i}": f"ns{i}" for i in range(4)}})()
        procs = Recorder()
        systems.start_ddp_ranks(procs, systems.System("DDP PowerSGD r4", "ddp", "powersgd", powersgd_rank=4), ctx, Path("f"))
        self.assertEqual(procs.argv[0][1:9], ["vgg.py", "--backend", "ddp", "--job", "job.yaml", "--hook", "powersgd",
                                              "--powersgd-rank"])
        self.assertEqual(procs.argv[0][9], "4")


class SchedulePackageTest(unittest.TestCase):
    """workload_common.learning_rate, clock_of and Batches against the sketchps package: a one-worker
    decentralized job (no servers) joined in this process."""

    JOB = """\
job_id: e2e-schedule-test
mode: decentralized
workers: 1
servers: 1
model: custom
layers: [["weight", [2, 4]], ["bias", [2]]]
data: {batch_size: 8, train_samples: 203}
train: {epochs: 2.3, eval_every_rounds: 0, seed: 5}
optimizer: {lr: 0.1, momentum: 0.9, schedule: cosine, warmup: 7 rounds, warmup_start_factor: 0.1, min_lr: 0.001}
scheme: {name: dense}
"""

    @classmethod
    def setUpClass(cls):
        package = find_package()
        if package is None:
            raise unittest.SkipTest("no sketchps package (PYTHONPATH, or build/*/python/sketchps/_core*.so)")
        sys.path.insert(0, package)
        import sketchps.torch  # noqa: F401
        cls.sps = sys.modules["sketchps.torch"]

    def join(self, job_text: str):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        os.environ.update(RANK="0", WORLD_SIZE="1", SKETCHPS_INSECURE="1", SKETCHPS_LISTEN=f"127.0.0.1:{port}",
                          SKETCHPS_PEERS=f"127.0.0.1:{port}")
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        path = Path(tmp.name) / "job.yaml"
        path.write_text(job_text)
        ctx = self.sps.init(job=str(path))
        model = wc.torch.nn.Linear(4, 2)
        opt = self.sps.DistributedOptimizer(wc.torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), model)
        self.addCleanup(opt.finish)
        return ctx, opt, yaml.safe_load(job_text)

    def check_schedule(self, job_text: str):
        ctx, opt, job = self.join(job_text)
        clock = wc.clock_of(job)
        self.assertEqual((opt.rounds, clock.rounds_per_epoch), (ctx.job.total_rounds, ctx.job.rounds_per_epoch))
        mine = [wc.learning_rate(job["optimizer"], r, clock) for r in range(opt.rounds)]
        theirs = [opt._worker.learning_rate(r) for r in range(opt.rounds)]
        for r, (a, b) in enumerate(zip(mine, theirs)):
            self.assertAlmostEqual(a, b, delta=1e-12 * max(1.0, abs(b)), msg=f"round {r}: mine {a}, the core's {b}")
        for r in range(min(12, opt.rounds - 1)):  # the public property: the next round's, as rounds run
            self.assertAlmostEqual(opt.learning_rate, mine[r], delta=1e-12, msg=f"before round {r}")
            opt.zero_grad()
            opt.step(loss=0.0)
        return job, opt

    def test_cosine_with_warmup_over_a_job_given_in_epochs(self):
        job, opt = self.check_schedule(self.JOB)  # 25 rounds per epoch, ceil(2.3 * 25) = 58 rounds
        self.assertEqual((opt.rounds, wc.clock_of(job).total_epochs), (58, 2.32))

    def test_cosine_over_a_job_given_in_rounds(self):
        self.check_schedule(self.JOB.replace("epochs: 2.3,", "rounds: 40,"))  # cosine ends with round 40

    def test_step_schedule_and_warmup_in_epochs(self):
        self.check_schedule(self.JOB.replace("schedule: cosine, warmup: 7 rounds",
                                             "schedule: step, milestones: [0.5, 1.5], gamma: 0.3, warmup: 0.4 epochs")
                            .replace(", min_lr: 0.001", ""))  # cosine's only: refused under step

    def test_data_order(self):
        _, opt, job = self.join(self.JOB)
        images, labels = wc.torch.zeros(203, 28, 28, dtype=wc.torch.uint8), wc.torch.arange(203)
        batches = wc.Batches(images, labels, 203, 5, 8, 0, 1)
        for r in (0, 1, 24, 25, 57):  # across the epoch boundary
            self.assertEqual(opt.batch_indices(r).tolist(), batches.indices(r).tolist(), f"round {r}")
        self.assertEqual((wc.share(10000, 1, 4), wc.share(10, 1, 4), wc.share(10, 3, 4)), ((2500, 5000), (3, 6), (8, 10)))
        from sketchps import data
        for n, world in ((10000, 4), (2000, 3), (7, 4), (10, 4)):
            ours = [wc.share(n, r, world) for r in range(world)]
            theirs = [data.share(n, r, world) for r in range(world)]
            self.assertEqual([list(range(*o)) for o in ours], [list(t) for t in theirs], f"share({n}, world {world})")


if __name__ == "__main__":
    unittest.main(verbosity=1)
