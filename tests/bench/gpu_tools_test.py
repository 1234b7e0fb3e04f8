#!/usr/bin/python3
"""The GPU acceptance run's helpers that need no GPU, on inputs whose answer is known:
bench/gpu/fmnist_subset.py keeps the first N training images and every test image byte for byte and
names a bad source; bench/gpu/gpu_report.py turns a gpu-check output folder into the tables of
docs/gpu.md (targets met or not from the measured passes and times, the training comparison, stages
not run); scripts/gpu-check.sh records the stages its time budget leaves out and still writes the
report; scripts/train-check.sh names bad options; scripts/suite-shards.sh runs every selected case of a
Catch2-like suite exactly once across its shards and sums their results. Run by ctest as
bench/gpu_tools."""
import gzip
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SUBSET = REPO / "bench" / "gpu" / "fmnist_subset.py"
GPU_CHECK = REPO / "scripts" / "gpu-check.sh"
TRAIN_CHECK = REPO / "scripts" / "train-check.sh"
SHARDS = REPO / "scripts" / "suite-shards.sh"
REPORT = REPO / "bench" / "gpu" / "gpu_report.py"
NAMES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "t10k": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


def idx(magic, dims, data):
    return gzip.compress(struct.pack(">I", magic) + struct.pack(f">{len(dims)}I", *dims) + data)


def fake_source(folder: Path, train: int, test: int, rng: random.Random) -> dict:
    """Four IDX files of random pixels and labels; returns their raw data by file name."""
    folder.mkdir(parents=True, exist_ok=True)
    raw = {}
    for split, count in (("train", train), ("t10k", test)):
        images, labels = NAMES[split]
        raw[images] = bytes(rng.randrange(256) for _ in range(count * 28 * 28))
        raw[labels] = bytes(rng.randrange(10) for _ in range(count))
        (folder / images).write_bytes(idx(0x803, [count, 28, 28], raw[images]))
        (folder / labels).write_bytes(idx(0x801, [count], raw[labels]))
    return raw


def subset(*args):
    return subprocess.run([sys.executable, str(SUBSET), *args], capture_output=True, text=True, timeout=60)


class SubsetTest(unittest.TestCase):
    def test_keeps_the_first_training_images_and_every_test_image(self):
        with tempfile.TemporaryDirectory() as tmp:
            raw = fake_source(Path(tmp, "src"), train=7, test=3, rng=random.Random(5))
            done = subset("--train", "4", "--src", str(Path(tmp, "src")), "--out", str(Path(tmp, "out")))
            self.assertEqual(done.returncode, 0, done.stderr)
            expected = {
                "train-images-idx3-ubyte.gz": (0x803, [4, 28, 28], raw["train-images-idx3-ubyte.gz"][:4 * 784]),
                "train-labels-idx1-ubyte.gz": (0x801, [4], raw["train-labels-idx1-ubyte.gz"][:4]),
                "t10k-images-idx3-ubyte.gz": (0x803, [3, 28, 28], raw["t10k-images-idx3-ubyte.gz"]),
                "t10k-labels-idx1-ubyte.gz": (0x801, [3], raw["t10k-labels-idx1-ubyte.gz"]),
            }
            for name, (magic, dims, data) in expected.items():
                written = gzip.decompress(Path(tmp, "out", name).read_bytes())
                header = struct.pack(">I", magic) + struct.pack(f">{len(dims)}I", *dims)
                self.assertEqual(written, header + data, name)

    def test_a_bad_count_or_source_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp, "src")
            fake_source(src, train=5, test=2, rng=random.Random(1))
            for args, message in [(["--train", "6"], "--train 6: expected 1..5"),
                                  (["--train", "0"], "--train 0: expected 1..5")]:
                done = subset(*args, "--src", str(src), "--out", str(Path(tmp, "out")))
                self.assertEqual(done.returncode, 2)
                self.assertIn(message, done.stderr)
            (src / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"\x00\x00\x08\x09rest"))
            done = subset("--train", "2", "--src", str(src), "--out", str(Path(tmp, "out")))
            self.assertEqual(done.returncode, 2)
            self.assertIn("t10k-labels-idx1-ubyte.gz: magic 0x00000809 is not an IDX file", done.stderr)
            (src / "train-images-idx3-ubyte.gz").unlink()
            done = subset("--train", "2", "--src", str(src), "--out", str(Path(tmp, "out")))
            self.assertIn("train-images-idx3-ubyte.gz: missing", done.stderr)


