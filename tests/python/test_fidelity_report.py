"""bench/fidelity/report.py on fake summary.json files: the Pareto front, the fidelity table (gap,
targets, met, row order, caption), the sweep's outputs and its errors. Needs no build: the script is
imported by path, and run as a subprocess for the command line."""
import importlib.util
import json
import os
import random
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "bench", "fidelity", "report.py")

spec = importlib.util.spec_from_file_location("fidelity_report", SCRIPT)
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

BASE = {"scheme": "dense", "model": "cnn", "mode": "ps", "workers": 4, "servers": 2, "batch_size": 32,
        "density": 0.01, "epochs": 3.0, "rounds": 1404, "final_test_accuracy": 0.90,
        "compression_ratio_up": 1.0, "compression_ratio_down": 1.0, "dense_bytes_per_round": 880936.0,
        "wall_seconds": 90.0, "date": "2026-11-25T12:00:00Z", "machine": "machine A, 2 cores",
        "job_id": "fid", "version": "0.1.0"}


def write_run(root, name, **fields):
    """root/name/summary.json from BASE with fields replaced (a field set to ... is left out)."""
    data = {**BASE, **fields}
    data = {k: v for k, v in data.items() if v is not ...}
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "summary.json").write_text(json.dumps(data))
    return directory


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=100)


# ---------------------------------------------------------------------------------- Pareto front

def brute_force_front(points):
    def dominates(q, p):
        return q[0] >= p[0] and q[1] >= p[1] and (q[0] > p[0] or q[1] > p[1])
    return [p for p in points if not any(dominates(q, p) for q in points)]


def test_pareto_front_matches_brute_force_on_random_points():
    rng = random.Random(15)
    for _ in range(300):
        n = rng.randrange(0, 25)
        # few distinct coordinates, so ties in x, in y and equal points are common
        points = [(rng.choice([1, 2, 5, 10, 50, 100]), rng.choice([80.0, 85.5, 87.0, 90.0]), i) for i in range(n)]
        got = report.pareto_front(points)
        assert sorted(got, key=lambda p: p[2]) == brute_force_front(points)
        assert [p[0] for p in got] == sorted(p[0] for p in got)


def test_pareto_front_hand_example_with_ties():
    points = [(1.0, 90.0, "dense"), (10.0, 89.0, "a"), (10.0, 88.0, "a-lower"), (100.0, 89.0, "b"),
              (100.0, 89.0, "b-twin"), (50.0, 89.0, "c"), (300.0, 70.0, "d"), (0.5, 90.0, "e")]
    # a and c are dominated by b (same accuracy, more compression), a-lower by a; e by dense (same y, less x)
    assert [p[2] for p in report.pareto_front(points)] == ["dense", "b", "b-twin", "d"]
    assert report.pareto_front([]) == []


def test_target_for():
    assert report.target_for("topk", "cnn") == 100
    assert report.target_for("dgc", "resnet") == 270
    assert report.target_for("sdagc", "cnn") == 400
    assert report.target_for("gs_sgd", "cnn") == 50  # issue 21: the sketches' bar is 50x, was 10x on the CNN
    assert report.target_for("gs_sgd", "resnet") == 50
    assert report.target_for("sketched_sgd", "mlp") == 50
    assert report.target_for("fetchsgd", "cnn") == 50
    assert report.previous_target_for("gs_sgd", "cnn") == 10
    assert report.previous_target_for("gs_sgd", "resnet") is None
    assert report.previous_target_for("topk", "cnn") is None
    assert report.target_for("dense", "cnn") is None


# --------------------------------------------------------------------------------------- table

