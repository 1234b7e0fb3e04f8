#!/usr/bin/env python3
"""Unit tests of the end-to-end benchmark's own logic (bench/e2e), no namespaces or daemons needed:
the job and its DDP mirror, the figures derived from synthetic metrics files, the targets, the
table and the generated doc block, option checks, and ddp_train.py's sketchps-compatible data
order and initialisation. Exit 1 when any test fails (unittest).
"""
from __future__ import annotations

import json
import sys
import tempfile
import unittest
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench/e2e"
sys.path.insert(0, str(BENCH))
import ddp_train  # noqa: E402
import figures  # noqa: E402
import job as jobspec  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402
import systems  # noqa: E402
import targets  # noqa: E402


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
        self.assertNotIn("--eval-samples", pairs)
        pairs = jobspec.ddp_args(jobspec.make_job(["train.eval_samples=2000"]))
        self.assertIn("2000", pairs)
        with self.assertRaisesRegex(jobspec.JobError, "model"):
            jobspec.ddp_args(jobspec.make_job(["model=mlp"]))
        with self.assertRaisesRegex(jobspec.JobError, "optimizer.nesterov"):
            jobspec.ddp_args(jobspec.make_job(["optimizer.nesterov=true"]))


class FiguresTest(unittest.TestCase):
    """A sketchps-like run (no round_start: derived) and a DDP-like one (final_eval event)."""

    def sketchps_run(self, folder: Path) -> dict:
        base = {"compute_s": 0.5, "compress_s": 0.1, "communicate_s": 0.4, "wire_up": 100, "wire_down": 50,
                "dense_bytes": 1000}
        r0 = [{**base, "round": 0, "time": 1010.0}, {**base, "round": 1, "time": 1011.0},
              {**base, "round": 2, "time": 1012.0, "test_accuracy": 0.5, "test_round": 0},
              {**base, "round": 3, "time": 1013.0, "test_accuracy": 0.7, "test_round": 3}]
        r1 = [{**base, "round": i, "time": 1010.0 + i, "wire_up": 300, "wire_down": 150} for i in range(4)]
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
        self.assertEqual([(p["t"], p["accuracy"]) for p in f["curve"]], [(10.0, 0.5), (13.0, 0.7)])

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
        self.assertEqual(f["curve"], [{"t": 6.0, "accuracy": 0.8, "round": 1}])  # the final eval wins

    def test_final_eval_without_round_is_the_last_round(self):
        rank0 = [{"round": 0, "time": 5.0}, {"round": 1, "time": 7.0}, {"event": "final_eval", "test_accuracy": 0.6}]
        self.assertEqual(figures.accuracy_curve(rank0, 1.0), [{"t": 6.0, "accuracy": 0.6, "round": 1}])

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


def row(system, bw, train, cpu=10.0, acc=0.8, kind=None, scheme=None):
    kind = kind or ("ddp" if system.startswith("DDP") else "sketchps")
    scheme = scheme or system.split()[-1]
    f = {"startup_s": 1.0, "train_loop_s": train, "final_eval_s": 2.0, "wall_s": train + 3, "cpu_s": cpu,
         "accuracy": acc, "rounds": 4, "expected_rounds": 4, "curve": [], "job_end_s": train + 3,
         "cpu_by_role_s": {"server": 0.0, "worker": cpu}}
    return {"system": system, "bandwidth": bw, "kind": kind, "scheme": scheme, "figures": f, "procs": []}


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

    def test_accuracy_miss_and_missing_system(self):
        rows = [row("sketchps gs_sgd", "100mbit", 40.0, acc=0.78), row("DDP dense", "100mbit", 80.0, acc=0.80)]
        checks = {c["id"]: c for c in targets.evaluate(rows, "sketchps gs_sgd")}
        self.assertEqual(checks["T3"]["status"], "MISS")
        self.assertAlmostEqual(checks["T3"]["measured"], -2.0)
        self.assertEqual(checks["T2"]["status"], "N/A")
        self.assertIn("not run: DDP fp16", checks["T2"]["text"])
        self.assertIn("MISS", targets.describe(checks["T3"]))


