#!/usr/bin/python3
"""bench/sim/map.py's reading of its CSV, on rows whose answer is known: the gaps to dense are seed
means, the verdict names a sketch within 1 point of dense only where top-k and gTop-k are not, the
deciding cells are those, and `plot` writes one SVG per cell. Run by ctest as bench/sim_map (with
/usr/bin/python3: matplotlib)."""
import csv
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MAP = os.path.join(REPO, "bench", "sim", "map.py")
sys.path.insert(0, os.path.join(REPO, "bench", "sim"))
import map as simmap  # noqa: E402

FIELDS = ["method", "workers", "alpha", "fraction", "seed", "rounds", "participants", "uplink_compression",
          "bytes_up_mean", "busiest_link_mean", "final_test_accuracy", "loss_mean", "wall_s", "status", "settings",
          "target"]


def row(method, workers, alpha, fraction, seed, accuracy, link=1e6, status="ok", target=""):
    return {"method": method, "workers": str(workers), "alpha": alpha, "fraction": str(fraction), "seed": str(seed),
            "rounds": "100", "participants": str(workers), "uplink_compression": "50", "bytes_up_mean": "1000",
            "busiest_link_mean": str(link), "final_test_accuracy": str(accuracy), "loss_mean": "1", "wall_s": "1",
            "status": status, "settings": "", "target": target}


# Cell (16, 0.1, 0.25): FetchSGD within 1 point (seed mean 0.795) where top-k and gTop-k are 5 and 10
# points behind: the verdict. Cell (4, inf, 1): top-k within 1 point too, so no verdict.
ROWS = [
    row("dense", 16, "0.1", 0.25, 1, 0.80), row("dense", 16, "0.1", 0.25, 2, 0.80),
    row("topk", 16, "0.1", 0.25, 1, 0.75), row("gtopk", 16, "0.1", 0.25, 1, 0.70),
    row("fetchsgd", 16, "0.1", 0.25, 1, 0.79), row("fetchsgd", 16, "0.1", 0.25, 2, 0.80),
    row("gs_sgd", 16, "0.1", 0.25, 1, 0.60),
    row("dense", 4, "inf", 1.0, 1, 0.85), row("topk", 4, "inf", 1.0, 1, 0.845), row("gtopk", 4, "inf", 1.0, 1, 0.80),
    row("fetchsgd", 4, "inf", 1.0, 1, 0.845),
    row("sketched_sgd", 4, "inf", 1.0, 1, 0.0, status="exit 1"),  # a failed run counts nowhere
    # A second panel, 10x (a blank target is 50x: rows written before the column): its own cell, where
    # gs-SGD is within 1 point and top-k is not.
    row("dense", 16, "0.1", 0.25, 1, 0.80, target="10"), row("topk", 16, "0.1", 0.25, 1, 0.78, target="10"),
    row("gtopk", 16, "0.1", 0.25, 1, 0.785, target="10"), row("gs_sgd", 16, "0.1", 0.25, 1, 0.795, target="10"),
]


class Reading(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.csv = os.path.join(self.dir.name, "map.csv")
        with open(self.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(ROWS)

    def tearDown(self):
        self.dir.cleanup()

    def run_map(self, *args):
        return subprocess.run([sys.executable, MAP, *args, "--csv", self.csv], capture_output=True, text=True,
                              check=True).stdout

    def test_gaps_are_seed_means_and_the_verdict_needs_sparse_far(self):
        by_cell = simmap.cells(simmap.read_rows(self.csv))
        g = simmap.gaps(by_cell[(16, "0.1", 0.25)])
        self.assertAlmostEqual(g["fetchsgd"], -0.5)
        self.assertAlmostEqual(g["topk"], -5.0)
        self.assertEqual(simmap.verdict(g), ["fetchsgd"])
        self.assertEqual(simmap.verdict(simmap.gaps(by_cell[(4, "inf", 1.0)])), [])
        self.assertNotIn("sketched_sgd", by_cell[(4, "inf", 1.0)])

    def test_deciding_prints_the_cells_a_seed_could_turn(self):
        # A sketch within 1 point where top-k or gTop-k is not: more seeds could make or break a verdict.
        out = self.run_map("deciding").splitlines()
        self.assertEqual(out, ["P=4 alpha=inf f=1.0: fetchsgd within 1 point; gtopk not",
                               "P=16 alpha=0.1 f=0.25: fetchsgd within 1 point; topk, gtopk not",
                               "P=16 alpha=0.1 f=0.25 (10x uplink, 100 rounds): gs_sgd within 1 point; "
                               "topk, gtopk not"])

    def test_a_target_or_rounds_of_zero_is_refused(self):
        for flag in ("--target", "--rounds"):
            done = subprocess.run([sys.executable, MAP, "run", "--dry-run", flag, "0", "--csv", self.csv],
                                  capture_output=True, text=True)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(f"{flag} 0", done.stderr)

    def test_panels_keep_their_runs_apart(self):
        rows = simmap.read_rows(self.csv)
        self.assertEqual(simmap.panels(rows), [(50, 100), (10, 100)])
        ten = simmap.cells(rows, (10, 100))[(16, "0.1", 0.25)]
        self.assertEqual(sorted(ten), ["dense", "gs_sgd", "gtopk", "topk"])
        self.assertEqual(len(simmap.cells(rows)[(16, "0.1", 0.25)]["dense"]), 2)  # the 10x dense run not among them
        self.assertEqual(simmap.settings("topk", 10), ["scheme.density=0.08"])
        self.assertEqual(simmap.settings("dgc", 200), ["scheme.density=0.004", "scheme.dgc.warmup=0"])
        self.assertEqual(simmap.partition("classes:2"), "classes:2")
        self.assertEqual(simmap.partition("0.5"), "dirichlet:0.5")

    def test_table_marks_the_verdict(self):
        out = self.run_map("table")
        self.assertIn("| 16 | 0.1 | 0.25 | 80.00 (2, ±0.00) |", out)
        # fetchsgd: 79 and 80 against dense's 80 and 80, seed by seed: gaps -1 and 0, a deviation of 0.71
        self.assertIn("| -0.50 (2, ±0.71) |", out)
        rows = simmap.read_rows(self.csv)
        self.assertEqual([round(x, 6) for x in simmap.paired_gaps(rows, (50, 100), (16, "0.1", 0.25), "fetchsgd")],
                         [-0.01, 0.0])
        self.assertEqual([round(x, 6) for x in simmap.paired_gaps(rows, (50, 100), (16, "0.1", 0.25), "topk")], [-0.05])
        self.assertIn("**fetchsgd**", out)
        self.assertIn("1 run(s) failed: sketched_sgd P=4", out)

    def test_plot_writes_one_svg_per_cell(self):
        plots = os.path.join(self.dir.name, "img")
        out = self.run_map("plot", "--plot-dir", plots).split()
        self.assertEqual(sorted(os.path.basename(p) for p in out),
                         ["sim-map-P16-alpha0.1-f0.25-x10-r100.svg", "sim-map-P16-alpha0.1-f0.25.svg",
                          "sim-map-P4-alphainf-f1.svg"])
        for p in out:
            with open(p) as f:
                svg = f.read()
            self.assertIn("<svg", svg)
            self.assertIn("gs_sgd" if "x10" in p else "fetchsgd", svg)


if __name__ == "__main__":
    unittest.main()