@pytest.fixture
def table_runs(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "sdagc", scheme="sdagc", final_test_accuracy=0.88, compression_ratio_up=300.0,
              compression_ratio_down=20.0, date="2026-11-27T08:00:00Z", machine="machine B, 8 cores")
    write_run(root, "gs_sgd", scheme="gs_sgd", final_test_accuracy=0.899, compression_ratio_up=12.0,
              compression_ratio_down=8.0)
    write_run(root, "dgc", scheme="dgc", final_test_accuracy=0.895, compression_ratio_up=200.0,
              compression_ratio_down=30.0, date="2026-11-24T10:00:00Z")
    write_run(root, "topk", scheme="topk", final_test_accuracy=0.886, compression_ratio_up=150.0,
              compression_ratio_down=40.0)
    write_run(root, "dense", scheme="dense")
    write_run(root, "resnet-dense", model="resnet", final_test_accuracy=0.75)
    write_run(root, "resnet-gs_sgd", model="resnet", scheme="gs_sgd", final_test_accuracy=0.748,
              compression_ratio_up=12.0, compression_ratio_down=9.0)
    return root


def rows_by_scheme(rows):
    return {r["scheme"]: r for r in rows}


def test_table_gap_and_met(table_runs):
    runs = report.load_runs([table_runs])
    groups = dict(report.group_runs(runs))
    cnn = rows_by_scheme(report.fidelity_rows(groups[("cnn", 3.0)]))
    assert cnn["topk"]["gap"] == pytest.approx(-1.4)
    assert cnn["topk"]["met"] == "accuracy (-1.40)"
    assert cnn["dgc"]["met"] == "compression"
    assert cnn["sdagc"]["met"] == "both"
    assert cnn["gs_sgd"]["met"] == "old 10x bar: yes"  # 12x: misses 50x, meets the CNN's old 10x
    assert cnn["dense"]["met"] == "reference"
    assert cnn["dense"]["gap"] == pytest.approx(0.0)
    resnet = rows_by_scheme(report.fidelity_rows(groups[("resnet", 3.0)]))
    assert resnet["gs_sgd"]["target"] == 50
    assert resnet["gs_sgd"]["met"] == "compression"

    text = report.table_markdown(runs)
    assert "| topk | 0.01 | 88.60% | -1.40 | 150.0x / 150.0x | 40.0x / 40.0x | 100x | accuracy (-1.40) |" in text
    assert "| dense | — | 90.00% | +0.00 | 1.0x / 1.0x | 1.0x / 1.0x | — | reference |" in text
    assert "| gs_sgd | 0.01 | 89.90% | -0.10 | 12.0x / 12.0x | 8.0x / 8.0x | 50x | old 10x bar: yes |" in text
    assert "| gs_sgd | 0.01 | 74.80% | -0.20 | 12.0x / 12.0x | 9.0x / 9.0x | 50x | compression |" in text


def test_met_at_the_limits(tmp_path):
    # exactly the target and exactly 1 point below dense (not -1.0000000000000009 from the subtraction)
    write_run(tmp_path, "dense", final_test_accuracy=0.8728)
    write_run(tmp_path, "topk", scheme="topk", final_test_accuracy=0.8628, compression_ratio_up=100.0)
    write_run(tmp_path, "dgc", scheme="dgc", final_test_accuracy=0.8627, compression_ratio_up=269.9)
    rows = rows_by_scheme(report.fidelity_rows(report.load_runs([tmp_path])))
    assert rows["topk"]["met"] == "yes"
    assert rows["dgc"]["met"] == "both"


def test_target_is_judged_on_the_second_half(tmp_path):
    # DGC's warm-up costs bytes early on: the whole job misses 270x, its second half (the steady state) meets it
    write_run(tmp_path, "dense", final_test_accuracy=0.8728)
    write_run(tmp_path, "dgc", scheme="dgc", final_test_accuracy=0.87, compression_ratio_up=75.5,
              compression_ratio_up_second_half=420.0, compression_ratio_down=31.0,
              compression_ratio_down_second_half=120.0)
    write_run(tmp_path, "sdagc", scheme="sdagc", final_test_accuracy=0.87, compression_ratio_up=450.0,
              compression_ratio_up_second_half=350.0)
    runs = report.load_runs([tmp_path])
    rows = rows_by_scheme(report.fidelity_rows(runs))
    assert rows["dgc"]["met"] == "yes"
    assert rows["sdagc"]["met"] == "compression"
    assert "| dgc | 0.01 | 87.00% | -0.28 | 75.5x / 420.0x | 31.0x / 120.0x | 270x | yes |" in report.table_markdown(runs)
    write_run(tmp_path, "bad", scheme="topk", compression_ratio_up_second_half=-1.0)
    with pytest.raises(report.ReportError, match="compression_ratio_up_second_half"):
        report.load_runs([tmp_path])


