"""scripts/results_table.py: docs/results.md and the README's table rendered from the records."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "results_table.py"
README = "# trie-mine\n\nintro\n\n<!-- results:begin -->\nold table\n<!-- results:end -->\n\nrest\n"


def _record(bench, quick, results, date, commit="a" * 40, dirty=False, threads=2):
    return {"bench": bench, "commit": commit, "dirty": dirty, "date": date, "quick": quick,
            "command": [f"bench/{bench}.py"] + ["--quick"] * quick + ["--record"],
            "machine": {"cpu": "Test CPU", "cores": 2, "gpus": [], "loadavg_start": [3.0, 2, 1],
                        "cpu_flags": {"amx_bf16": False, "avx512_bf16": True}},
            "threads": {"OMP_NUM_THREADS": str(threads), "torch": threads}, "wall_s": 61.0,
            "peak_rss_mb": {"self": 900.0, "children": 10.0, "tree": 950.0}, "results": results}


def _config(f1, seconds, resumed=False, shipped=None, precision=None):
    """A bucc_bench configuration's figures; ``shipped``: its sample F1 at a cut of its own
    (a record's ``*_shipped`` keys; transfer 0.05 below), else none; ``precision``: the
    arithmetic its record names (none: a record of before, fp32)."""
    m = lambda f: {"P": f, "R": f, "F1": f}  # noqa: E731
    cuts = {} if shipped is None else {"sample_shipped": m(shipped),
                                       "transfer_shipped": m(shipped - 0.05)}
    return {"sample_tuned": m(f1), "sample_heldout": m(f1 - 0.01), "transfer": m(f1 - 0.04),
            "transfer_tuned": m(f1 - 0.03), "seconds_sample": seconds, "seconds_transfer": 2.0,
            "seconds_per_source": seconds / 100, "resumed": resumed, **cuts,
            **({} if precision is None else {"precision": precision})}


def _write_records(folder: Path):
    folder.mkdir()
    bucc = [_record("bucc_bench", False, {"configs": {"combined": _config(0.99, 490.0)}},
                    "2030-01-01T10:00:00Z", commit="b" * 40),
            _record("bucc_bench", False,
                    {"configs": {"combined": _config(0.98, 5.0, resumed=True, precision="bf16"),
                                 "use_margin": _config(0.95, 120.0, shipped=0.9)}},
                    "2030-01-02T10:00:00Z", commit="c" * 40, dirty=True),
            _record("bucc_bench", True, {"configs": {"combined": _config(1.0, 12.0)}},
                    "2030-01-03T10:00:00Z")]
    toy = [_record("toy_bench", True, {"bench": "toy", "speed": 1.5, "nested": {"a": 1},
                                       "runs": [{"n": 1, "s": 0.5}, {"n": 2, "s": 0.25}]},
                   "2030-01-01T00:00:00Z", commit=None, dirty=None)]
    for name, recs in (("bucc_bench", bucc), ("toy_bench", toy)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs),
                                              encoding="utf-8")


def _run(tmp_path, *args):
    return subprocess.run([sys.executable, str(SCRIPT), "--results", str(tmp_path / "results"),
                           "--docs", str(tmp_path / "results.md"), "--readme",
                           str(tmp_path / "README.md"), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.cluster
def test_write_renders_every_benchmark_and_the_readme_table_and_check_then_passes(tmp_path):
    _write_records(tmp_path / "results")
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    stale = _run(tmp_path, "--check")
    assert stale.returncode == 1 and "results.md" in stale.stderr and "old table" in stale.stderr
    assert _run(tmp_path, "--write").returncode == 0
    assert _run(tmp_path, "--check").returncode == 0
    page = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "## bucc_bench" in page and "## toy_bench" in page and "(#bucc_bench)" in page
    bucc = page.split("## bucc_bench")[1].split("## toy_bench")[0]
    full, quick = bucc.split("### Quick run")
    # the latest full record (c...), with its commit marked dirty; the quick one apart
    assert "| use_margin | 0.9500 | 0.9400 | 0.9100 |" in full and "`cccccccccc` (dirty)" in full
    assert "| combined | 1.0000 |" in quick and "`bench/bucc_bench.py --quick --record`" in quick
    assert "OMP_NUM_THREADS=2, torch 2" in full
    assert "Test CPU (avx512_bf16), 2 cores, no GPU; load 3.0" in full
    toy = page.split("## toy_bench")[1]
    assert "No record yet." in toy.split("### Quick run")[0]
    assert "| `speed` | 1.5 |" in toy and "| `nested.a` | 1 |" in toy and "| 2 | 0.25 |" in toy
    assert "commit unknown (not a git checkout)" in toy
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# trie-mine\n\nintro\n\n<!-- results:begin -->\n")
    assert readme.endswith("<!-- results:end -->\n\nrest\n") and "old table" not in readme
    rows = [ln for ln in readme.splitlines() if ln.startswith("| ") and "F1" not in ln]
    # combined: F1 of the latest record, wall time of the one that mined it (the latest resumed);
    # at the shipped cut, a record's *_shipped figures, else the sample-tuned threshold's
    assert rows == [
        "| combined (fixed combined score) | 0.9800 | 0.9700 | 0.9800 (tuned) | 0.9400 | – | "
        "bf16 | 8 min 10 s | 2 |",
        "| use_margin (USE + LASER margin) | 0.9500 | 0.9400 | 0.9000 (transfer) | 0.8500 | – | "
        "fp32 | 2 min 00 s | 2 |",
    ]
    # the setup said once; no date, commit, load or command of a record (those are on the page)
    assert "Setup: Test CPU (avx512_bf16), 2 cores, no GPU; Python ?, torch ?." in readme
    assert "2030-01" not in readme and "bbbbbbbbbb" not in readme and "load" not in readme
    assert "--record" not in readme


@pytest.mark.cluster
def test_check_fails_with_a_diff_when_a_number_was_edited_by_hand(tmp_path):
    _write_records(tmp_path / "results")
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    assert _run(tmp_path, "--write").returncode == 0
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace("0.9800", "0.9900"),
                      encoding="utf-8")
    res = _run(tmp_path, "--check")
    assert res.returncode == 1
    assert "-| combined (fixed combined score) | 0.9900" in res.stderr
    assert "+| combined (fixed combined score) | 0.9800" in res.stderr


@pytest.mark.cluster
def test_check_fails_when_the_readme_has_no_markers_and_names_a_bad_record(tmp_path):
    _write_records(tmp_path / "results")
    (tmp_path / "README.md").write_text("# no markers\n", encoding="utf-8")
    assert _run(tmp_path, "--write").returncode == 1  # the page is written, the README cannot be
    res = _run(tmp_path, "--check")
    assert (
        res.returncode == 1 and "no <!-- results:begin --> ... <!-- results:end -->" in res.stderr
    )
    with open(tmp_path / "results" / "toy_bench.jsonl", "a", encoding="utf-8") as f:
        f.write('{"bench": "toy_bench"}\n')
    res = _run(tmp_path, "--check")
    assert res.returncode == 2 and "toy_bench.jsonl:2: a record without commit" in res.stderr


@pytest.mark.cluster
def test_the_committed_results_page_and_readme_table_are_what_the_records_give():
    res = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-5000:]


def _precisions(fp32_rate, speedups):
    st = {"items": 100, "gflop_per_item": 3.0, "fp32": {
        "max_tokens=8,chunk=4": {"s": 1.0, "per_s": fp32_rate, "tflop_per_s": 0.3},
        "best": "max_tokens=8,chunk=4", "best_per_s": fp32_rate, "peak_tflop_per_s": 60.0,
        "share_of_peak": 0.005}, "cpu_one_thread": {"per_s": 2.0,
                                                    "max_diff_vs_gpu_fp32_nats": 1e-5},
        "cores_per_gpu_fp32": fp32_rate / 2}
    for p, x in speedups.items():
        st[p] = {"max_tokens=8,chunk=4": {"s": 1 / x, "per_s": fp32_rate * x,
                                          "tflop_per_s": 0.3 * x,
                                          "max_diff_vs_first_nats": 0.25},
                 "best": "max_tokens=8,chunk=4", "best_per_s": fp32_rate * x}
        st[f"speedup_{p}_vs_fp32"] = x
    return st


@pytest.mark.cluster
def test_a_gpu_bench_run_recorded_in_parts_shows_the_latest_record_of_each_stage(tmp_path):
    gpu = {"device": "cuda", "gpu": "Test GPU", "torch": "9.9", "weights": "packed"}
    older = _record("gpu_bench", False, {**gpu, "stages": {
        "scores": _precisions(100.0, {"bf16": 9.0}), "knn": {
            "queries": 8, "rows": 64, "dim": 4, "k": 2, "fp32": {"s": 2.0},
            "fp16": {"s": 1.0, "top1_same_as_fp32": 1.0}, "cores_per_gpu_fp32": 7.0}}},
        "2030-01-01T00:00:00Z")
    newer = _record("gpu_bench", False, {**gpu, "stages": {
        "scores": _precisions(200.0, {"bf16": 0.5, "tf32": 1.75})}}, "2030-01-02T00:00:00Z")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "gpu_bench.jsonl").write_text(
        json.dumps(older) + "\n" + json.dumps(newer) + "\n", encoding="utf-8")
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    assert _run(tmp_path, "--write").returncode == 0
    full = (tmp_path / "results.md").read_text(encoding="utf-8").split("### Quick run")[0]
    # the newer record's scores, the older one's kNN (a stage the newer run did not record)
    assert "| bf16 | `max_tokens=8,chunk=4` | 100 | 0.15 | – | – | 0.5 | 0.25 |" in full
    assert "| tf32 | `max_tokens=8,chunk=4` | 350 | 0.525 | – | – | 1.75 | 0.25 |" in full
    assert "| bf16 | `max_tokens=8,chunk=4` | 900 |" not in full
    assert "`knn`: 8 queries x 64 rows x 4 dims, top 2: fp32 2 s, fp16 1 s" in full
    assert full.count("Device `cuda` (Test GPU), torch 9.9; model weights: packed.") == 2


@pytest.mark.cluster
def test_the_mined_calibration_part_of_clean_bench_is_a_row_per_set(tmp_path):
    f = lambda v: {"P": v, "R": v, "F1": v}  # noqa: E731
    part = {"candidates": 10, "positives": 4, "ece": 0.02, "f1_tuned_same_gold": f(0.9),
            "f1_shipped": f(0.8), "f1_prob_0_5": f(0.7), "f1_gap_prob_0_5_vs_tuned": 0.2}
    rec = _record("clean_bench", False, {"mined": {"sample": part, "transfer": part}},
                  "2030-01-01T00:00:00Z")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "clean_bench.jsonl").write_text(json.dumps(rec) + "\n",
                                                             encoding="utf-8")
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    assert _run(tmp_path, "--write").returncode == 0
    page = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "| sample (fitting set) | 10 | 4 | 0.02 | 0.9 | 0.8 | 0.7 | 0.2 |" in page
    assert "| transfer (held out) | 10 | 4 | 0.02 | 0.9 | 0.8 | 0.7 | 0.2 |" in page


def _density(config, p, wrong_pair=None):
    c = {"kept": 10, "P": p, "R": 0.9, "F1": 0.9, "P_strict": p, "wrong": 1, "accidental": 0,
         "wrong_near_ref": 1, "wrong_per_10k_sources": 3.7, "wrong_diluting_pct": 0.037}
    if wrong_pair:
        c["pairs"] = [wrong_pair]
    mix = {"sources": 2727, "gold": 27, "density": 0.0099, "wall_s": 200.0, "resumed": False,
           "shipped": c}
    return {"config": config, "mixes": {"comparable_1pct": mix},
            "margin": {"cuts": [1.1], "mixes": {"comparable_1pct": {"1.1": {
                "spared": 0.4, "gold_candidates_dropped": 2, "kept_gold_lost": 1,
                "recall_lost": 0.037}}}}}


def _density_page(tmp_path, recs) -> str:
    """The results page ``--write`` makes from density_bench records ``recs``."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "density_bench.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    assert _run(tmp_path, "--write").returncode == 0
    return (tmp_path / "results.md").read_text(encoding="utf-8")


@pytest.mark.cluster
def test_density_bench_shows_the_latest_record_of_every_configuration(tmp_path):
    pair = {"kind": "wrong", "src": "这是正常的。", "tgt": "This ain't normal.",
            "reference": "This is normal.", "ref_dice": 0.55, "combined": 6.1}
    recs = [_record("density_bench", False, _density("combined", 0.5), "2030-01-01T00:00:00Z"),
            _record("density_bench", False, _density("judge", 0.8), "2030-01-02T00:00:00Z"),
            _record("density_bench", False, _density("combined", 0.6, pair),
                    "2030-01-03T00:00:00Z")]
    page = _density_page(tmp_path, recs)
    # judge's; an older record has no P auto nor read column
    assert "| comparable_1pct | 2727 | 27 | 0.0099 | 10 | 0.8 | – | 0.9 |" in page
    assert "| comparable_1pct | 2727 | 27 | 0.0099 | 10 | 0.6 | – | 0.9 |" in page  # latest
    assert "| comparable_1pct | 2727 | 27 | 0.0099 | 10 | 0.5 |" not in page
    assert "| wrong | 这是正常的。 | This ain't normal. | This is normal. | 0.55 | 6.1 |" in page
    assert "| comparable_1pct | 0.4 / 1 (0.037) |" in page


@pytest.mark.cluster
def test_precision_bench_shows_the_latest_record_of_each_cpu_unit(tmp_path):
    def rec(speed, date, **flags):
        r = _record("precision_bench", True, {"precision": "bf16", "speedup_wall": speed}, date)
        r["machine"]["cpu_flags"] = {"amx_bf16": False, "avx512_bf16": False, **flags}
        return r
    recs = [rec(2.1, "2030-01-01T00:00:00Z", avx512_bf16=True),
            rec(0.13, "2030-01-02T00:00:00Z"),
            rec(2.4, "2030-01-03T00:00:00Z", avx512_bf16=True),
            rec(9.0, "2030-01-04T00:00:00Z", amx_bf16=True, avx512_bf16=True)]
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "precision_bench.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    assert _run(tmp_path, "--write").returncode == 0
    page = (tmp_path / "results.md").read_text(encoding="utf-8")
    for speed in ("0.13", "2.4", "9"):
        assert f"| `speedup_wall` | {speed} |" in page
    assert "| `speedup_wall` | 2.1 |" not in page    # a later record of the same unit
    for unit in ("no bf16 matrix unit", "avx512_bf16", "amx_bf16 and avx512_bf16"):
        assert f"- machine: Test CPU ({unit}), 2 cores" in page


@pytest.mark.cluster
def test_the_readme_row_of_a_configuration_shows_its_latest_full_1pct_density_figures(tmp_path):
    (tmp_path / "results").mkdir()
    bucc = _record("bucc_bench", False, {"configs": {
        "combined": _config(0.99, 100.0), "judge": _config(0.98, 100.0, shipped=0.96),
        "judge+look": _config(0.98, 300.0, shipped=0.97)}}, "2030-01-01T00:00:00Z")
    density = [_record("density_bench", False, _density("judge", 0.7), "2030-01-01T00:00:00Z"),
               _record("density_bench", False, _density("judge", 0.8), "2030-01-02T00:00:00Z"),
               _record("density_bench", True, _density("judge", 0.1), "2030-01-03T00:00:00Z"),
               _record("density_bench", False, dict(_density("judge", 0.6), second_look=True),
                       "2030-01-04T00:00:00Z")]
    for name, recs in (("bucc_bench", [bucc]), ("density_bench", density)):
        (tmp_path / "results" / f"{name}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    assert _run(tmp_path, "--write").returncode == 0
    rows = {ln.split(" | ")[0]: ln.split(" | ")[5]
            for ln in (tmp_path / "README.md").read_text(encoding="utf-8").splitlines()
            if ln.startswith("| ") and "F1" not in ln}
    # the latest full record without the look; the look's own; none for combined (no record)
    assert rows == {"| combined (fixed combined score)": "–",
                    "| judge (default: learned judge, prob >= 0.5)": "0.800 / 0.900",
                    "| judge+look": "0.600 / 0.900"}


@pytest.mark.cluster
def test_density_bench_shows_a_cut_that_keeps_the_same_pairs_once(tmp_path):
    pair = {"kind": "wrong", "src": "这是正常的。", "tgt": "This ain't normal.",
            "reference": "This is normal.", "ref_dice": 0.55, "prob": 0.6}
    res = _density("judge", 0.8, pair)
    res["mixes"]["comparable_1pct"]["prob_0_5"] = dict(res["mixes"]["comparable_1pct"]["shipped"])
    page = _density_page(tmp_path, [_record("density_bench", False, res,
                                            "2030-01-01T00:00:00Z")])
    assert "At prob >= 0.5: the same." in page
    assert page.count("| comparable_1pct | 2727 |") == 1
    assert page.count("| wrong | 这是正常的。 |") == 1


@pytest.mark.cluster
def test_density_bench_shows_a_second_look_record_beside_the_one_without(tmp_path):
    added = {"kind": "accidental", "src": "他走了。", "tgt": "He left.", "reference": "He left.",
             "ref_dice": 1.0, "combined": 5.9, "generators": ["mt_knn"]}
    pair = {"sources": 3000, "targets": 14000, "candidates": 5000, "wall_s": 300.0,
            "resumed": False, "shipped": {"kept": 1, "wrong": 0, "accidental": 1,
                                          "wrong_pct_of_sources": 0.0, "wrong_near_ref": 0,
                                          "pairs": [added], "look_added": {
                                              "kept": 1, "wrong": 0, "accidental": 1}}}
    look = dict(_density("judge", 0.7), second_look=True, pairs={"clean_bench": pair})
    recs = [_record("density_bench", False, _density("judge", 0.8), "2030-01-01T00:00:00Z"),
            _record("density_bench", False, look, "2030-01-02T00:00:00Z"),
            _record("density_bench", False, dict(_density("judge", 0.9), second_look=False),
                    "2030-01-03T00:00:00Z")]
    page = _density_page(tmp_path, recs)
    assert "| comparable_1pct | 2727 | 27 | 0.0099 | 10 | 0.9 |" in page  # latest without
    assert "| comparable_1pct | 2727 | 27 | 0.0099 | 10 | 0.8 |" not in page  # older without
    assert "| comparable_1pct | 2727 | 27 | 0.0099 | 10 | 0.7 |" in page  # with the look
    assert "Configuration `judge` with the second look" in page
    assert "The second look added 1 of the kept pairs (0 wrong, 1 accidental)." in page
    assert "| accidental | 他走了。 | He left. | He left. | 1 | 5.9 | mt_knn |" in page


@pytest.mark.cluster
def test_seeds_bench_long_runs_of_single_systems_show_beside_the_full_record(tmp_path):
    f1 = lambda v: {"0.0": {"F1": v}, "0.9": {"F1": v / 2}}  # noqa: E731
    conv = {"steps": 5000, "epochs": 17.5, "steps_per_s": 2.5, "seconds": 2000.0,
            "loss_curve": [0.3, 0.2, 0.1], "tail_drop_pct": 1.5}
    full = _record("seeds_bench", False, {"paper": {}, "gl": {"birnn": f1(30.0)}},
                   "2030-01-01T00:00:00Z")
    birnn = _record("seeds_bench", False, {"partial": {
        "features": {"gl": f1(60.0)},
        "birnn": {"gl": f1(70.0), "gl_cosine_first_stage": f1(20.0), "convergence": conv,
                  "claims": {"loss_stopped_falling": {"holds": True,
                                                      "fell_in_last_fifth_pct": 1.5}}}},
        "steps_full": {"birnn": 5000, "ae_mlp": 150}, "budget_cap_s": 2100.0,
        "data": {"train_pairs": 18247}}, "2030-01-02T00:00:00Z")
    ae = _record("seeds_bench", False, {"partial": {"ae_mlp": {
        "kim": {"ae_cos": {"src_to_tgt": 9.0, "tgt_to_src": 11.0, "both": 10.0}},
        "convergence": dict(conv, steps=1234)}}}, "2030-01-03T00:00:00Z")
    guo = lambda p: {"1000": {"P@1": p, "P@3": p + 1, "P@10": p + 2}}  # noqa: E731
    stage1 = {"steps": 600, "early_stop": {"best": 0.264, "best_step": 300, "patience": 2,
                                           "checks": [[150, 0.2], [300, 0.264], [450, 0.25],
                                                      [600, 0.26]]}}
    dual = _record("seeds_bench", False, {"partial": {"dual_enc": {"variants": {
        "stage1": {"guo": guo(20.0), "training": {"stage1": stage1}},
        "M=5": {"guo": guo(25.0), "training": {"stage2": {"steps": 150}}}}}},
        "steps_full": {"birnn": 600, "dual_enc": 6000, "stage2": 150}}, "2030-01-04T00:00:00Z")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "seeds_bench.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in (full, birnn, ae, dual)), encoding="utf-8")
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    assert _run(tmp_path, "--write").returncode == 0
    page = (tmp_path / "results.md").read_text(encoding="utf-8").split("### Quick run")[0]
    assert "| `birnn` | 30.0 | 15.0 |" in page                     # the full record's table
    assert "| `birnn` | 70.0 | 35.0 |" in page and "| `features` | 60.0 | 30.0 |" in page
    assert "| `birnn` | 5000 | 2.5 | 2000 | 0.3, 0.2, 0.1 | 1.5 |" in page
    assert "| `ae_cos` | 9.00 | 11.00 | 10.00 |" in page
    assert "| `ae_mlp` | 1234 | 2.5 |" in page
    assert "| `birnn: loss_stopped_falling` | yes |" in page
    assert "updates asked: birnn 5000;" in page
    assert "| `dual_enc M=5` | 25.0 / 26.0 / 27.0 |" in page
    assert "updates asked: dual_enc 6000, stage2 150;" in page
    assert ("best held-out P@1 26.4 % at update 300 of 600 (patience 2); held-out P@1 by "
            "update: 150 20.0, 300 26.4, 450 25.0, 600 26.0") in page
