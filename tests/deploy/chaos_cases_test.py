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
import fnmatch
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
            self.assertIn(c.fault, C.FAULTS, c.name)
            self.assertNotEqual(c.fault, "none", c.name)
            self.assertIn(c.scheme, C.SCHEMES, c.name)
            self.assertTrue(c.what and c.expect.text, c.name)
            self.assertTrue(c.name.startswith("ps-" if c.mode == "ps" else "dec-"), c.name)
            if c.workers != 2:   # the job's size is in its name
                self.assertIn(f"p{c.workers}", c.name.split("-"), c.name) if not c.elastic else None

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
        # a decentralized worker killed for good: 2 workers cannot regroup, 3 and 4 can
        self.assertEqual(sorted(c.workers for c in have("decentralized", fault="kill")), [2, 3, 4])
        self.assertTrue(all(not c.restart for c in have("decentralized", fault="kill")))

    def test_issue_38_cases_are_covered(self):
        def have(**kw):
            return [c for c in C.CASES if c.mode == "ps" and all(getattr(c, k) == v for k, v in kw.items())]
        # 4 and 8 workers, in network faults and in kills of both kinds
        for workers in (4, 8):
            self.assertTrue(have(workers=workers, fault="partition"), workers)
            self.assertTrue([c for c in have(workers=workers, fault="kill") if c.target.startswith("worker")], workers)
            self.assertTrue([c for c in have(workers=workers, fault="kill") if c.target.startswith("server")], workers)
        # every stateful scheme in a worker kill and in a shard kill at 4 workers, each against its own job
        for scheme in C.STATEFUL:
            for kind in ("worker", "server"):
                found = [c for c in have(workers=4, fault="kill", scheme=scheme, initial_workers=0)
                         if c.target.startswith(kind)]
                self.assertTrue(found, (scheme, kind))
                self.assertTrue(all(c.baseline == C.baseline_name("ps", 4, scheme) for c in found), (scheme, kind))
        # the missing cases of the issue
        asym = [c for c in have(fault="partition") if c.peer]
        self.assertTrue(asym and all(c.peer.startswith("server") and c.target.startswith("worker") for c in asym))
        beyond = [c for c in have(fault="partition") if c.patience_s and c.duration_s > c.patience_s]
        self.assertTrue(beyond)
        for c in beyond:
            self.assertFalse(c.expect.completes)
            self.assertGreater(c.duration_s, c.expect.fail_within_s)   # still cut off when the bound ends
        self.assertTrue([c for c in have(fault="kill") if len(fnmatch.filter(["server-0", "server-1"], c.target)) == 2])
        self.assertTrue(have(fault="kill-mid-checkpoint"))
        self.assertEqual({c.damage for c in have(fault="damaged-checkpoint")}, {"flip", "truncate"})
        self.assertTrue([c for c in have(fault="damaged-checkpoint") if "checkpoint.on_damaged=older" in c.case_sets])
        refused = [c for c in have(fault="damaged-checkpoint") if not c.expect.completes]
        self.assertTrue(refused and all(c.expect.service_exit == (c.target, 2) for c in refused))
        workers_disk = [c for c in have(fault="disk-full") if c.target.startswith("worker")]
        self.assertEqual(sorted(c.stop_on_state_error for c in workers_disk), [False, True])
        self.assertTrue([c for c in have(fault="loss") if c.elastic])
        self.assertTrue([c for c in have(fault="kill") if c.elastic])
        two = [c for c in have(fault="kill") if c.loss_pct]
        self.assertTrue(two and {c.target.split("-")[0] for c in two} == {"worker", "server"})

    def test_every_kill_keeps_worker_state(self):
        for c in C.CASES:
            if c.fault in ("kill", "kill-mid-checkpoint", "damaged-checkpoint"):
                self.assertIn(c.scheme, C.STATEFUL, c.name)

    def test_cases_of_one_baseline_run_one_job(self):
        """A baseline is run once for all its cases: they must agree on everything that defines the job."""
        by_base: dict[str, set] = {}
        for c in C.CASES:
            by_base.setdefault(c.baseline, set()).add((c.mode, c.workers, c.scheme, c.sets, c.initial_workers,
                                                       c.join_at))
        for name, jobs in by_base.items():
            self.assertEqual(len(jobs), 1, (name, jobs))
        for c in C.CASES:   # what only the case sets never reaches its fault-free run
            base = next(b for b in C.baselines_for([c]))
            for s in c.case_sets:
                self.assertNotIn(s, C.job_sets(base), c.name)

    def test_elastic_joiners(self):
        c = by_name("ps-elastic-join-loss-1pct")
        self.assertEqual(c.joiners, {"worker-2": C.FAULT_ROUND, "worker-3": C.FAULT_ROUND})
        self.assertIn("ps.elastic=true", C.job_sets(c))
        self.assertIn("ps.initial_workers=2", C.job_sets(c))
        self.assertEqual(by_name("ps-kill-shard-ckpt1").joiners, {})

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
        got = [c.name for c in C.select(C.CASES, ["ps-partition-*-60s", "dec-loss-1pct", "ps-*-p8"], False)]
        self.assertEqual(got, ["ps-partition-worker-60s", "ps-partition-shard-60s", "dec-loss-1pct",
                               "ps-partition-worker-5s-p8", "ps-kill-worker-sdagc-p8", "ps-kill-shard-sdagc-p8",
                               "ps-loss-1pct-kill-worker-p8"])
        self.assertEqual([c.name for c in C.select(C.CASES, ["ps-loss-*"], True)], ["ps-loss-1pct-kill-worker"])
        with self.assertRaisesRegex(ValueError, "no case matches nope"):
            C.select(C.CASES, ["nope"], False)

    def test_baselines_follow_the_job(self):
        self.assertEqual(by_name("ps-kill-worker-dgc-p4").baseline, "ps-baseline-p4-dgc")
        self.assertEqual(by_name("ps-kill-worker-dgc-p4-ckpt1").baseline, "ps-baseline-p4-dgc")
        self.assertEqual(by_name("dec-kill-worker-p3").baseline, "dec-baseline-p3")
        self.assertEqual(by_name("ps-kill-shard-ckpt1").baseline, "ps-baseline")
        self.assertEqual(by_name("ps-elastic-join-kill-shard").baseline, "ps-baseline-p4-elastic")
        # a round deadline and checkpoint.on_damaged do not change the fault-free result
        self.assertEqual(by_name("ps-slow-worker-10mbit-deadline").baseline, "ps-baseline")
        self.assertEqual(by_name("ps-damaged-checkpoint-truncate-older-p4").baseline, "ps-baseline-p4")
        names = [b.name for b in C.baselines_for(C.CASES)]
        self.assertEqual(names[:3], ["ps-baseline", "dec-baseline", "dec-baseline-p3"])
        self.assertIn("ps-baseline-p8-sdagc", names)
        self.assertEqual(len(names), len(set(names)))
        for b in C.baselines_for(C.CASES):
            self.assertEqual(b.fault, "none")
            self.assertTrue(b.expect.completes)
        dgc = next(b for b in C.baselines_for(C.CASES) if b.name == "ps-baseline-p4-dgc")
        self.assertIn("scheme.name=dgc", C.job_sets(dgc))
        self.assertIn("workers=4", C.job_sets(dgc))
        # selecting one case alone gives the same fault-free job as the whole list does
        alone = C.baselines_for([by_name("ps-slow-worker-10mbit-deadline")])[0]
        self.assertNotIn("ps.round_deadline_seconds=0.05", C.job_sets(alone))
        el = C.baselines_for([by_name("ps-elastic-joiner-killed-deadline")])[0]
        self.assertEqual(el.joiners, {"worker-2": C.FAULT_ROUND, "worker-3": C.FAULT_ROUND})

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
        # the scheme override comes after the common topk one, so it wins
        sets = C.job_sets(by_name("ps-kill-worker-sdagc-p4"))
        self.assertGreater(sets.index("scheme.name=sdagc"), sets.index("scheme.name=topk"))
        self.assertIn("checkpoint.on_damaged=older", C.job_sets(by_name("ps-damaged-checkpoint-truncate-older-p4")))

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
        # A regroup trains another job (P - 1 workers, a scaled learning rate): its accuracy is measured.
        far = completed("zz", ledger={"ok": True, "problems": []}, accuracy=0.50, logs=logs)
        self.assertEqual(C.judge(case, far, BASE), ("PASS", []))
        bounded = by_name("ps-partition-worker-5s-deadline")
        self.assertEqual(C.judge(bounded, completed("zz", ledger={"ok": True, "problems": []}, accuracy=0.68), BASE),
                         ("PASS", []))
        self.assertIn("accuracy 0.5000 is more than 0.05",
                      C.judge(bounded, completed("zz", ledger={"ok": True, "problems": []}, accuracy=0.50), BASE)[1][0])
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