def test_table_row_order_and_caption(table_runs):
    text = report.table_markdown(report.load_runs([table_runs]))
    cnn_part, resnet_part = text.split("**resnet")
    assert cnn_part.startswith("**cnn, 3 epochs, 4 workers / 2 servers, batch 32 per worker**")
    schemes = [line.split("|")[1].strip() for line in cnn_part.splitlines() if line.startswith("| ")]
    assert schemes == ["scheme", "dense", "topk", "dgc", "gs_sgd", "sdagc"]
    assert ("Source: 5 summary.json files; job: cnn, 3 epochs, 4 workers, 2 servers, batch 32; "
            "machine: machine A, 2 cores; machine B, 8 cores; "
            "date: 2026-11-24T10:00:00Z to 2026-11-27T08:00:00Z") in cnn_part
    assert "Source: 2 summary.json files;" in resnet_part
    assert "date: 2026-11-25T12:00:00Z\n" in resnet_part  # one date, no range


def test_table_command_writes_and_prints(table_runs, tmp_path):
    done = run_script("table", table_runs, "--out", tmp_path / "out" / "fidelity")
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "out" / "fidelity.md").read_text()
    assert written == done.stdout
    assert "| sdagc | 0.01 | 88.00% | -2.00 | 300.0x / 300.0x | 20.0x / 20.0x | 400x | both |" in written


def test_table_without_dense_and_with_two_dense(tmp_path):
    write_run(tmp_path / "a", "topk", scheme="topk", compression_ratio_up=120.0)
    text = report.table_markdown(report.load_runs([tmp_path / "a"]))
    assert "| no dense reference | 120.0x / 120.0x | 1.0x / 1.0x | 100x | accuracy unknown |" in text

    write_run(tmp_path / "b", "dense1")
    write_run(tmp_path / "b", "dense2")
    done = run_script("table", tmp_path / "b", "--out", tmp_path / "t")
    assert done.returncode == 2
    assert "2 dense runs" in done.stderr and "dense2" in done.stderr


def test_missing_date_and_machine_are_unknown(tmp_path):
    write_run(tmp_path, "dense", date=..., machine=...)
    text = report.table_markdown(report.load_runs([tmp_path / "dense"]))
    assert "machine: unknown; date: unknown" in text


# --------------------------------------------------------------------------------------- sweep

@pytest.fixture
def sweep_runs(tmp_path):
    root = tmp_path / "sweep"
    write_run(root, "dense", epochs=1.0, final_test_accuracy=0.90, compression_ratio_up=0.98,
              compression_ratio_down=0.98)
    write_run(root, "topk-0.01", scheme="topk", epochs=1.0, density=0.01, final_test_accuracy=0.885,
              compression_ratio_up=50.0, compression_ratio_down=5.0, machine="machine B")
    write_run(root, "topk-0.001", scheme="topk", epochs=1.0, density=0.001, final_test_accuracy=0.86,
              compression_ratio_up=400.0, compression_ratio_down=9.0)
    write_run(root, "gs_sgd-0.01", scheme="gs_sgd", epochs=1.0, density=0.01, final_test_accuracy=0.88,
              compression_ratio_up=40.0, compression_ratio_down=30.0)
    write_run(root, "gs_sgd-0.001", scheme="gs_sgd", epochs=1.0, density=0.001, final_test_accuracy=0.855,
              compression_ratio_up=300.0, compression_ratio_down=200.0)
    write_run(root, "dgc-0.001", scheme="dgc", epochs=1.0, density=0.001, final_test_accuracy=None,
              compression_ratio_up=500.0, compression_ratio_down=10.0)
    return root


