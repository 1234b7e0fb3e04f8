#!/usr/bin/env python3
"""Unit tests of the chaos suite's own logic (deploy/chaos), no namespaces, root or daemons needed: the
case definitions (every fault of the issue in both modes, names, the --short subset, --cases globs,
the baselines and job overrides), the ledger of the workers' round records (complete, missing,
replayed, rolled back, disagreeing, a restarted worker), the stall measure, the judgement of outcomes
against expectations (completion, bitwise, ledger, accuracy, stall, shard exit codes, logs, an
expected stop: in time, every survivor, naming the fault), the table and the generated doc block,
the nftables rulesets of the faults, the decentralized compose topology, and the delay relay on
loopback (a round trip through it takes 2 x (delay - jitter) at least). Exit 1 when any test fails
(unittest).
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "deploy/chaos"))
sys.path.insert(0, str(REPO / "deploy/emulate"))
import cases as C  # noqa: E402
import chaos_run  # noqa: E402
import delay_relay  # noqa: E402
import faults  # noqa: E402
import topology  # noqa: E402


def rec(rnd: int, checksum: str, t: float | None = None, **kw) -> dict:
    r = {"round": rnd, "checksum": checksum, "workers": 2}
    if t is not None:
        r["time"] = t
    r.update(kw)
    return r


def history(n: int, prefix: str = "c") -> list[dict]:
    return [rec(i, f"{prefix}{i}", t=float(i)) for i in range(n)]


def by_name(name: str) -> C.Case:
    return next(c for c in C.CASES if c.name == name)


class CaseDefinitionTest(unittest.TestCase):
    def test_names_are_unique_and_modes_known(self):
        names = [c.name for c in C.CASES]
        self.assertEqual(len(names), len(set(names)))
        for c in C.CASES:
            self.assertIn(c.mode, ("ps", "decentralized"), c.name)
            self.assertIn(c.fault, ("loss", "delay", "partition", "slow", "kill", "disk-full"), c.name)
            self.assertTrue(c.what and c.expect.text, c.name)
            self.assertTrue(c.name.startswith("ps-" if c.mode == "ps" else "dec-"), c.name)

    def test_every_fault_of_the_issue_is_covered(self):
        def have(mode, **kw):
            return [c for c in C.CASES if c.mode == mode and all(getattr(c, k) == v for k, v in kw.items())]
        for mode in ("ps", "decentralized"):
            for pct in (1, 5):
                self.assertTrue(have(mode, fault="loss", loss_pct=pct), (mode, pct))
            self.assertTrue(have(mode, fault="delay", delay_ms=50, jitter_ms=20), mode)
            for seconds in (5, 60):
                self.assertTrue(have(mode, fault="partition", target="worker-1", duration_s=seconds), (mode, seconds))
            self.assertTrue(have(mode, fault="slow", target="worker-1", rate="10mbit"), mode)
            self.assertTrue([c for c in have(mode, fault="kill") if c.target.startswith("worker")], mode)
        for seconds in (5, 60):
            self.assertTrue(have("ps", fault="partition", target="server-1", duration_s=seconds), seconds)
        for every in (1, 20):
            self.assertTrue(have("ps", fault="kill", target="worker-1", checkpoint_every=every), every)
            self.assertTrue(have("ps", fault="kill", target="server-1", checkpoint_every=every), every)
        self.assertTrue(have("ps", fault="disk-full"))
        # a decentralized worker killed for good: 2 workers cannot regroup, 3 can
        self.assertEqual(sorted(c.workers for c in have("decentralized", fault="kill")), [2, 3])
        self.assertTrue(all(not c.restart for c in have("decentralized", fault="kill")))

    def test_kill_round_is_not_a_checkpoint_round(self):
        self.assertNotEqual(C.KILL_ROUND % 20, 0)
        self.assertLess(C.KILL_ROUND, C.ROUNDS)
        self.assertLess(C.FAULT_ROUND, C.ROUNDS)

    def test_short_subset_is_small_and_ps(self):
        short = C.select(C.CASES, None, True)
        self.assertTrue(2 <= len(short) <= 3, [c.name for c in short])
        self.assertEqual({c.baseline for c in short}, {"ps-baseline"})   # one baseline keeps it under 3 minutes
        self.assertTrue(all(c.duration_s <= 5 for c in short))

    def test_select_by_globs(self):
        got = [c.name for c in C.select(C.CASES, ["ps-partition-*", "dec-loss-1pct"], False)]
        self.assertEqual(got, ["ps-partition-worker-5s", "ps-partition-worker-60s", "ps-partition-shard-5s",
                               "ps-partition-shard-60s", "ps-partition-worker-5s-deadline", "dec-loss-1pct"])
        self.assertEqual([c.name for c in C.select(C.CASES, ["ps-loss-*"], True)], ["ps-loss-1pct"])
        with self.assertRaisesRegex(ValueError, "no case matches nope"):
            C.select(C.CASES, ["nope"], False)

    def test_baselines_follow_the_job(self):
        self.assertEqual(by_name("ps-kill-worker-ckpt1").baseline, "ps-baseline-dense")
        self.assertEqual(by_name("dec-kill-worker-p3").baseline, "dec-baseline-p3")
        self.assertEqual(by_name("ps-kill-shard-ckpt1").baseline, "ps-baseline")
        names = [b.name for b in C.baselines_for(C.CASES)]
        self.assertEqual(names, ["ps-baseline", "ps-baseline-dense", "dec-baseline", "dec-baseline-p3"])
        for b in C.baselines_for(C.CASES):
            self.assertEqual(b.fault, "none")
            self.assertTrue(b.expect.completes)
        dense = next(b for b in C.baselines_for(C.CASES) if b.name == "ps-baseline-dense")
        self.assertIn("scheme.name=dense", C.job_sets(dense))

    def test_job_sets(self):
        ps = C.job_sets(by_name("ps-kill-shard-ckpt1"))
        self.assertIn("model=mlp", ps)
        self.assertIn(f"train.rounds={C.ROUNDS}", ps)
        self.assertIn("checkpoint.every_rounds=1", ps)
        self.assertNotIn("mode=decentralized", ps)
        dec = C.job_sets(by_name("dec-kill-worker-p3"))
        self.assertIn("mode=decentralized", dec)
        self.assertIn(f"peer.timeout_seconds={C.PEER_TIMEOUT_S}", dec)
        self.assertIn("workers=3", dec)
        # the dense override comes after the common topk one, so it wins
        sets = C.job_sets(by_name("ps-kill-worker-ckpt20"))
        self.assertGreater(sets.index("scheme.name=dense"), sets.index("scheme.name=topk"))

    def test_expected_stops_are_bounded(self):
        for c in C.CASES:
            if not c.expect.completes:
                self.assertIsNotNone(c.expect.fail_within_s, c.name)
                self.assertTrue(c.expect.names_fault, c.name)
        self.assertGreater(by_name("dec-partition-worker-60s").duration_s, C.PEER_TIMEOUT_S)
        self.assertLess(by_name("dec-partition-worker-5s").duration_s, C.PEER_TIMEOUT_S)


class LedgerTest(unittest.TestCase):
    def test_complete_and_agreeing(self):
        led = C.ledger({"worker-0": history(5), "worker-1": history(5)}, 5, ["worker-0", "worker-1"], [])
        self.assertTrue(led["ok"], led["problems"])
        self.assertEqual(led["rolled_back"], [])

    def test_missing_round(self):
        h = history(5)
        del h[2]
        led = C.ledger({"worker-0": h, "worker-1": history(5)}, 5, ["worker-0", "worker-1"], [])
        self.assertFalse(led["ok"])
        self.assertIn("worker-0 misses rounds 2", led["problems"])

    def test_round_recorded_twice_is_not_exactly_once(self):
        h = history(5)
        h.insert(3, rec(2, "c2"))
        led = C.ledger({"worker-0": h}, 5, ["worker-0"], [])
        self.assertFalse(led["ok"])
        self.assertIn("worker-0 recorded rounds 2 twice", led["problems"])

    def test_rolled_back_round_is_run_once_more(self):
        h = history(5)
        h.insert(4, rec(3, "c3-old"))   # round 3 completed with 3 workers, rolled back, run again
        h[3], h[4] = h[4], h[3]
        led = C.ledger({"worker-0": h, "worker-1": history(5)}, 5, ["worker-0", "worker-1"], [])
        self.assertTrue(led["ok"], led["problems"])
        self.assertEqual(led["rolled_back"], [3])

    def test_survivors_disagree(self):
        other = history(5)
        other[4] = rec(4, "x")
        led = C.ledger({"worker-0": history(5), "worker-1": other}, 5, ["worker-0", "worker-1"], [])
        self.assertFalse(led["ok"])
        self.assertEqual(led["disagree"], [4])

    def test_restarted_worker_may_miss_the_round_it_died_in(self):
        h = [r for r in history(6) if r["round"] != 3]
        led = C.ledger({"worker-0": history(6), "worker-1": h}, 6, ["worker-0", "worker-1"], ["worker-1"])
        self.assertTrue(led["ok"], led["problems"])
        h2 = [r for r in h if r["round"] != 4]
        led = C.ledger({"worker-0": history(6), "worker-1": h2}, 6, ["worker-0", "worker-1"], ["worker-1"])
        self.assertFalse(led["ok"])

    def test_killed_worker_records_are_not_required(self):
        led = C.ledger({"worker-0": history(5), "worker-2": history(2)}, 5, ["worker-0"], [])
        self.assertTrue(led["ok"], led["problems"])
        self.assertFalse(led["workers"]["worker-2"]["survivor"])

    def test_rounds_beyond_the_job(self):
        led = C.ledger({"worker-0": history(5) + [rec(5, "c5")]}, 5, ["worker-0"], [])
        self.assertFalse(led["ok"])

    def test_ranges(self):
        self.assertEqual(C._ranges([1, 2, 3, 7, 9, 10]), "1-3, 7, 9-10")
        self.assertEqual(C._ranges([]), "none")


class TimingTest(unittest.TestCase):
    def test_stall_is_longest_gap_minus_median(self):
        recs = [rec(i, "c", t=0.1 * i) for i in range(10)]
        for r in recs[6:]:
            r["time"] += 5.0            # a 5 s pause before round 6
        recs.append(rec(10, "c", t=recs[-1]["time"] + 3.0, final=True))   # the final evaluation: left out
        t = C.round_timing(recs)
        self.assertAlmostEqual(t["median_round_s"], 0.1, places=3)
        self.assertAlmostEqual(t["stall_s"], 5.0, places=2)
        self.assertEqual(t["stall_round"], 6)

    def test_no_records(self):
        self.assertIsNone(C.round_timing([])["stall_s"])


def completed(checksum="aa", **kw) -> dict:
    o = {"completed": True, "checksum": checksum, "accuracy": 0.70, "wall_s": 20.0, "exits": {},
         "stall_s": 1.0, "logs": {}, "addresses": {}}
    o.update(kw)
    return o


BASE = {"completed": True, "checksum": "aa", "accuracy": 0.70, "wall_s": 18.0, "median_round_s": 0.1}
ADDR = {"certs": "10.213.0.2", "worker-0": "10.213.0.3", "worker-1": "10.213.0.4"}


def stopped(message: str, failing: str = "worker-0", exits=None, **kw) -> dict:
    o = {"completed": False, "error": f"{failing} exited 1", "wall_s": 30.0, "addresses": ADDR,
         "worker_exits": exits or {"worker-0": (1, 22.0), "worker-1": (1, 23.0)}, "killed_for_good": [],
         "failure": {"service": failing, "code": 1, "message": message}, "first_failure_s": 22.0}
    o.update(kw)
    return o


class JudgeTest(unittest.TestCase):
    def test_completes_bitwise(self):
        self.assertEqual(C.judge(by_name("ps-loss-1pct"), completed(), BASE), ("PASS", []))

    def test_weights_differ(self):
        verdict, unmet = C.judge(by_name("ps-loss-1pct"), completed("bb"), BASE)
        self.assertEqual(verdict, "FAIL")
        self.assertIn("final weights differ", unmet[0])

    def test_no_baseline_cannot_pass_bitwise(self):
        verdict, unmet = C.judge(by_name("ps-loss-1pct"), completed(), {"completed": False})
        self.assertEqual(verdict, "FAIL")
        self.assertIn("no fault-free checksum", unmet[0])

    def test_did_not_complete(self):
        verdict, unmet = C.judge(by_name("ps-loss-5pct"), {"completed": False, "error": "worker-1 exited 1\n tail"},
                                 BASE)
        self.assertEqual(verdict, "FAIL")
        self.assertEqual(unmet, ["did not complete: worker-1 exited 1"])

    def test_shard_exit_codes(self):
        ok = completed(exits={"server-0": 0, "server-1": 0})
        self.assertEqual(C.judge(by_name("ps-loss-1pct"), ok, BASE)[0], "PASS")
        bad = completed(exits={"server-0": 0, "server-1": 4})
        verdict, unmet = C.judge(by_name("ps-loss-1pct"), bad, BASE)
        self.assertEqual(verdict, "FAIL")
        self.assertIn("server-1 4", unmet[0])
        disk = by_name("ps-disk-full")
        done = "final checkpoint failed (the job is done: every worker finished; ...)"
        logs = {"server-0": f"x: write failed: No space left on device\n{done}",
                "server-1": f"No space left on device\n{done}"}
        self.assertEqual(C.judge(disk, completed(exits={"server-0": 0, "server-1": 0}, logs=logs), BASE)[0], "PASS")
        self.assertEqual(C.judge(disk, completed(exits={"server-0": 0, "server-1": 1}, logs=logs), BASE)[0], "FAIL")
        # A shard that does not say the job was done when its final checkpoint failed.
        quiet = dict(logs, **{"server-1": "No space left on device"})
        self.assertEqual(C.judge(disk, completed(exits={"server-0": 0, "server-1": 0}, logs=quiet), BASE)[0], "FAIL")

    def test_log_expectation(self):
        case = by_name("ps-kill-shard-ckpt20")
        good = completed(logs={"server-1": "info [server 1] shard 1: serving range [1, 2) of 2 elements from worker "
                                            "0's replica at round 50 (its checkpoint held round 40)"})
        self.assertEqual(C.judge(case, good, BASE)[0], "PASS")
        bad = completed(logs={"server-1": "shard 1: worker 1 offered its replica at round 50"})
        verdict, unmet = C.judge(case, bad, BASE)
        self.assertEqual(verdict, "FAIL")
        self.assertIn("server-1's log lacks", unmet[0])
        verdict, unmet = C.judge(case, completed(), BASE)
        self.assertIn("no log of server-1", unmet)

    def test_stall_bound(self):
        case = by_name("ps-partition-worker-5s")
        self.assertEqual(C.judge(case, completed(stall_s=19.0), BASE)[0], "PASS")
        verdict, unmet = C.judge(case, completed(stall_s=31.0), BASE)
        self.assertEqual(verdict, "FAIL")
        self.assertEqual(unmet, ["stalled 31.0 s, more than 20 s"])

    def test_ledger_and_accuracy(self):
        case = by_name("dec-kill-worker-p3")
        logs = {"worker-0": "warning [worker 0] regrouped into epoch 1 after 2.1 s: rank 0 of 2 (lost 1), restarting at "
                                "round 51 of 120 (learning rate x0.667)"}
        good = completed("zz", ledger={"ok": True, "problems": []}, accuracy=0.68, logs=logs)
        self.assertEqual(C.judge(case, good, BASE), ("PASS", []))   # the weights may differ: no bitwise check
        far = completed("zz", ledger={"ok": True, "problems": []}, accuracy=0.50, logs=logs)
        self.assertIn("accuracy 0.5000 is more than 0.05", C.judge(case, far, BASE)[1][0])
        broken = completed("zz", ledger={"ok": False, "problems": ["worker-0 misses rounds 7"]}, logs=logs)
        self.assertEqual(C.judge(case, broken, BASE)[1], ["ledger: worker-0 misses rounds 7"])

    def test_expected_stop(self):
        case = by_name("dec-partition-worker-60s")
        msg = "error [worker 0] round 41: rank 1 (10.213.0.4:7080) sent nothing for step 1 within 20s"
        self.assertEqual(C.judge(case, stopped(msg), BASE), ("PASS", []))

    def test_expected_stop_but_completed(self):
        verdict, unmet = C.judge(by_name("dec-partition-worker-60s"), completed(), BASE)
        self.assertEqual(verdict, "FAIL")
        self.assertIn("completed, but the expectation is that it stops", unmet)

    def test_expected_stop_too_late_or_not_everyone(self):
        case = by_name("dec-partition-worker-60s")
        late = stopped("rank 1 sent nothing", exits={"worker-0": (1, 80.0), "worker-1": (1, 22.0)})
        self.assertIn("failed later than", C.judge(case, late, BASE)[1][0])
        hung = stopped("rank 1 sent nothing", exits={"worker-0": (1, 22.0), "worker-1": (None, None)})
        self.assertIn("worker-1 did not exit by itself", C.judge(case, hung, BASE)[1])

    def test_expected_stop_must_name_the_fault(self):
        case = by_name("dec-partition-worker-60s")
        verdict, unmet = C.judge(case, stopped("error [worker 0] something went wrong"), BASE)
        self.assertEqual(verdict, "FAIL")
        self.assertIn("does not name the fault", unmet[0])

    def test_killed_worker_is_no_survivor(self):
        case = by_name("dec-kill-worker-p2")
        o = stopped("error [worker 0] rank 1 (10.213.0.4:7080) did not accept step 1 within 20s",
                    exits={"worker-0": (1, 23.0), "worker-1": (-9, 0.0)}, killed_for_good=["worker-1"])
        self.assertEqual(C.judge(case, o, BASE), ("PASS", []))


class BaselineTest(unittest.TestCase):
    def test_two_runs_merge(self):
        merged = C.merge_baseline(dict(BASE, wall_s=20.0), dict(BASE, wall_s=24.0))
        self.assertEqual(merged["wall_s"], 22.0)
        self.assertEqual(merged["wall_s_runs"], [20.0, 24.0])
        self.assertTrue(merged["reproducible"])
        self.assertEqual(C.judge_baseline(merged), ("PASS", []))

    def test_not_reproducible(self):
        merged = C.merge_baseline(dict(BASE), dict(BASE, checksum="bb"))
        verdict, unmet = C.judge_baseline(merged)
        self.assertEqual(verdict, "FAIL")
        self.assertIn("not deterministic", unmet[0])

    def test_failed_run(self):
        merged = C.merge_baseline(dict(BASE), {"completed": False, "error": "worker-0 exited 1\nx"})
        self.assertFalse(merged["completed"])
        self.assertIn("did not complete: worker-0 exited 1", C.judge_baseline(merged)[1][0])
        self.assertEqual(C.judge_baseline(dict(BASE)), ("PASS", []))   # run once: nothing to compare


class NamesFaultTest(unittest.TestCase):
    def test_target_by_name_rank_or_address(self):
        case = by_name("dec-partition-worker-60s")
        for msg in ("rank 1 (x) sent nothing", "peer worker-1 is gone", "10.213.0.4:7080 unreachable"):
            self.assertTrue(C.names_fault(case, "worker-0", msg, ADDR), msg)
        self.assertFalse(C.names_fault(case, "worker-0", "rank 0 is slow", ADDR))

    def test_the_cut_off_host_names_the_other_side(self):
        case = by_name("dec-partition-worker-60s")
        self.assertTrue(C.names_fault(case, "worker-1", "rank 0 (10.213.0.3:7080) sent nothing", ADDR))
        self.assertFalse(C.names_fault(case, "worker-1", "timeout", ADDR))

    def test_shard_terms(self):
        self.assertIn("shard 1", C.fault_terms("server-1", "10.213.0.4"))
        self.assertIn("10.213.0.4", C.fault_terms("server-1", "10.213.0.4"))

    def test_disk(self):
        case = by_name("ps-disk-full")
        self.assertTrue(C.names_fault(case, "server-0", "write failed: No space left on device", {}))


class TableTest(unittest.TestCase):
    def rows(self):
        base = C.baseline_case("ps")
        b = C.merge_baseline(dict(BASE, wall_s=17.0), dict(BASE, wall_s=19.0))
        return [
            {"case": base, "outcome": b, "baseline": b, "verdict": "PASS", "unmet": []},
            {"case": by_name("ps-partition-worker-5s"), "outcome": completed(stall_s=6.2, stall_round=41,
                                                                             notes=["33 frames | dropped"]),
             "baseline": b, "verdict": "PASS", "unmet": []},
            {"case": by_name("dec-partition-worker-60s"), "outcome": stopped("rank 1 sent nothing"), "baseline": b,
             "verdict": "FAIL", "unmet": ["worker-1 did not exit by itself"]},
            {"case": by_name("ps-slow-worker-10mbit"), "outcome": {"skipped": "not run"}, "verdict": "not run",
             "unmet": []},
        ]

    def test_table(self):
        text = C.table(self.rows())
        lines = text.splitlines()
        self.assertEqual(lines[0], "| case | mode | fault | expected | observed | time cost | verdict |")
        self.assertEqual(len(lines), 2 + 4)
        for line in lines:
            self.assertEqual(line.replace("\\|", "").count("|"), 8, line)
        self.assertIn("18.0 s (wall, mean of 17.0 and 19.0)", lines[2])
        self.assertIn("checksum aa (the same in both runs)", lines[2])
        self.assertIn("+2.0 s (20.0 vs 18.0); stall 6.2 s at round 41", lines[3])
        self.assertIn("33 frames \\| dropped", lines[3])
        self.assertIn("stopped (worker-0 exit 1 at +22.0 s, worker-1 exit 1 at +23.0 s)", lines[4])
        self.assertIn("FAIL: worker-1 did not exit by itself", lines[4])
        self.assertIn("not run", lines[5])
        self.assertEqual(C.summary_line(self.rows()), "1 PASS, 1 FAIL, 1 not run of 3 cases")

    def test_short_paths(self):
        self.assertEqual(C.short_paths("x /work/runs/chaos/ps/volumes/shard-0-round-1.ckpt.tmp: write failed"),
                         "x …/shard-0-round-1.ckpt.tmp: write failed")
        self.assertEqual(C.short_paths("10.213.0.4:7080 and 1/2 workers"), "10.213.0.4:7080 and 1/2 workers")

    def test_write_doc_keeps_the_text_around_the_block(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "reliability.md"
            C.write_doc(path, "first")
            self.assertIn(C.BEGIN, path.read_text())
            path.write_text("# Title\n\nintro\n\n" + path.read_text().split("\n", 2)[2] + "\n## Findings\n\nkept\n")
            C.write_doc(path, "second table")
            text = path.read_text()
            self.assertIn("intro", text)
            self.assertIn("## Findings\n\nkept", text)
            self.assertIn("second table", text)
            self.assertNotIn("first", text)
            self.assertEqual(text.count(C.BEGIN), 1)
            other = Path(tmp) / "other.md"
            other.write_text("# Other\n")
            C.write_doc(other, "block")
            self.assertTrue(other.read_text().startswith("# Other\n\n" + C.BEGIN))


class FaultRulesTest(unittest.TestCase):
    def test_loss(self):
        rules = faults.loss_ruleset(1, ["p0", "p1"])
        self.assertIn("table bridge", rules)
        self.assertIn('iifname { "p0", "p1" } numgen random mod 10000 < 100 counter drop', rules)
        self.assertIn("< 500 ", faults.loss_ruleset(5, ["p0"]))
        with self.assertRaises(faults.FaultError):
            faults.loss_ruleset(0, ["p0"])

    def test_partition(self):
        rules = faults.partition_ruleset("p3")
        self.assertIn('iifname "p3" counter drop', rules)
        self.assertIn('oifname "p3" counter drop', rules)

    def test_redirect_skips_the_relays_own_connections(self):
        rules = faults.redirect_ruleset("10.213.0.0/24", 15999, 0x5C)
        self.assertIn("type nat hook output", rules)
        self.assertIn("ip daddr 10.213.0.0/24 meta l4proto tcp meta mark != 0x5c counter redirect to :15999", rules)

    def test_counters(self):
        words = "table bridge t { chain c { counter packets 12 bytes 900 drop counter packets 3 bytes 1 } }".split()
        self.assertEqual(sum(int(w) for w in faults._after(words, "packets")), 15)


class TopologyTest(unittest.TestCase):
    def test_decentralized_compose_loads(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "dec.yml"
            path.write_text(yaml.safe_dump(chaos_run.decentralized_compose(3)))
            services = topology.load(path)
        self.assertEqual(sorted(services), ["certs", "worker-0", "worker-1", "worker-2"])
        self.assertEqual(topology.one_shot(services), {"certs"})
        w2 = services["worker-2"]
        self.assertEqual(w2.argv[0], "sketchps-worker")
        self.assertIn("--peers=worker-0:7080,worker-1:7080,worker-2:7080", w2.argv)
        self.assertEqual(w2.environment["RANK"], "2")
        self.assertEqual(w2.environment["WORLD_SIZE"], "3")
        self.assertIn("--workers", services["certs"].argv)

    def test_binaries_flat_and_build_layout(self):
        with tempfile.TemporaryDirectory() as tmp:
            build, flat = Path(tmp) / "build", Path(tmp) / "flat"
            for rel in ("server/sketchps-server", "worker/sketchps-worker", "tools/sketchps"):
                for p in (build / rel, flat / Path(rel).name):
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_text("#!/bin/sh\n")
                    p.chmod(0o755)
            self.assertIn(f"sketchps-server={build / 'server/sketchps-server'}", chaos_run.binaries(build))
            self.assertIn(f"sketchps={flat / 'sketchps'}", chaos_run.binaries(flat))
            with self.assertRaises(SystemExit):
                chaos_run.binaries(Path(tmp) / "none")

    def test_strip_stamp_and_problem_lines(self):
        line = "2026-11-27 04:54:47.482 error [server 0] final checkpoint failed: x"
        self.assertEqual(chaos_run.strip_stamp(line), "error [server 0] final checkpoint failed: x")
        text = "2026-11-27 04:54:47.1 info [w] fine\n" + line + "\n2026-11-27 04:54:47.5 warn [w] careful\n"
        self.assertEqual(chaos_run.problem_lines(text).splitlines()[-1], "2026-11-27 04:54:47.5 warn [w] careful")


class RenderOnlyTest(unittest.TestCase):
    def test_render_only_rebuilds_table_and_doc(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            results = {"ps-baseline": dict(BASE), "ps-loss-1pct": completed()}
            meta = {"command": "bash deploy/chaos/run.sh ...", "date": "2026-11-27 05:00", "minutes": 1.0,
                    "bin_dir": "x", "not_run": []}
            (out / "results.json").write_text(json.dumps({"meta": meta, "outcomes": results}))
            doc = out / "reliability.md"
            rc = chaos_run.main(["--out", str(out), "--render-only", "--write-doc", str(doc)])
            self.assertEqual(rc, 0)
            self.assertIn("| ps-loss-1pct | ps |", (out / "table.md").read_text())
            self.assertIn("1 PASS, 0 FAIL of 1 cases", doc.read_text())


class RelayTest(unittest.TestCase):
    def test_release_keeps_order(self):
        self.assertEqual(delay_relay.release_times([0.0, 0.01, 0.02], [0.07, 0.03, 0.05]), [0.07, 0.07, 0.07])
        self.assertEqual(delay_relay.release_times([0.0, 1.0], [0.05, 0.05]), [0.05, 1.05])

    def test_round_trip_through_the_relay_is_delayed(self):
        async def scenario():
            async def echo(r, w):
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
                w.close()

            server = await asyncio.start_server(echo, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            relay = subprocess.Popen([sys.executable, str(REPO / "deploy/chaos/delay_relay.py"), "--port", "0",
                                      "--delay-ms", "50", "--jitter-ms", "20", "--target", f"127.0.0.1:{port}",
                                      "--seed", "1"], stdout=subprocess.PIPE, text=True)
            try:
                line = relay.stdout.readline()
                rport = int(line.split("127.0.0.1:")[1].split(":")[0])
                r, w = await asyncio.open_connection("127.0.0.1", rport)
                rtts = []
                for i in range(5):
                    t = time.monotonic()
                    w.write(b"%d" % i * 100)
                    await w.drain()
                    await r.readexactly(len(b"%d" % i * 100))
                    rtts.append(time.monotonic() - t)
                payload = bytes(range(256)) * 4096      # 1 MiB comes back intact and in order
                w.write(payload)
                await w.drain()
                back = await r.readexactly(len(payload))
                w.close()
                await w.wait_closed()
                return rtts, back == payload
            finally:
                relay.terminate()
                relay.wait(timeout=5)
                relay.stdout.close()
                server.close()
                await server.wait_closed()

        rtts, intact = asyncio.run(scenario())
        self.assertTrue(intact)
        self.assertGreaterEqual(min(rtts), 2 * 0.030 - 0.002, rtts)
        self.assertLess(max(rtts), 2.0, rtts)


if __name__ == "__main__":
    unittest.main()