class NewKindsJudgeTest(unittest.TestCase):
    """The expectations of the issue-38 cases: a shard that must refuse, a worker's full disk, a kill
    that must land mid-checkpoint, an elastic ledger."""
    ADDR4 = dict(ADDR, **{"server-0": "10.213.0.5", "server-1": "10.213.0.6", "worker-2": "10.213.0.7",
                         "worker-3": "10.213.0.8"})
    REFUSAL = ("error [server 1] shard 1's newest checkpoint is damaged: /x/checkpoints-1/"
               "shard-1-round-000000000040.ckpt: CRC mismatch (not falling back to an older checkpoint silently)")

    def refused(self, code=2, after=3.0, message=REFUSAL, failing="server-1") -> dict:
        return {"completed": False, "error": f"{failing} exited {code} while the workers still ran",
                "worker_exits": {f"worker-{r}": (None, None) for r in range(4)}, "killed_for_good": [],
                "service_exits": {"server-0": (None, None), "server-1": (code, after)}, "addresses": self.ADDR4,
                "failure": {"service": failing, "code": code, "message": message}}

    def test_damaged_checkpoint_refused(self):
        case = by_name("ps-damaged-checkpoint-flip-p4")
        self.assertEqual(C.judge(case, self.refused(), BASE), ("PASS", []))   # the waiting workers are not judged
        self.assertIn("server-1 exited 1, not 2", C.judge(case, self.refused(code=1), BASE)[1])
        self.assertIn("later than 30 s", C.judge(case, self.refused(after=45.0), BASE)[1][0])
        vague = self.refused(message="error [server 1] cannot start: DATA_LOSS")
        self.assertIn("does not name the fault", C.judge(case, vague, BASE)[1][0])
        no_shard = self.refused(message="error [server 1] damaged: shard-1-round-000000000040.ckpt: CRC mismatch")
        self.assertEqual(C.judge(case, no_shard, BASE)[0], "FAIL")      # names the file, not the shard
        verdict, unmet = C.judge(case, completed(), BASE)
        self.assertEqual(verdict, "FAIL")
        self.assertIn("completed, but the expectation is that it stops", unmet)
        self.assertIn("server-1 did not exit by itself", unmet)
        # a fall-back to the older checkpoint: the job goes on, which this case must not accept
        self.assertEqual(C.judge(case, completed(exits={"server-0": 0, "server-1": 0}), BASE)[0], "FAIL")

    def test_damaged_checkpoint_older_passes_over_it(self):
        case = by_name("ps-damaged-checkpoint-truncate-older-p4")
        log = ("warning [server 1] skipped a checkpoint: /v/checkpoints-1/shard-1-round-000000000040.ckpt: truncated\n"
               "info [server 1] shard 1: serving range [5, 9) of 9 elements from worker 0's replica at round 50 (its "
               "checkpoint held round 20)")
        self.assertEqual(C.judge(case, completed(logs={"server-1": log}), BASE), ("PASS", []))
        silent = log.split("\n")[1]
        self.assertEqual(C.judge(case, completed(logs={"server-1": silent}), BASE)[0], "FAIL")

    def test_worker_disk_full_stop(self):
        case = by_name("ps-disk-full-worker-state-stop-p4")
        msg = ("error [worker 1] training failed: worker 1: its state was not saved: /v/worker-state-1/"
               "worker-1-state-000041.bin.tmp: write failed: No space left on device")
        exits = {"worker-0": (1, 40.0), "worker-1": (1, 0.5), "worker-2": (1, 41.0), "worker-3": (1, 41.0)}
        ok = stopped(msg, failing="worker-1", exits=exits, addresses=self.ADDR4)
        self.assertEqual(C.judge(case, ok, BASE), ("PASS", []))
        late = dict(exits, **{"worker-0": (1, 80.0)})
        self.assertIn("failed later than 55 s", C.judge(case, stopped(msg, "worker-1", late, addresses=self.ADDR4),
                                                         BASE)[1][0])
        vague = stopped("error [worker 1] training failed: write failed", "worker-1", exits, addresses=self.ADDR4)
        self.assertIn("does not name the fault", C.judge(case, vague, BASE)[1][0])
        # another worker failing first must name worker 1, the one whose disk is full
        other = stopped("error [worker 0] PushPull to shard 0: round 41 phase 0 on shard 0 is waiting for worker 1",
                        "worker-0", exits, addresses=self.ADDR4)
        self.assertEqual(C.judge(case, other, BASE)[0], "PASS")
        blames_shard = stopped("error [worker 0] PushPull to shard 0: no answer for 20s", "worker-0", exits,
                               addresses=self.ADDR4)
        self.assertEqual(C.judge(case, blames_shard, BASE)[0], "FAIL")

    def test_worker_disk_full_goes_on(self):
        case = by_name("ps-disk-full-worker-state-p4")
        log = ("warning [worker 1] state of round 41 not saved: /v/worker-state-1/worker-1-state-41.bin.tmp: write "
               "failed: No space left on device")
        self.assertEqual(C.judge(case, completed(logs={"worker-1": log}), BASE), ("PASS", []))
        self.assertEqual(C.judge(case, completed(logs={"worker-1": "all fine"}), BASE)[0], "FAIL")

    def test_beyond_patience_names_the_cut_off_worker(self):
        case = by_name("ps-partition-worker-beyond-patience-p4")
        exits = {f"worker-{r}": (1, 41.0) for r in range(4)}
        msg = "error [worker 0] PushPull to shard 1: round 41 phase 0 on shard 1 is waiting for worker 1 (worker 0, 2, 3 pushed)"
        self.assertEqual(C.judge(case, stopped(msg, "worker-0", exits, addresses=self.ADDR4), BASE), ("PASS", []))
        blames = stopped("error [worker 0] PushPull to shard 1 at server-1:7070: no answer for 20s", "worker-0", exits,
                         addresses=self.ADDR4)
        self.assertIn("does not name the fault", C.judge(case, blames, BASE)[1][0])
        cut = stopped("error [worker 1] PushPull to shard 0 at server-0:7070: no answer for 20s", "worker-1", exits,
                      addresses=self.ADDR4)
        self.assertEqual(C.judge(case, cut, BASE)[0], "PASS")   # the cut-off worker names the other side

    def test_kill_must_land_mid_checkpoint(self):
        case = by_name("ps-kill-shard-mid-checkpoint-dgc-p4")
        log = "shard 1: serving range [1, 2) of 2 elements from its checkpoint of round 40"
        self.assertEqual(C.judge(case, completed(logs={"server-1": log}, mid_checkpoint=True), BASE), ("PASS", []))
        verdict, unmet = C.judge(case, completed(logs={"server-1": log}, mid_checkpoint=False), BASE)
        self.assertEqual(verdict, "FAIL")
        self.assertIn("did not land mid-checkpoint", unmet[0])
        # loading the unfinished checkpoint of round 60 is not what the case expects
        wrong = "shard 1: serving range [1, 2) of 2 elements from its checkpoint of round 60"
        self.assertEqual(C.judge(case, completed(logs={"server-1": wrong}, mid_checkpoint=True), BASE)[0], "FAIL")

    def test_both_shards_must_log_their_recovery(self):
        case = by_name("ps-kill-both-shards-topk-p4")
        line = "shard {0}: serving range [0, 1) of 2 elements from worker 0's replica at round 50"
        logs = {"server-0": line.format(0), "server-1": line.format(1)}
        self.assertEqual(C.judge(case, completed(logs=logs), BASE), ("PASS", []))
        self.assertEqual(C.judge(case, completed(logs={"server-1": line.format(1)}), BASE)[0], "FAIL")

    def test_elastic_ledger_counts_a_joiner_from_its_round(self):
        recs = {"worker-0": history(6), "worker-1": history(6), "worker-2": history(6)[3:]}
        survivors = ["worker-0", "worker-1", "worker-2"]
        self.assertTrue(C.ledger(recs, 6, survivors, [], {"worker-2": 3})["ok"])
        led = C.ledger(recs, 6, survivors, [], {"worker-2": 2})
        self.assertFalse(led["ok"])
        self.assertIn("worker-2 misses rounds 2", led["problems"])
        self.assertFalse(C.ledger(recs, 6, survivors, [])["ok"])    # without the join round it owes everything

    def test_observed_names_the_refusing_shard(self):
        case = by_name("ps-damaged-checkpoint-flip-p4")
        text = C.observed(case, NewKindsJudgeTest().refused(), BASE)
        self.assertIn("server-1 exit 2 at +3.0 s", text)
        self.assertIn("shard-1-round-000000000040.ckpt", text)


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

    def test_asymmetric_partition(self):
        rules = faults.partition_ruleset("p3", "p5")
        self.assertIn('iifname "p3" oifname "p5" counter drop', rules)
        self.assertIn('iifname "p5" oifname "p3" counter drop', rules)
        self.assertNotIn('iifname "p3" counter drop', rules)     # the host still reaches everyone else

    def test_damage(self):
        data = bytes(range(10))
        flipped = faults.damage_bytes(data, "flip")
        self.assertEqual(len(flipped), 10)
        self.assertEqual([i for i in range(10) if flipped[i] != data[i]], [5])
        self.assertEqual(faults.damage_bytes(data, "truncate"), data[:5])
        with self.assertRaises(faults.FaultError):
            faults.damage_bytes(data, "shred")
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for name in ("shard-1-round-000000000020.ckpt", "shard-1-round-000000000040.ckpt",
                         "shard-0-round-000000000060.ckpt", "shard-1-round-000000000060.ckpt.tmp"):
                (folder / name).write_bytes(b"x" * 8)
            newest = faults.newest_checkpoint(folder, "1")
            self.assertEqual(newest.name, "shard-1-round-000000000040.ckpt")
            self.assertEqual(faults.damage(newest, "truncate"), "truncated from 8 to 4 bytes")
            self.assertEqual(newest.read_bytes(), b"xxxx")
            self.assertIsNone(faults.newest_checkpoint(folder, "2"))

    def test_parse_inotify(self):
        import struct
        buf = struct.pack("iIII", 1, 0x2, 0, 16) + b"a.ckpt.tmp".ljust(16, b"\0") + \
            struct.pack("iIII", 1, 0x100, 0, 0)
        self.assertEqual(faults.parse_inotify(buf), [(0x2, "a.ckpt.tmp"), (0x100, "")])

    def test_checkpoint_watch_kills_on_the_matching_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            proc = subprocess.Popen(["sleep", "30"])
            watch = faults.CheckpointWatch(folder, r"shard-1-round-(\d+)\.ckpt\.tmp", 60)
            try:
                watch.arm(proc.pid)
                (folder / "shard-1-round-000000000040.ckpt.tmp").write_bytes(b"x")   # before the round: kept alive
                (folder / "shard-0-round-000000000060.ckpt.tmp").write_bytes(b"x")   # another shard's
                (folder / "shard-1-round-000000000060.ckpt.tmp").touch()             # created, nothing written yet
                time.sleep(0.5)
                self.assertIsNone(proc.poll())
                (folder / "shard-1-round-000000000060.ckpt.tmp").write_bytes(b"x")
                self.assertEqual(proc.wait(timeout=5), -9)
                self.assertTrue(watch.killed)
                self.assertEqual(watch.killed_file, "shard-1-round-000000000060.ckpt.tmp")
            finally:
                watch.stop()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

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

    def test_ps_compose_for_more_workers(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "ps.yml"
            path.write_text(yaml.safe_dump(chaos_run.ps_compose(4, patience_s=20, stop_on_state_error=True,
                                                                joiners={"worker-3": 40})))
            services = topology.load(path)
        self.assertEqual(sorted(services), ["certs", "checkpoint-key", "server-0", "server-1", "worker-0", "worker-1",
                                            "worker-2", "worker-3"])
        certs = services["certs"].argv
        self.assertEqual(certs[certs.index("--workers") + 1], "4")
        for r in range(4):
            w = services[f"worker-{r}"]
            self.assertEqual(w.environment["RANK"], str(r))
            self.assertEqual(w.environment["WORLD_SIZE"], "4")
            self.assertEqual(w.environment["SKETCHPS_STOP_ON_STATE_ERROR"], "true")
            self.assertIn("--patience-seconds=20", w.argv)
            self.assertNotIn("--patience-seconds=300", w.argv)
            self.assertEqual(("--join-at-round=40" in w.argv), r == 3)
            state = [m for m in w.mounts if m.target == "/var/lib/sketchps/state"]
            self.assertEqual([m.source for m in state], [f"worker-state-{r}"])
            job = [m for m in w.mounts if m.target == "/etc/sketchps/job.yaml"][0]
            self.assertEqual(Path(job.source), chaos_run.JOB_FILE.resolve())
            self.assertEqual(set(w.depends_on), {"certs", "checkpoint-key", "server-0", "server-1"})
        # the deployment's own file, as it is, for the plain 2-worker job
        self.assertEqual(chaos_run.compose_for(by_name("ps-kill-shard-ckpt20"), Path(tmp)), chaos_run.PS_COMPOSE)
        plain = chaos_run.ps_compose(2)
        self.assertEqual(plain["services"]["worker-1"]["command"],
                         yaml.safe_load(chaos_run.PS_COMPOSE.read_text())["services"]["worker-1"]["command"])

    def test_compose_for_writes_the_case_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = chaos_run.compose_for(by_name("ps-elastic-join-loss-1pct"), Path(tmp))
            services = topology.load(path)
            self.assertIn("--join-at-round=40", services["worker-2"].argv)
            self.assertNotIn("--join-at-round=40", services["worker-1"].argv)
            dec = chaos_run.compose_for(by_name("dec-kill-worker-p4"), Path(tmp))
            self.assertEqual(sorted(n for n in topology.load(dec) if n.startswith("worker")),
                             ["worker-0", "worker-1", "worker-2", "worker-3"])

    def test_harness_kills(self):
        self.assertTrue(chaos_run.is_harness_kill(by_name("ps-kill-shard-ckpt20")))
        self.assertFalse(chaos_run.is_harness_kill(by_name("ps-kill-both-shards-topk-p4")))
        self.assertFalse(chaos_run.is_harness_kill(by_name("ps-kill-worker-topk")))

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


class MergeTest(unittest.TestCase):
    def test_merged_meta(self):
        before = {"command": "run.sh --cases 'ps-*'", "date": "2026-11-29 01:30", "minutes": 30.0,
                  "not_run": ["ps-a", "ps-b"]}
        now = {"command": "run.sh --cases 'dec-*'", "date": "2026-11-29 02:10", "minutes": 10.0, "not_run": ["dec-c"],
               "version": "v"}
        m = chaos_run.merged_meta(before, now, {"ps-a": {}})
        self.assertEqual(m["date"], "2026-11-29 01:30")
        self.assertEqual(m["minutes"], 40.0)
        self.assertEqual(m["command"], "run.sh --cases CASES --merge")
        self.assertEqual(m["runs"], 2)
        self.assertEqual(m["not_run"], ["dec-c", "ps-b"])     # ps-a ran in the second run
        again = chaos_run.merged_meta(m, dict(now, minutes=1.0, not_run=[]), {"ps-a": {}, "ps-b": {}, "dec-c": {}})
        self.assertEqual(again["runs"], 3)
        self.assertEqual(again["not_run"], [])
        same = chaos_run.merged_meta(dict(before, command="run.sh"), dict(now, command="run.sh"), {})
        self.assertEqual(same["command"], "run.sh")


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