def section(text, title):
    return text.split(f"## {title}\n\n")[1].split("\n\n")[0].splitlines()


def test_sweep_writes_figures_and_fronts(sweep_runs, tmp_path):
    prefix = tmp_path / "out" / "sweep"
    done = run_script("sweep", sweep_runs, "--out", prefix)
    assert done.returncode == 0, done.stderr
    for suffix in ["-uplink.png", "-uplink.svg", "-downlink.png", "-downlink.svg"]:
        path = tmp_path / "out" / f"sweep{suffix}"
        assert path.stat().st_size > 1000, path
    assert (tmp_path / "out" / "sweep-uplink.png").read_bytes().startswith(b"\x89PNG")
    text = (tmp_path / "out" / "sweep.md").read_text()
    # uplink: gs_sgd @ 0.01 (88% at 40x) is beaten by topk @ 0.01 (88.5% at 50x), gs_sgd @ 0.001 by topk @ 0.001
    assert section(text, "Pareto front (uplink)") == [
        "- dense: 90.00%, 1.0x up", "- topk @ 0.01: 88.50%, 50.0x up", "- topk @ 0.001: 86.00%, 400.0x up"]
    # downlink: gs_sgd's sketches shrink the downlink (topk @ 0.001 is beaten by gs_sgd @ 0.01); dgc has
    # no accuracy and is in no front
    assert section(text, "Pareto front (downlink)") == [
        "- dense: 90.00%, 1.0x down", "- topk @ 0.01: 88.50%, 5.0x down", "- gs_sgd @ 0.01: 88.00%, 30.0x down",
        "- gs_sgd @ 0.001: 85.50%, 200.0x down"]
    schemes = [line.split("|")[1:3] for line in text.splitlines() if line.startswith("| ")][1:]
    assert [[s.strip() for s in row] for row in schemes] == [
        ["dense", "—"], ["topk", "0.01"], ["topk", "0.001"], ["dgc", "0.001"], ["gs_sgd", "0.01"],
        ["gs_sgd", "0.001"]]
    assert "| dgc | 0.001 | n/a | 500.0x | 10.0x |" in text
    assert "No test accuracy (left out of the fronts and the figures): dgc @ 0.001" in text
    assert "machine: machine A, 2 cores; machine B; date: 2026-11-25T12:00:00Z\n" in text


def test_series_of_names_the_floor_from_the_job():
    assert report.series_of("gs_sgd", None) == "gs_sgd"
    assert report.series_of("gs_sgd", {"scheme": {"name": "gs_sgd", "gs_sgd": {"rows": 1}}}) == "gs_sgd"
    assert report.series_of("gs_sgd", {"scheme": {"gs_sgd": {"budget_factor": 1}}}) == "gs_sgd"
    assert report.series_of("gs_sgd", {"scheme": {"gs_sgd": {"budget_factor": 2.57}}}) == "gs_sgd+floor"
    assert report.series_of("sketched_sgd", {"scheme": {"sketched_sgd": {"recovery_floor": 0.03}}}) == \
        "sketched_sgd+floor"
    # another scheme's section does not count
    assert report.series_of("topk", {"scheme": {"gs_sgd": {"recovery_floor": 0.03}}}) == "topk"