def bench_row(method, seconds, passes, d=1000):
    return {"method": method, "d": d, "seconds": seconds, "ratio_to_stream_pass": passes}


class ReportTest(unittest.TestCase):
    def report(self, files: dict) -> str:
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in files.items():
                Path(tmp, name).write_text(text)
            done = subprocess.run([sys.executable, str(REPORT), tmp], capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr)
            return done.stdout

    def test_targets_training_and_stages_not_run(self):
        results = [{"check": "suite", "suite": "schemes", "exit": 0, "seconds": 91.5, "summary": "All tests passed"},
                   {"check": "train", "kernels": "cuda", "exit": 0, "seconds": 80, "ranks_on_device": 4,
                    "accuracy": 0.8712, "samples": 30000, "epochs": 2},
                   {"check": "train", "kernels": "cpu", "exit": 0, "seconds": 95, "ranks_on_device": 4,
                    "accuracy": 0.8690, "samples": 30000, "epochs": 2},
                   {"check": "train", "kernels": "mixed", "exit": 0, "seconds": 90, "ranks_on_device": 4,
                    "accuracy": 0.8590, "samples": 30000, "epochs": 2},
                   {"check": "train_compare", "points_apart": 0.22, "tolerance": 0.5, "within": True},
                   {"check": "train_compare", "kernels": "mixed", "points_apart": 1.0, "tolerance": 0.5,
                    "within": False},
                   {"check": "loadgen", "not_run": "budget"}]
        # sketchps: a read pass of 0.05 ms; top-k at 0.3 ms (7 passes), torch.topk 0.6 ms: met; accumulate
        # 27 passes: not met; recover 9 passes: met; the copy moves 8 bytes a float in 0.05 ms, our pass
        # reads 4 in 0.05: 50 % of its rate, not met.
        bench = [bench_row("stream_pass", 5e-5, 1.0), bench_row("stream_pass_device", 3e-5, 0.6),
                 bench_row("topk", 3e-4, 7.0),
                 bench_row("sketch_accumulate", 1.35e-3, 27.0), bench_row("sketch_recover", 4.5e-4, 9.0)]
        peers = {"device": "card", "torch": "2.x", "rows": [
            {"method": "torch_copy", "d": 1000, "seconds": 5e-5, "note": ""},
            {"method": "torch_topk_k", "d": 1000, "seconds": 6e-4, "note": ""},
            {"method": "csvec_accumulate", "d": 1000, "seconds": 2.6e-3, "note": ""},
            {"method": "csvec_recover", "d": 1000, "seconds": 2.5e-2, "note": ""}]}
        text = self.report({"results.jsonl": "".join(json.dumps(r) + "\n" for r in results),
                            "bench.json": json.dumps(bench), "torch_peers.json": json.dumps(peers),
                            "repro.md": "| network | d | P |\n|---|---|---|\n| loopback | 25M | 4 |\n"})
        rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
        self.assertIn("All tests passed", rows["unit suite schemes"])
        self.assertIn("not run: the time budget was spent", rows["loadgen"])
        self.assertIn("| 4 of 4 | 30,000 x 2 | 87.12 % |", rows["cuda"])
        self.assertIn("| 86.90 % |", rows["cpu"])
        self.assertIn("CUDA against CPU kernels: 0.22 points apart (tolerance 0.5): within", text)
        self.assertIn("| 85.90 % |", rows["mixed"])
        self.assertIn("Ranks 0-1 on CUDA and 2-3 on the CPU against CPU kernels: 1.0 points apart (tolerance 0.5): "
                      "**outside**", text)
        self.assertTrue(rows["stream_pass"].endswith("| no (50 %) |"), rows["stream_pass"])
        # The pass's kernels alone in 0.03 ms: 0.5 x 0.05 / 0.03 = 83 % of the copy's rate, met.
        self.assertTrue(rows["stream_pass_device"].endswith("| yes |"), rows["stream_pass_device"])
        self.assertTrue(rows["topk"].endswith("| yes |"), rows["topk"])
        self.assertTrue(rows["sketch_accumulate"].endswith("| no |"), rows["sketch_accumulate"])
        self.assertTrue(rows["sketch_recover"].endswith("| yes |"), rows["sketch_recover"])
        self.assertIn("| loopback | 25M | 4 |", text)

    def test_two_calls_make_one_report(self):
        machine = {"check": "machine", "gpu": "card", "driver": "1", "kernels": "cuda", "budget_s": 540}
        first = [machine, {"check": "suite", "suite": "kernels", "exit": 0, "seconds": 9, "summary": "first"},
                 {"check": "bench", "not_run": "budget"}, {"check": "loadgen", "not_run": "budget"}]
        second = [machine, {"check": "bench", "d": 1000, "exit": 0}, {"check": "loadgen", "not_run": "budget"}]
        with tempfile.TemporaryDirectory() as tmp:
            for name, found, bench in (("one", first, [bench_row("stream_pass", 1e-4, 1.0)]),
                                       ("two", second, [bench_row("stream_pass", 5e-5, 1.0)])):
                Path(tmp, name).mkdir()
                Path(tmp, name, "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in found))
                Path(tmp, name, "bench.json").write_text(json.dumps(bench))
            done = subprocess.run([sys.executable, str(REPORT), str(Path(tmp, "one")), str(Path(tmp, "two"))],
                                  capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        checks = [line.split("|")[1].strip() for line in done.stdout.split("#### Training")[0].splitlines()
                  if line.startswith("| ") and not line.startswith("| check")]
        self.assertEqual(checks, ["machine", "unit suite kernels", "bench", "loadgen"])  # bench ran in the second
        self.assertIn("| loadgen | not run: the time budget was spent |", done.stdout)
        self.assertIn("| stream_pass | 0.050 ms |", done.stdout)  # the second call's bench.json

    def test_a_line_that_is_not_json_is_named_and_the_rest_reported(self):
        text = self.report({"results.jsonl": '{"check":"nogpu","exit":2}\n'
                                              '{"check":"train","kernels":"cpu","accuracy":None}\n'
                                              '{"check":"bench","d":1000,"exit":0}\n'})
        self.assertIn("| unreadable | where results.jsonl line 2, exit 1, text {\"check\":\"train\"", text)
        self.assertIn("| nogpu | exit 2 |", text)
        self.assertIn("| bench | d 1000, exit 0 |", text)

    def test_missing_outputs_are_said(self):
        text = self.report({})
        for said in ("(no results.jsonl)", "(no training job ran)", "(no bench.json)", "(no repro.md",
                     "(no loadgen results)"):
            self.assertIn(said, text)


class ScriptsTest(unittest.TestCase):
    def test_a_spent_budget_leaves_every_stage_out_and_still_reports(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "GPU_CHECK_BUDGET": "30"}
            done = subprocess.run(["bash", str(GPU_CHECK), "--cpu", "--out", tmp], env=env, capture_output=True,
                                  text=True, timeout=120)
            self.assertEqual(done.returncode, 1, done.stderr)
            records = [json.loads(line) for line in Path(tmp, "results.jsonl").read_text().splitlines()]
            self.assertEqual([r["check"] for r in records if r.get("not_run") == "budget"],
                             ["tests", "bench", "train", "loadgen", "repro"])  # nogpu: --cpu leaves it out
            self.assertIn("failed: tests bench train loadgen repro", done.stderr)
            self.assertIn("| tests | not run: the time budget was spent |", Path(tmp, "gpu.md").read_text())

    def test_train_check_names_bad_options(self):
        for args, message in [([], "the first argument is the output folder"),
                              (["/tmp/x", "--kernels", "gpu"], "--kernels 'gpu': expected cpu, cuda and/or mixed"),
                              (["/tmp/x", "--tolerance", "half"], "--tolerance 'half': expected points"),
                              (["/tmp/x", "--frobnicate"], "unknown argument --frobnicate")]:
            done = subprocess.run(["bash", str(TRAIN_CHECK), *args], capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 2, args)
            self.assertIn(message, done.stderr)


# A stand-in for a Catch2 2.13 suite: lists FAKE_NAMES (one per line) with --list-test-names-only (exit
# status: their count, as Catch2's), runs the names of a -f file (Catch2's escapes: a backslash takes
# the next character as it is; an unescaped comma separates names), appends each to FAKE_LOG, fails
# "boom" and sleeps in "sleep". A name it does not know is an error, as an unmatched spec would be.
FAKE_SUITE = r"""#!/usr/bin/python3
import os, sys, time
names = os.environ["FAKE_NAMES"].split("\n")
args = sys.argv[1:]
if "--list-test-names-only" in args:
    print("\n".join(names))
    sys.exit(len(names))
wanted = list(names)
if "-f" in args:
    wanted = []
    for line in open(args[args.index("-f") + 1]).read().splitlines():
        name, escaped = "", False
        for ch in line:
            if escaped:
                name, escaped = name + ch, False
            elif ch == "\\":
                escaped = True
            elif ch == ",":
                wanted.append(name); name = ""
            else:
                name += ch
        wanted.append(name)
failed = 0
for name in wanted:
    if name not in names:
        print("no test case named", repr(name)); sys.exit(3)
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(name + "\n")
    if name == "sleep":
        sys.stdout.flush(); time.sleep(30)
    failed += name == "boom"
if failed:
    print(f"test cases: {len(wanted)} | {len(wanted) - failed} passed | {failed} failed")
else:
    print(f"All tests passed ({3 * len(wanted)} assertions in {len(wanted)} test cases)")
sys.exit(failed)
"""


class SuiteShardsTest(unittest.TestCase):
    NAMES = ["plain", "with, a comma", "with [brackets]", "with \\ a backslash", "last one"]

    def shards(self, names, *args):
        with tempfile.TemporaryDirectory() as tmp:
            exe = Path(tmp, "suite")
            exe.write_text(FAKE_SUITE)
            exe.chmod(0o755)
            env = {**os.environ, "FAKE_NAMES": "\n".join(names), "FAKE_LOG": str(Path(tmp, "log"))}
            done = subprocess.run(["bash", str(SHARDS), str(exe), *args, str(Path(tmp, "out.txt"))], env=env,
                                  capture_output=True, text=True, timeout=60)
            log = Path(tmp, "log").read_text().splitlines() if Path(tmp, "log").exists() else []
            return done, log

    def test_every_case_runs_once_across_the_shards(self):
        for shards in ("1", "2", "3", "9"):
            done, log = self.shards(self.NAMES, shards, "30")
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            self.assertEqual(sorted(log), sorted(self.NAMES), shards)
            used = min(int(shards), len(self.NAMES))
            self.assertEqual(done.stdout.splitlines()[-1], f"5 test cases in {used} shards: 5 passed, 0 failed")

    def test_a_failure_and_a_cut_off_shard_are_counted(self):
        done, _ = self.shards(self.NAMES + ["boom"], "2", "30")
        self.assertEqual(done.returncode, 1)
        self.assertEqual(done.stdout.splitlines()[-1], "6 test cases in 2 shards: 5 passed, 1 failed")
        done, log = self.shards(["a", "b", "sleep", "c"], "2", "2")  # shard 0: a, sleep; shard 1: b, c
        self.assertEqual(done.returncode, 124)
        self.assertEqual(done.stdout.splitlines()[-1], "4 test cases in 2 shards: 2 passed, 0 failed, "
                                                       "2 not run (shard 0 exit 124)")

    def test_bad_arguments_are_named(self):
        for args, message in [(("0", "30"), "SHARDS '0' is not a positive whole number"),
                              (("2", "soon"), "SECONDS 'soon' is not a positive whole number")]:
            done, _ = self.shards(self.NAMES, *args)
            self.assertEqual(done.returncode, 2, args)
            self.assertIn(message, done.stderr)


if __name__ == "__main__":
    unittest.main()