class ReportTest(unittest.TestCase):
    def test_table_ratios(self):
        rows = TargetsTest().rows()
        text = report.table(rows)
        line = next(l for l in text.splitlines() if l.startswith("| sketchps gs_sgd | 100mbit"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        self.assertEqual(cells[report.COLUMNS.index("train / DDP dense")], "0.50")
        self.assertEqual(cells[report.COLUMNS.index("train / DDP fp16")], "0.83")
        self.assertEqual(cells[report.COLUMNS.index("CPU / DDP dense")], "1.20")
        self.assertEqual(cells[report.COLUMNS.index("acc - DDP dense (points)")], "-0.50")
        none_line = next(l for l in text.splitlines() if l.startswith("| sketchps gs_sgd | none"))
        self.assertIn("| 2.00 | - |", none_line)  # no DDP fp16 run uncapped

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
            doc = folder / "docs/performance.md"
            doc.parent.mkdir()
            self.assertEqual(run.main(["--from-results", str(folder / "results.json"), "--write-doc", str(doc)]), 0)
            again = json.loads((folder / "results.json").read_text())
            text = doc.read_text()
            self.assertEqual(again["runs"][0]["figures"]["train_loop_s"], 4.0)
            self.assertTrue((folder / "accuracy-100mbit.png").read_bytes().startswith(b"\x89PNG"))
            self.assertTrue((doc.parent / "img/performance-accuracy-100mbit.svg").is_file())
            self.assertIn("](img/performance-accuracy-100mbit.png)", text)
            self.assertIn("| sketchps gs_sgd | 100mbit | 9.0 | 4.0 |", text)
            self.assertIn("sudo bash bench/e2e/run.sh --x", text)
            self.assertIn("N/A", text)  # no DDP run: the targets cannot be checked

    def test_bad_results_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "results.json").write_text("{}")
            self.assertEqual(run.main(["--from-results", str(Path(tmp) / "results.json")]), 2)


class OptionsTest(unittest.TestCase):
    def test_systems_and_bad_options(self):
        args = run.parse_args(["--schemes", "gs_sgd,topk", "--mode", "ps,decentralized"])
        names = [s.name for s in run.plan_systems(args)]
        self.assertEqual(names, ["sketchps gs_sgd", "sketchps topk", "sketchps gs_sgd decentralized",
                                 "sketchps topk decentralized", "DDP dense", "DDP fp16"])
        for argv, message in [(["--schemes", "gs-sgd"], "--schemes: unknown scheme 'gs-sgd'"),
                              (["--bandwidth", "100"], "--bandwidth '100'"),
                              (["--set", "scheme.name=topk"], "--set scheme.name=topk"),
                              (["--ddp", "bf16"], "--ddp: 'bf16'")]:
            with self.assertRaisesRegex(run.UsageError, message):
                run.check_args(run.parse_args(argv))

    def test_missing_binary_is_named(self):
        args = run.parse_args(["--bin-dir", "/nonexistent"])
        with self.assertRaisesRegex(run.UsageError, "sketchps-server: no executable at /nonexistent/server/sketchps-server"):
            run.binaries(args)

    def test_sketchps_needed_for_the_certificates_unless_insecure(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("sketchps-server", "sketchps-worker"):
                (Path(tmp) / name).write_text("#!/bin/sh\n")
                (Path(tmp) / name).chmod(0o755)
            with self.assertRaisesRegex(run.UsageError, f"sketchps: no executable at {tmp}/tools/sketchps"):
                run.binaries(run.parse_args(["--bin-dir", tmp]))
            self.assertEqual(sorted(run.binaries(run.parse_args(["--bin-dir", tmp, "--insecure"]))),
                             ["sketchps-server", "sketchps-worker"])
            (Path(tmp) / "sketchps").write_text("#!/bin/sh\n")
            (Path(tmp) / "sketchps").chmod(0o755)
            self.assertEqual(run.binaries(run.parse_args(["--bin-dir", tmp]))["sketchps"], f"{tmp}/sketchps")

    def test_daemons_get_the_tls_arguments(self):
        ctx = systems.Context(net=None, bandwidth="none", server_bin="s", worker_bin="w", ddp_script="", job_path=Path("j"),
                              overrides=["a=1"], ddp_args=[], workers=4, servers=2, rounds=3, timeout=1,
                              tls_args=["--tls-dir", "/c"])
        args = systems.sketchps_common(systems.System("sketchps topk", "sketchps", "topk"), ctx)
        self.assertEqual(args[:4], ["--job", "j", "--tls-dir", "/c"])
        ctx.tls_args = ["--insecure"]
        self.assertIn("--insecure", systems.sketchps_common(systems.System("sketchps topk", "sketchps", "topk"), ctx))


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
        class A:
            data, train_samples, seed, batch = ddp_train.DATA_DIR, 1000, 3, 8
        perm = ddp_train.epoch_permutation(1000, 3, 1)
        steps = 1000 // (4 * 8)
        batches = [ddp_train.Batches(A, rank, 4) for rank in range(4)]
        for b in batches:
            b.images, b.labels = ddp_train.torch.arange(60000).view(-1, 1, 1).expand(-1, 28, 28), ddp_train.torch.arange(60000)
        labels = [b(steps + 2)[1].tolist() for b in batches]  # epoch 1, step 2
        self.assertEqual(sum(labels, []), perm[2 * 32:3 * 32])

    def test_init_is_deterministic_and_bounded(self):
        a, b = ddp_train.Cnn(), ddp_train.Cnn()
        ddp_train.init_like_sketchps(a, 1)
        ddp_train.init_like_sketchps(b, 1)
        self.assertEqual(sum(p.numel() for p in a.parameters()), 220234)
        for p, q in zip(a.parameters(), b.parameters()):
            self.assertTrue(ddp_train.torch.equal(p, q))
        self.assertLessEqual(a.fc1.weight.abs().max().item(), 1 / 3136 ** 0.5)
        self.assertGreater(a.fc1.weight.abs().max().item(), 0.9 / 3136 ** 0.5)


if __name__ == "__main__":
    unittest.main(verbosity=1)