def test_sweep_floor_runs_are_a_series_of_their_own(sweep_runs, tmp_path):
    floor = write_run(sweep_runs, "gs_sgd-0.001-floor", scheme="gs_sgd", epochs=1.0, density=0.001,
                      final_test_accuracy=0.87, compression_ratio_up=250.0, compression_ratio_down=150.0)
    (floor / "job.yaml").write_text("scheme: {name: gs_sgd, density: 0.001, gs_sgd: {recovery_floor: 0.03}}\n")
    prefix = tmp_path / "sweep"
    done = run_script("sweep", sweep_runs, "--out", prefix)
    assert done.returncode == 0, done.stderr  # not a duplicate of gs_sgd @ 0.001
    text = (tmp_path / "sweep.md").read_text()
    rows = [[c.strip() for c in line.split("|")[1:4]] for line in text.splitlines() if line.startswith("| ")][1:]
    assert rows[-3:] == [["gs_sgd", "0.01", "88.00%"], ["gs_sgd", "0.001", "85.50%"],
                         ["gs_sgd+floor", "0.001", "87.00%"]]
    assert section(text, "Pareto front (uplink)") == [
        "- dense: 90.00%, 1.0x up", "- topk @ 0.01: 88.50%, 50.0x up", "- gs_sgd+floor @ 0.001: 87.00%, 250.0x up",
        "- topk @ 0.001: 86.00%, 400.0x up"]
    assert report.scheme_styles(["gs_sgd", "gs_sgd+floor"])["gs_sgd+floor"][:2] == \
        report.scheme_styles(["gs_sgd"])["gs_sgd"][:2]


def test_sweep_mixed_models_exit_2(sweep_runs, tmp_path):
    write_run(tmp_path / "other", "resnet", model="resnet", epochs=1.0)
    done = run_script("sweep", sweep_runs, tmp_path / "other", "--out", tmp_path / "s")
    assert done.returncode == 2
    assert "cnn, 1 epoch (6 runs)" in done.stderr and "resnet, 1 epoch (1 runs)" in done.stderr
    assert not (tmp_path / "s.md").exists()


def test_sweep_duplicate_scheme_and_density_exit_2(sweep_runs, tmp_path):
    write_run(tmp_path / "again", "topk", scheme="topk", epochs=1.0, density=0.01)
    done = run_script("sweep", sweep_runs, tmp_path / "again" / "topk", "--out", tmp_path / "s")
    assert done.returncode == 2
    assert "two runs of topk @ 0.01" in done.stderr


def test_missing_summary_exit_2_names_path(sweep_runs, tmp_path):
    empty = tmp_path / "empty-run"
    empty.mkdir()
    for command in ["sweep", "table"]:
        done = run_script(command, sweep_runs, empty, "--out", tmp_path / "s")
        assert done.returncode == 2
        assert os.path.join(str(empty), "summary.json") in done.stderr
        assert done.stdout == ""
    done = run_script("sweep", tmp_path / "does-not-exist", "--out", tmp_path / "s")
    assert done.returncode == 2 and "does-not-exist" in done.stderr


def test_bad_usage_exit_2(tmp_path):
    assert run_script("table", tmp_path).returncode == 2  # no --out
    assert run_script("plot", tmp_path, "--out", tmp_path / "x").returncode == 2


def test_broken_summary_exit_2_names_path_and_key(tmp_path):
    write_run(tmp_path, "run", compression_ratio_up=...)
    done = run_script("table", tmp_path / "run", "--out", tmp_path / "t")
    assert done.returncode == 2
    assert "summary.json" in done.stderr and "compression_ratio_up" in done.stderr
    (tmp_path / "run" / "summary.json").write_text("{not json")
    done = run_script("table", tmp_path / "run", "--out", tmp_path / "t")
    assert done.returncode == 2 and "not valid JSON" in done.stderr


