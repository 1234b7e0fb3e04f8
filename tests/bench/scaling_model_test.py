#!/usr/bin/python3
"""bench/scaling/model.py on synthetic data with known parameters: every form's fit recovers them,
the crossover search finds the known crossing, and the command writes its plots, fits and doc block.
Run by ctest as bench/scaling_model (with /usr/bin/python3: numpy and matplotlib)."""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench", "scaling"))
import model  # noqa: E402

P = np.array([4, 8, 16, 32, 64], dtype=float)


class Fits(unittest.TestCase):
    def test_const(self):
        f = model.fit_const(P, [5000.0] * 5)
        self.assertAlmostEqual(f.params["c"], 5000.0, places=6)
        self.assertAlmostEqual(float(f(1024)), 5000.0, places=6)
        self.assertAlmostEqual(f.r2_log, 1.0)

    def test_inverse(self):
        y = 3200 + 3200 / P  # ScaleCom: 4k + 4k/P with 4k = 3200
        f = model.fit_inverse(P, y)
        self.assertAlmostEqual(f.params["a"], 3200, delta=1e-6)
        self.assertAlmostEqual(f.params["b"], 3200, delta=1e-6)

    def test_log2(self):
        y = 1.76e6 * np.log2(P)  # dense all-reduce: 2 x 4d per step
        f = model.fit_log2(P, y)
        self.assertAlmostEqual(f.params["a"], 1.76e6, delta=1e-3)
        self.assertAlmostEqual(f.params["b"], 0.0, delta=1e-3)
        self.assertAlmostEqual(float(f(1024)), 1.76e7, delta=1.0)

    def test_linear(self):
        y = 17616 * (P - 1) + 17616  # all-gather: P - 1 forwarded selections plus the own
        f = model.fit_linear(P, y)
        self.assertAlmostEqual(f.params["a"], 17616, delta=1e-3)
        self.assertAlmostEqual(f.params["b"], 17616, delta=1e-3)

    def test_union_recovers_alpha_beta_and_wire_ratio(self):
        d, q, alpha, beta, w = 220234, 0.01, 1.2, 0.87, 0.625
        raw = 8 * d * (1 - (1 - q) ** (alpha * P ** beta))
        f = model.fit_union(P, w * raw, raw, d, q)
        self.assertAlmostEqual(f.params["alpha"], alpha, delta=1e-9)
        self.assertAlmostEqual(f.params["beta"], beta, delta=1e-9)
        self.assertAlmostEqual(f.params["w"], w, delta=1e-12)
        self.assertLess(f.max_rel_residual, 1e-9)
        # The union never exceeds d entries: at P = 1024, n_eff = 1.2 * 1024^0.87 = 495 sets cover 99.3%.
        self.assertAlmostEqual(float(f(1024)), w * 8 * d * (1 - 0.99 ** (alpha * 1024 ** beta)), delta=1.0)
        self.assertLess(float(f(10 ** 6)), w * 8 * d * (1 + 1e-12))
        # The textbook form (beta = 1) cannot follow these points: its residuals show it.
        f1 = model.fit_union(P, w * raw, raw, d, q, free_beta=False)
        self.assertEqual(f1.params["beta"], 1.0)
        self.assertGreater(f1.max_rel_residual, 0.05)

    def test_union_of_independent_sets_has_alpha_and_beta_1(self):
        # P independent random q d-sets: E|union| = d (1 - (1 - q)^P) exactly alpha = beta = 1.
        d, q = 100000, 0.02
        raw = 8 * d * (1 - (1 - q) ** P)
        f = model.fit_union(P, raw, raw, d, q)
        self.assertAlmostEqual(f.params["alpha"], 1.0, delta=1e-9)
        self.assertAlmostEqual(f.params["beta"], 1.0, delta=1e-9)

    def test_union_with_noise_stays_close(self):
        rng = np.random.default_rng(3)
        d, q, alpha, beta = 220234, 0.01, 1.0, 0.8
        raw = 8 * d * (1 - (1 - q) ** (alpha * P ** beta)) * (1 + 0.01 * rng.standard_normal(len(P)))
        f = model.fit_union(P, 0.6 * raw, raw, d, q)
        self.assertLess(abs(f.params["beta"] - beta), 0.05)
        self.assertLess(f.max_rel_residual, 0.03)

    def test_power(self):
        y = 300.0 * P ** 0.8
        f = model.fit_power(P, y)
        self.assertAlmostEqual(f.params["beta"], 0.8, places=9)
        self.assertAlmostEqual(f.params["a"], 300.0, places=6)

    def test_bad_fit_has_poor_quality(self):
        # A linear trend fitted with a constant: the quality figures must say so.
        f = model.fit_const(P, 1000 * P)
        self.assertLess(f.r2_log, 0.01)
        self.assertGreater(f.max_rel_residual, 0.5)

    def test_forms_follow_the_protocol(self):
        self.assertEqual(model.forms_for("ps", "dense"), ("const", "const"))
        self.assertEqual(model.forms_for("ps", "topk"), ("const", "union"))
        self.assertEqual(model.forms_for("ps", "gs_sgd"), ("const", "const"))
        self.assertEqual(model.forms_for("ps", "scalecom"), ("inverse", "const"))
        self.assertEqual(model.forms_for("decentralized", "gs_sgd"), ("log2", "log2"))
        self.assertEqual(model.forms_for("decentralized", "topk"), ("linear", "linear"))
        self.assertEqual(model.forms_for("decentralized", "gtopk"), ("linear", "linear"))
        self.assertEqual(model.forms_for("decentralized", "gtopk_tree"), ("log2", "log2"))