def test_null_accuracy(tmp_path):
    write_run(tmp_path, "dense", final_test_accuracy=None)
    write_run(tmp_path, "topk", scheme="topk", final_test_accuracy=0.9, compression_ratio_up=150.0)
    write_run(tmp_path, "dgc", scheme="dgc", final_test_accuracy=..., compression_ratio_up=100.0)
    runs = report.load_runs([tmp_path])
    rows = rows_by_scheme(report.fidelity_rows(runs))
    assert rows["dense"]["accuracy"] is None and rows["topk"]["gap"] is None
    assert rows["topk"]["met"] == "accuracy unknown"
    assert rows["dgc"]["met"] == "compression; accuracy unknown"
    text = report.table_markdown(runs)
    assert "| dense | — | n/a | n/a |" in text
    assert "| dgc | 0.01 | n/a | n/a | 100.0x / 100.0x |" in text
    md = report.sweep_markdown(runs)
    assert section(md, "Pareto front (uplink)") == ["- topk @ 0.01: 90.00%, 150.0x up"]


def test_load_runs_collects_subdirectories(tmp_path):
    write_run(tmp_path / "many", "b", scheme="topk")
    write_run(tmp_path / "many", "a", scheme="dgc")
    (tmp_path / "many" / "crashed").mkdir()  # no summary.json: skipped inside a directory of runs
    single = write_run(tmp_path, "single", scheme="gs_sgd")
    runs = report.load_runs([tmp_path / "many", single, single])
    assert [r["scheme"] for r in runs] == ["dgc", "topk", "gs_sgd"]
    assert runs[0]["path"].endswith(os.path.join("many", "a", "summary.json"))


# ----------------------------------------------------------------------------------------- seeds

def write_seed_run(root, name, job_seed, commit="abc1234", **fields):
    """A run as scripts/results.sh leaves it: summary.json, the effective job.yaml (train.seed), commit."""
    directory = write_run(root, name, **fields)
    (directory / "job.yaml").write_text(f"job_id: {name}\nmodel: cnn\ntrain:\n  epochs: 3\n  seed: {job_seed}\n")
    if commit:
        (directory / "commit").write_text(commit + "\n")
    return directory


@pytest.fixture
def seed_runs(tmp_path):
    root = tmp_path / "seeds"
    for seed, acc in [(1, 0.90), (2, 0.91), (3, 0.89)]:
        write_seed_run(root, f"dense-s{seed}", seed, final_test_accuracy=acc)
    for seed, acc, late in [(1, 0.893, 117.0), (2, 0.889, 118.0), (3, 0.891, 119.0)]:
        write_seed_run(root, f"topk-s{seed}", seed, scheme="topk", density=0.0065, final_test_accuracy=acc,
                       compression_ratio_up=117.0, compression_ratio_up_second_half=late,
                       compression_ratio_down=34.0)
    for seed, acc, up in [(1, 0.10, 54.0), (2, 0.12, 56.0)]:
        write_seed_run(root, f"gs_sgd-0.001-s{seed}", seed, scheme="gs_sgd", density=0.001, final_test_accuracy=acc,
                       compression_ratio_up=up, compression_ratio_down=70.0)
    write_seed_run(root, "gs_sgd-0.005-s1", 1, commit=None, scheme="gs_sgd", density=0.005,
                   final_test_accuracy=0.889, compression_ratio_up=11.1, compression_ratio_down=16.6)
    return root


def test_seed_rows_against_hand_computed_means(seed_runs):
    runs = report.load_runs([seed_runs])
    assert sorted(r["seed"] for r in runs if r["scheme"] == "dense") == [1, 2, 3]
    rows = report.fidelity_rows(runs)
    assert [(r["scheme"], r["density"], r["n"]) for r in rows] == [
        ("dense", 0.01, 3), ("topk", 0.0065, 3), ("gs_sgd", 0.005, 1), ("gs_sgd", 0.001, 2)]
    dense, topk, gs_old, gs_new = rows
    # dense: 90, 91, 89 -> mean 90, sd sqrt((0 + 1 + 1) / 2) = 1 point
    assert dense["accuracy"] == pytest.approx(0.90) and dense["sd"] == pytest.approx(0.01)
    assert (dense["low"], dense["high"]) == (0.89, 0.91) and dense["met"] == "reference"
    # topk: 89.3, 88.9, 89.1 -> mean 89.1, gap -0.9 against dense's mean, sd sqrt((0.04 + 0.04 + 0) / 2) = 0.2;
    # the second half's compression 117, 118, 119 -> 118 >= 100
    assert topk["accuracy"] == pytest.approx(0.891) and topk["gap"] == pytest.approx(-0.9)
    assert topk["sd"] == pytest.approx(0.002) and topk["up_late"] == pytest.approx(118.0)
    assert topk["met"] == "yes" and topk["seeds"] == [1, 2, 3]
    # gs_sgd at 0.001: 10 and 12 -> mean 11, gap -79, sd sqrt(2) points, 55x >= 50x: accuracy alone misses
    assert gs_new["accuracy"] == pytest.approx(0.11) and gs_new["gap"] == pytest.approx(-79.0)
    assert gs_new["sd"] == pytest.approx(0.02 ** 0.5 / 10) and gs_new["up"] == pytest.approx(55.0)
    assert gs_new["met"] == "accuracy (-79.00)"
    # gs_sgd at 0.005, one seed: 11.1x misses 50x but is the old 10x regime, 88.9 is 1.1 below dense's mean
    assert gs_old["sd"] is None and gs_old["met"] == "old 10x bar: accuracy (-1.10)"


def test_seed_table_markdown(seed_runs):
    text = report.table_markdown(report.load_runs([seed_runs]))
    assert "| scheme | density | seeds | test accuracy: mean | spread: min–max (sd) |" in text
    assert "| dense | — | 1–3 | 90.00% | 89.00–91.00 (1.00) | +0.00 | 1.0x / 1.0x | 1.0x / 1.0x | — | reference |" in text
    assert "| topk | 0.0065 | 1–3 | 89.10% | 88.90–89.30 (0.20) | -0.90 | 117.0x / 118.0x | 34.0x / 34.0x | 100x | yes |" in text
    assert ("| gs_sgd | 0.001 | 1, 2 | 11.00% | 10.00–12.00 (1.41) | -79.00 | 55.0x / 55.0x | 70.0x / 70.0x | 50x | "
            "accuracy (-79.00) |") in text
    assert "| gs_sgd | 0.005 | 1 | 88.90% | — | -1.10 | 11.1x / 11.1x | 16.6x / 16.6x | 50x | old 10x bar: accuracy (-1.10) |" in text
    assert text.endswith("Code: commits: abc1234 (8 runs), unknown (1 run); seeds: 1–3 "
                         "(3 per row, fewer in 2 (gs_sgd @ 0.005: 1; gs_sgd @ 0.001: 2))\n")


def test_single_seed_table_says_commit_and_seed(tmp_path):
    write_seed_run(tmp_path, "dense", 1)
    write_seed_run(tmp_path, "topk", 1, scheme="topk", compression_ratio_up=120.0)
    text = report.table_markdown(report.load_runs([tmp_path]))
    assert "| topk | 0.01 | 90.00% | +0.00 | 120.0x / 120.0x | 1.0x / 1.0x | 100x | yes |" in text  # the old columns
    assert text.endswith("Code: commit: abc1234; seeds: 1 (1 per row)\n")


def test_two_runs_of_one_seed_exit_2(seed_runs, tmp_path):
    write_seed_run(tmp_path / "again", "topk-s2", 2, scheme="topk", density=0.0065)
    done = run_script("table", seed_runs, tmp_path / "again", "--out", tmp_path / "t")
    assert done.returncode == 2
    assert "2 runs of topk @ 0.0065 with the same seed (seed 2)" in done.stderr
    # a seed in summary.json wins over job.yaml's
    write_seed_run(tmp_path / "third", "topk-s2", 2, scheme="topk", density=0.0065, seed=7)
    runs = report.load_runs([seed_runs, tmp_path / "third"])
    assert sorted(r["seed"] for r in runs if r["scheme"] == "topk") == [1, 2, 3, 7]