class Crossover(unittest.TestCase):
    def test_known_crossing(self):
        # 1000 log2 P against 100 (P - 1): 5907 > 5900 at P = 60, 5931 <= 6000 at P = 61.
        p = model.crossover(lambda x: 1000 * np.log2(x), lambda x: 100 * (x - 1), 1024)
        root = next(x for x in range(2, 1025) if 1000 * math.log2(x) <= 100 * (x - 1))
        self.assertEqual(p, root)
        self.assertEqual(p, 61)

    def test_never_and_always(self):
        self.assertIsNone(model.crossover(lambda x: 2.0 + 0 * x, lambda x: 1.0 + 0 * x))
        self.assertEqual(model.crossover(lambda x: 1.0 + 0 * x, lambda x: 2.0 + 0 * x), 2)


def record(mode, scheme, p, up, down, servers=2, raw_down=None, selected=2202.34):  # q = 0.01
    return {"mode": mode, "scheme": scheme, "workers": p, "servers": servers, "rounds_per_second": 10.0,
            "dim": 220234,
            "busiest_server_link_bytes_per_round": p * max(up, down) / servers if mode == "ps" else 0.0,
            "per_worker_per_round": {"wire_up": up, "wire_down": down, "raw_up": up,
                                     "raw_down": down if raw_down is None else raw_down, "selected": selected},
            "shards": [{"merges_per_second": 40.0, "reduce_read_bytes_per_second": 1e6,
                        "reduce_read_fraction_of_stream": 0.001}]}


class Command(unittest.TestCase):
    def test_end_to_end(self):
        results = []
        for p in [4, 8, 16, 32, 64]:
            union = 8 * 220234 * (1 - 0.99 ** (0.5 * p))  # raw bytes; wire: 5 of every 8
            results.append(record("ps", "topk", p, 12000, 0.625 * union, raw_down=union))
            results.append(record("ps", "gs_sgd", p, 160000, 106000))
            results.append(record("decentralized", "topk", p, 12000 * (p - 1), 12000 * (p - 1)))
            results.append(record("decentralized", "gs_sgd", p, 230000 * math.log2(p), 230000 * math.log2(p)))
        doc = {"date": "2026-01-01T00:00:00Z", "job": "synthetic", "machine": {"cpu": "test", "cores": 2},
               "options": {"density": 0.01}, "stream": {"bytes_per_second_1_thread": 1e9, "floats": 1},
               "results": results, "failures": []}
        tmp = tempfile.mkdtemp()
        try:
            src = os.path.join(tmp, "results.json")
            with open(src, "w") as f:
                json.dump(doc, f)
            md = os.path.join(tmp, "scaling.md")
            with open(md, "w") as f:
                f.write("# title\n\nbefore\n\n" + model.BEGIN_MARK + "\nold\n" + model.END_MARK + "\n\nafter\n")
            fits = os.path.join(tmp, "fits.json")
            subprocess.run([sys.executable, os.path.join(REPO, "bench", "scaling", "model.py"), src, "--img-dir",
                            os.path.join(tmp, "img"), "--doc", md, "--fits-out", fits], check=True,
                           stdout=subprocess.DEVNULL)
            for name in ["scaling-ps", "scaling-decentralized", "scaling-ps-busiest-link"]:
                for ext in ["png", "svg"]:
                    path = os.path.join(tmp, "img", f"{name}.{ext}")
                    self.assertTrue(os.path.getsize(path) > 1000, path)
            with open(md) as f:
                text = f.read()
            self.assertIn("before", text)
            self.assertIn("after", text)
            self.assertNotIn("\nold\n", text)
            self.assertEqual(text.count(model.BEGIN_MARK), 1)
            with open(fits) as f:
                out = json.load(f)
            down = out["fits"]["ps/topk"]["down"]["params"]
            self.assertAlmostEqual(down["alpha"], 0.5, delta=1e-6)
            self.assertAlmostEqual(down["beta"], 1.0, delta=1e-6)
            self.assertAlmostEqual(down["w"], 0.625, delta=1e-9)
            self.assertAlmostEqual(out["fits"]["decentralized/gs_sgd"]["up"]["params"]["a"], 230000, delta=1)
            # PS: topk's 12000 + 0.625 * 8 * 220234 (1 - 0.99^(P/2)) reaches gs_sgd's 266000 at P = 52.2.
            ps = [r for r in out["crossovers"] if r["mode"] == "ps" and r["other"] == "topk"][0]
            expected = next(x for x in range(2, 1025)
                            if 12000 + 0.625 * 8 * 220234 * (1 - 0.99 ** (x / 2)) >= 266000)
            self.assertEqual(expected, 53)
            self.assertEqual(ps["per_worker"], expected)
            # Decentralized: 460000 log2 P <= 24000 (P - 1) from P = 138 on.
            dec = [r for r in out["crossovers"] if r["mode"] == "decentralized" and r["other"] == "topk"][0]
            expected = next(x for x in range(2, 1025) if 460000 * math.log2(x) <= 24000 * (x - 1))
            self.assertEqual(dec["per_worker"], expected)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main(verbosity=1)
