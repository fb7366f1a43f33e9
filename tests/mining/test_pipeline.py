"""The mining pipeline (triemine.mining): candidates, margins, exact scores, combination, resume."""
import json

import numpy as np
import pytest

from triemine.errors import InputError
from triemine.mining.candidates import CandidateSet, embedding_space, translation_space
from triemine.judging.combination import Combination
from triemine.scoring.forced import ForcedScorer
from triemine.config.settings import with_values
from triemine.io.tsv import read_mined

from helpers import OTHER, PAIRS, combination_file, job_options


def test_union_keeps_one_row_per_pair_with_merged_origins_and_first_values():
    a = CandidateSet([0, 2, 0], [1, 3, 1], [1, 1, 1], {"score": [-5.0, -2.0, -3.0]})
    b = CandidateSet([0, 4], [1, 0], [2, 2], {"score": [-9.0, -1.0], "m": [1.2, 1.1]})
    u = a.union(b)
    assert u.src.tolist() == [0, 2, 4] and u.tgt.tolist() == [1, 3, 0]
    assert u.origin.tolist() == [3, 1, 2]
    assert u.columns["score"].tolist() == [-5.0, -2.0, -1.0]
    assert np.isnan(u.columns["m"][1]) and u.columns["m"][0] == 1.2
    assert len(CandidateSet.empty().union(CandidateSet.empty())) == 0


def test_union_with_an_empty_set_copies_nothing_when_the_pairs_are_already_canonical():
    """The mining job unites its generators' sets starting from an empty one: a set that is
    already sorted and unique (as each generator's is) comes back as it is, no copy of its
    columns (the generation's peak memory at scale); any other set is sorted as before."""
    canon = CandidateSet([0, 0, 2], [1, 3, 0], [2, 2, 2], {"m": [1.1, np.nan, 1.3]})
    assert canon.is_canonical()
    assert CandidateSet.empty().union(canon) is canon and canon.union(CandidateSet.empty()) is canon
    messy = CandidateSet([2, 0, 0], [0, 3, 1], [2, 2, 2], {"m": [1.3, np.nan, 1.1]})
    dup = CandidateSet([0, 0], [1, 1], [2, 1], {"m": [1.0, 2.0]})
    for other in (messy, dup):
        assert not other.is_canonical()
        u = CandidateSet.empty().union(other)
        assert u is not other and u.is_canonical()
    u = CandidateSet.empty().union(messy)
    assert u.src.tolist() == [0, 0, 2] and u.tgt.tolist() == [1, 3, 0]
    assert u.columns["m"].tobytes() == canon.columns["m"].tobytes()
    assert CandidateSet.empty().union(dup).origin.tolist() == [3]
    # an empty set with columns the other lacks still gives them (NaN)
    wide = CandidateSet(np.zeros(0), np.zeros(0), np.zeros(0), {"x": []})
    assert np.isnan(wide.union(canon).columns["x"]).all()


def test_ratio_margin_equals_its_definition():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 8)).astype(np.float32)
    y = (x[::-1] + 0.3 * rng.normal(size=(30, 8))).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    space = embedding_space(x, y, "test", k=4)
    sims = x @ y.T
    fwd = np.sort(sims, axis=1)[:, -4:].mean(1)
    bwd = np.sort(sims, axis=0)[-4:, :].mean(0)
    s, t = np.array([0, 3, 7]), np.array([29, 5, 22])
    want = sims[s, t] / ((fwd[s] + bwd[t]) / 2)
    assert space.features(s, t)["test_margin"] == pytest.approx(want, abs=1e-5)
    c = space.candidates(1, 1)
    assert (c.tgt[c.src == 0] == 29).all()  # each source's best margin is its own translation here
    assert c.columns["test_margin"] == pytest.approx(space.features(c.src, c.tgt)["test_margin"])


def _random_space(seed: int, n_src: int, n_tgt: int, dim: int):
    """An embedding space of random unit rows (origin bit 2)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_src, dim)).astype(np.float32)
    y = rng.normal(size=(n_tgt, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    return embedding_space(x, y, "test", k=4, origin=2)


def test_a_space_fills_only_the_features_its_pairs_lack_with_the_same_bits(monkeypatch):
    """Every candidate gets every margin space's columns; the space's own candidates keep the
    values it gave them (the same bits as computing them again), so only the other generators'
    pairs are computed: none with one generator."""
    space = _random_space(1, 40, 50, 8)
    own = space.candidates(2, 1)
    other = CandidateSet([0, 5, 39], [49, 7, 0], [1, 1, 1], {"score": [-1.0, -2.0, -3.0]})
    both = own.union(other)
    want = space.features(both.src, both.tgt)
    sizes = []
    real = space.features
    monkeypatch.setattr(space, "features", lambda s, t: (sizes.append(len(s)), real(s, t))[1])
    got = space.fill_features(both)
    for c in ("test_cos", "test_margin"):
        assert got.col(c).tobytes() == want[c].tobytes()
    new = len(both) - len(own)  # the other generator's pairs that the space did not propose
    assert sizes == [new] and 0 < new <= 3
    assert space.fill_features(own) is own and sizes == [new]  # one generator: nothing computed
    filled = space.fill_features(other)
    assert filled.col("test_cos").tobytes() == real(other.src, other.tgt)["test_cos"].tobytes()


def test_a_space_gives_its_candidates_a_range_of_sources_at_a_time_with_the_same_bits(tmp_path):
    """The job writes a margin space's candidates a range of sources at a time (one range's in
    memory): concatenated, they are the whole set's rows and feature bits, the cosines of
    512-dimension rows included (computed per range, in chunks that start elsewhere)."""
    from triemine.embedding import knn

    space = _random_space(4, 300, 200, 512)
    want = space.candidates(2, 1, None)
    for sources in (7, 64, 1000):
        knn.MARGIN_SOURCES, old = sources, knn.MARGIN_SOURCES
        try:
            parts = list(space.candidate_blocks(2, 1, None, spill=tmp_path / "spill"))
        finally:
            knn.MARGIN_SOURCES = old
        assert len(parts) == -(-300 // sources)
        for name in ("src", "tgt", "origin"):
            assert np.concatenate([getattr(p, name) for p in parts]).tobytes() == \
                getattr(want, name).tobytes()
        for c in space.columns:
            assert np.concatenate([p.col(c) for p in parts]).tobytes() == want.col(c).tobytes()


def test_translation_retrieval_finds_the_target_that_reads_like_the_translation():
    targets = [t for _, t in PAIRS[:20]] + OTHER[:40]
    hyps = [t for _, t in PAIRS[:20]]  # a perfect translator
    c = translation_space(hyps, targets, k=4).candidates(1, 0)
    assert c.tgt.tolist() == list(range(20))


def test_combination_is_fixed_once_fitted_and_round_trips(tmp_path):
    cols = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([10.0, 0.0, 5.0])}
    comb = Combination("c", ["a", "b"], [1.0, 0.5]).fit(cols, "unit test")
    got = comb(cols)
    want = (cols["a"] - 2) / np.std(cols["a"]) + 0.5 * (cols["b"] - 5) / np.std(cols["b"])
    assert got == pytest.approx(want)
    comb.save(tmp_path / "c.json")
    again = Combination.load(tmp_path / "c.json")
    # the same statistics on other data: a threshold means the same everywhere
    other = {"a": np.array([5.0]), "b": np.array([5.0])}
    assert again(other) == pytest.approx(comb(other))
    (tmp_path / "bad.json").write_text(json.dumps({**json.loads((tmp_path / "c.json").read_text()),
                                                   "mean": [1.0, "x"]}))
    with pytest.raises(InputError, match="finite numbers"):
        Combination.load(tmp_path / "bad.json")
    with pytest.raises(InputError, match="needs the column"):
        comb({"a": np.zeros(2)})


def test_combination_choices_give_one_variant_per_weight_tried(tmp_path):
    cols = {"a": np.array([1.0, 2.0, 3.0]), "n": np.array([1.0, 1.0, 0.5])}
    comb = Combination("c", ["a", "n"], [1.0, 0.0], choices={"n": [0.0, 0.5, 1.0]}).fit(cols, "t")
    v = comb.variants()
    assert list(v) == ["n=0", "n=0.5", "n=1"]
    za = (cols["a"] - 2) / np.std(cols["a"])
    zn = (cols["n"] - cols["n"].mean()) / np.std(cols["n"])
    assert v["n=0.5"](cols) == pytest.approx(za + 0.5 * zn)
    assert comb(cols) == pytest.approx(za)  # the weight in force is the one saved, not the grid
    comb.with_weight("n", 0.5).save(tmp_path / "c.json")
    again = Combination.load(tmp_path / "c.json")
    assert again.choices == {"n": [0.0, 0.5, 1.0]} and again(cols) == pytest.approx(za + 0.5 * zn)
    assert list(Combination("d", ["a"], [1.0]).variants()) == [""]
    for bad in ({"x": [1.0]}, [0.5], {"n": []}, {"n": 0.5}):
        (tmp_path / "bad.json").write_text(
            json.dumps({**json.loads((tmp_path / "c.json").read_text()), "choices": bad})
        )
        with pytest.raises(InputError, match="not a combination file"):
            Combination.load(tmp_path / "bad.json")


@pytest.mark.parametrize("src, tgt, want", [
    ("截至2015年11月，", "As of November 2016", 0.5),  # 2,1,5,1,1 against 1,1,2,1,6
    ("平均温度为20.9 °C", "an average temperature of 20.8 °C", 0.5),  # 2,9 against 2,8
    ("约5万份", "roughly 50,000", 1.0),  # zeros are ignored: units move them
    ("在１９１２年", "in 1912", 1.0),  # full-width digits are digits
    ("二十世纪", "the 20th century", 1.0),  # one side without digits says nothing
    ("没有数字", "no numbers", 1.0),
    ("32岁时", "at the age of 47", 0.0),
    ("到20世纪90年代末", "by the late 1990s", 1.0),  # a decade of a century, as its year
    ("到20世纪90年代末", "by the late 1980s", 2 / 3),
])
def test_numeral_agreement(src, tgt, want):
    from triemine.mining.features import numeral_agreement

    assert numeral_agreement(src, tgt) == pytest.approx(want)


def test_pipeline_unites_generators_and_scores_every_pair_exactly(tiny_model, corpora, tmp_path,
                                                                  monkeypatch):
    from triemine.mining.run import mine_pipeline

    src, tgt, pairs, targets = corpora
    cfg = job_options(candidates=("trie", "knn", "retrieval"), encoder="cipher", min_margin=None,
                         beam=3, priors=True, combination=combination_file(tmp_path),
                         translate_beam=2)
    out = tmp_path / "out.tsv"
    summary = mine_pipeline(tiny_model, src, tgt, out, cfg)
    m = read_mined(out)
    assert summary["candidates"] == len(m) > 0
    assert set(m.columns) >= {"prior", "pmi", "combined", "cipher_margin", "ret_margin", "origin"}
    origin = m.col("origin").astype(int)
    assert all((origin & bit).any() for bit in (1, 2, 4))
    assert summary["by_generator"] == {name: int(((origin & bit) > 0).sum()) for name, bit in
                                       (("trie", 1), ("knn", 2), ("retrieval", 4),
                                        ("mt_knn", 8))}
    assert "17" not in m.src_ids  # the empty source line gets nothing
    sc = ForcedScorer(tiny_model)
    s_idx = np.array([int(i) - 1 for i in m.src_ids])
    t_idx = np.array([int(i) - 1 for i in m.tgt_ids])
    src_lines = src.read_text(encoding="utf-8").split("\n")
    exact = sc.score_pairs([tiny_model.encode_source(x) if x else None for x in src_lines],
                           [tiny_model.encode_target(t) for t in targets], s_idx, t_idx)
    assert m.col("score") == pytest.approx(exact, abs=1e-3)
    prior = sc.prior([tiny_model.encode_target(targets[t]) for t in t_idx])
    assert m.col("prior") == pytest.approx(prior, abs=1e-3)
    ntok = -m.col("score") / m.col("ce_token")
    assert m.col("pmi") == pytest.approx((m.col("score") - m.col("prior")) / ntok,
                                         abs=1e-3)  # 6 decimals in the TSV
    assert m.col("combined") == pytest.approx(m.col("cipher_margin") - m.col("ce_token"), abs=1e-5)
    assert (m.col("numerals") == 1.0).all()  # the synthetic language pair has no digits
    # every translation present in the targets is among the candidates
    found = set(zip(s_idx.tolist(), t_idx.tolist()))
    assert all((i, 24 + i) in found for i in range(12))
    # the TSV is written a block of candidates at a time: the same bytes however they are cut
    whole = out.read_bytes()
    import triemine.io.tsv as tsv

    import triemine.mining.finish as finish

    monkeypatch.setattr(finish, "FINISH_BLOCK", 3)
    formatted = []
    real_format = tsv.format_rows
    monkeypatch.setattr(tsv, "format_rows", lambda cols, cells, number: (
        formatted.append(len(cells["src_id"])), real_format(cols, cells, number))[1])
    mine_pipeline(tiny_model, src, tgt, out, cfg, resume=True)  # every stage reused
    assert out.read_bytes() == whole
    assert formatted == [3] * (len(m) // 3) + ([len(m) % 3] if len(m) % 3 else [])
    # the stages go a range of sources (the union, the margin candidates, whose backward ones
    # wait in spill files) and a block of rows (the scores' merge) at a time: the same bytes
    # however they are cut, in this process or in shards on a pool
    from triemine.distributed.local import InlinePool
    from triemine.embedding import knn
    from triemine.mining import columns, run

    from triemine.mining import generators

    monkeypatch.setattr(run, "UNITE_SOURCES", 1)  # the empty source's range: no generator's
    monkeypatch.setattr(knn, "MARGIN_SOURCES", 3)
    monkeypatch.setattr(generators.TrieSearch, "block_rows", 2)  # the search's TSV read 2 rows
    # at a time (the trie stage's store written again from it below)
    monkeypatch.setattr(columns, "BLOCK", 4)
    mine_pipeline(tiny_model, src, tgt, out, cfg)
    assert out.read_bytes() == whole
    assert len(read_mined(tmp_path / "out.tsv.work" / "trie.tsv")) > 4  # several blocks
    mine_pipeline(tiny_model, src, tgt, out, cfg, pool=InlinePool())
    assert out.read_bytes() == whole
    searched = read_mined(tmp_path / "out.tsv.work" / "trie.tsv")
    assert searched.col("src_line").tolist() == [int(i) for i in searched.src_ids]
    assert searched.col("tgt_line").tolist() == [int(i) for i in searched.tgt_ids]
    assert not any(p.name.endswith((".spill",
                                    ".todo.cols")) for p in (tmp_path / "out.tsv.work").iterdir())


def test_pipeline_resumes_without_recomputing_and_refuses_other_settings(
    tiny_model, corpora, tmp_path
):

    from triemine.mining.run import mine_pipeline

    src, tgt, _, _ = corpora
    cfg = job_options(candidates=("knn",), encoder="cipher", min_margin=None,
                         combination=combination_file(tmp_path))
    out = tmp_path / "out.tsv"
    mine_pipeline(tiny_model, src, tgt, out, cfg)
    first = out.read_bytes()
    work = tmp_path / "out.tsv.work"
    stamps = {p: p.stat().st_mtime_ns for p in work.rglob("*.npy")}
    assert any(p.parent.name == "candidates.cols" for p in stamps)  # the job's column store
    out.unlink()  # interrupted before the TSV was written
    mine_pipeline(tiny_model, src, tgt, out, cfg, resume=True)
    assert out.read_bytes() == first
    assert {p: p.stat().st_mtime_ns for p in work.rglob("*.npy")} == stamps
    # a transient setting (the shard size: the same bytes) does not stop a resume; any other
    # setting of the tree is in the key (settings.key_of), a trie knob too
    out.unlink()
    mine_pipeline(tiny_model, src, tgt, out, with_values(cfg, dict(shard_sources=3)), resume=True)
    assert out.read_bytes() == first
    assert {p: p.stat().st_mtime_ns for p in work.rglob("*.npy")} == stamps
    with pytest.raises(InputError, match="cannot resume"):
        mine_pipeline(tiny_model, src, tgt, out, with_values(cfg, dict(sort_window=3)),
                      resume=True)
    other = job_options(candidates=("knn",), encoder="cipher", min_margin=0.5,
                           combination=cfg.scores.combination)
    with pytest.raises(InputError, match="cannot resume"):
        mine_pipeline(tiny_model, src, tgt, out, other, resume=True)
    mine_pipeline(tiny_model, src, tgt, out, other)  # without --resume: starts over


def test_a_job_off_the_cpu_finds_the_same_pairs_and_never_resumes_a_cpu_jobs_work(
        tiny_model, corpora, tmp_path, monkeypatch):
    """``device`` other than "cpu" (torch's "cpu:0" here, which takes the off-CPU plans on this
    machine without a GPU): the kNN cells are torch's exact search over DEVICE_KNN_DATABASE_ROWS
    database rows each, the trie search's batches the device's; the same candidate pairs as the
    CPU's job, the same scores up to the last bits, and the work of a job on the CPU is not
    resumed on another device (other bits) nor the other way round.  (The scorer follows its
    weights' device, which torch reports as "cpu" here; bench/gpu_bench.py --quick gives it
    "cpu:0" itself.)"""
    import json

    from triemine.embedding import knn_shards
    from triemine.mining.run import mine_pipeline

    monkeypatch.setattr(knn_shards, "DEVICE_KNN_DATABASE_ROWS", 7)  # several cells a direction
    src, tgt, _, _ = corpora
    cfg = job_options(candidates=("trie", "knn"), encoder="cipher", min_margin=None, beam=3,
                         priors=True, combination=combination_file(tmp_path))
    on_cpu, off_cpu = tmp_path / "cpu.tsv", tmp_path / "device.tsv"
    mine_pipeline(tiny_model, src, tgt, on_cpu, cfg)
    mine_pipeline(tiny_model, src, tgt, off_cpu, with_values(cfg, {"device": "cpu:0"}))
    a, b = read_mined(on_cpu), read_mined(off_cpu)
    assert list(zip(a.src_ids, a.tgt_ids)) == list(zip(b.src_ids, b.tgt_ids)) and len(a) > 10
    for col in ("score", "prior", "cipher_margin", "combined"):
        assert b.col(col) == pytest.approx(a.col(col), abs=1e-4), col
    work = tmp_path / "device.tsv.work"
    manifest = json.loads((work / "knn.cipher.fwd.shards" / "manifest.json").read_text())
    key = manifest["key"]["settings"]
    assert key["device"] == "cpu:0" and key["database_rows"] == 7
    n_tgt = np.load(work / "emb.cipher.tgt.npy", mmap_mode="r").shape[0]
    assert len(manifest["done"]) == -(-n_tgt // 7) > 1  # one query range, the targets in 7s
    assert {c["database"] for c in manifest["done"].values()} == {7, n_tgt % 7 or 7}
    with pytest.raises(InputError, match="cannot resume"):
        mine_pipeline(tiny_model, src, tgt, on_cpu, with_values(cfg, {"device": "cpu:0"}),
                      resume=True)
    with pytest.raises(InputError, match="cannot resume"):
        mine_pipeline(tiny_model, src, tgt, off_cpu, cfg, resume=True)


def test_scored_candidates_are_read_back_block_by_block_and_a_job_resumes_from_them(
        tiny_model, corpora, tmp_path, monkeypatch):
    """The scored candidates go to one file per column and come back a block of rows at a time,
    bit for bit (NaN too); a stage cut short (no index) is not used; a job interrupted while it
    wrote its TSV resumes from them alone, running no generator and no scorer again."""
    import shutil

    from triemine.mining import generators, run
    from triemine.mining.candidates import CandidateSet
    from triemine.mining.finish import CANDIDATES, load_scored, save_scored
    from triemine.mining.stages import stage_dir
    from triemine.mining.run import mine_pipeline

    cands = CandidateSet([3, 1, 2, 0, 5], [0, 4, 4, 1, 2], [1, 2, 3, 2, 1],
                         {"score": [-1.5, np.nan, -2.25, -0.5, -3.0],
                          "x": [0.1, 0.2, 0.3, 0.4, 0.5]})
    saved = save_scored(tmp_path / "w", cands)
    for a, b in ((0, 5), (1, 3), (4, 5), (2, 2)):
        part, want = saved.block(a, b), cands.take(np.arange(a, b))
        for got, exp in [(part.src, want.src), (part.tgt, want.tgt), (part.origin, want.origin)] + \
                [(part.columns[c], want.columns[c]) for c in ("score", "x")]:
            assert got.dtype == exp.dtype and got.tobytes() == exp.tobytes()
    assert load_scored(tmp_path / "w").columns == ["score", "x"]
    col = stage_dir(tmp_path / "w", CANDIDATES) / "x.npy"
    whole = col.read_bytes()
    col.write_bytes(whole[:-8])  # a column cut short: the stage is not used
    assert load_scored(tmp_path / "w") is None
    col.write_bytes(whole)
    with pytest.raises(ValueError, match="column file"):
        save_scored(tmp_path / "w2", cands.with_columns(origin=np.zeros(5)))
    (stage_dir(tmp_path / "w", CANDIDATES) / "columns.json").unlink()  # cut short before its index
    assert load_scored(tmp_path / "w") is None

    src, tgt, _, _ = corpora
    cfg = job_options(candidates=("knn",), encoder="cipher", min_margin=None,
                         combination=combination_file(tmp_path))
    out = tmp_path / "out.tsv"
    summary = mine_pipeline(tiny_model, src, tgt, out, cfg)
    first = out.read_bytes()
    work = tmp_path / "out.tsv.work"
    for p in work.iterdir():  # only the settings and the scored candidates are left
        if p.name not in ("settings.json", stage_dir(work, CANDIDATES).name):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    out.unlink()

    def refuse(*_a, **_k):
        raise AssertionError("an earlier stage ran again")
    monkeypatch.setattr(generators.EncoderKnn, "run", refuse)
    monkeypatch.setattr(run, "_scores", refuse)
    monkeypatch.setattr(run, "_priors", refuse)
    again = mine_pipeline(tiny_model, src, tgt, out, cfg, resume=True)
    assert out.read_bytes() == first
    assert (again["candidates"], again["by_generator"]) == (summary["candidates"],
                                                             summary["by_generator"])


def test_a_job_killed_between_its_stages_resumes_at_the_stage_it_was_in(tiny_model, corpora,
                                                                       tmp_path, monkeypatch):
    """The candidates are one column store that the stages add columns to: a job killed in the
    priors resumes with its candidates and exact scores as they were (no generator, no forced
    decoding runs again) and writes the TSV of a job never killed."""
    from triemine.mining import features, generators, run
    from triemine.mining.columns import ColumnStore
    from triemine.mining.run import mine_pipeline

    src, tgt, _, _ = corpora
    cfg = job_options(candidates=("knn",), encoder="cipher", min_margin=None,
                         combination=combination_file(tmp_path))
    mine_pipeline(tiny_model, src, tgt, tmp_path / "whole.tsv", cfg)
    out = tmp_path / "out.tsv"
    real = features.prior_table

    def killed(*_a, **_k):
        raise KeyboardInterrupt
    monkeypatch.setattr(run, "prior_table", killed)
    with pytest.raises(KeyboardInterrupt):
        mine_pipeline(tiny_model, src, tgt, out, cfg)
    store = ColumnStore.open(tmp_path / "out.tsv.work" / "candidates.cols")
    assert store.done == ["candidates", "scores"] and "score" in store.columns
    assert "prior" not in store.columns and not out.exists()

    def refuse(*_a, **_k):
        raise AssertionError("an earlier stage ran again")
    monkeypatch.setattr(run, "prior_table", real)
    monkeypatch.setattr(generators.EncoderKnn, "run", lambda self, job: (
        ColumnStore.open(job.work / "knn.cols"), None))
    monkeypatch.setattr(features, "forced_scores", refuse)
    monkeypatch.setattr(run, "write_store", refuse)
    mine_pipeline(tiny_model, src, tgt, out, cfg, resume=True)
    assert out.read_bytes().split(b"\n", 1)[1] == \
        (tmp_path / "whole.tsv").read_bytes().split(b"\n", 1)[1]


def test_the_trie_searchs_rows_become_candidates_a_block_at_a_time(tmp_path, monkeypatch):
    """The trie generator streams its search's TSV: its candidates are those of the whole file
    read at once (one row a pair, the best score's, sorted) for any block size, a source's rows
    never split; rows out of source order and a bad number are errors naming the file."""
    from triemine.errors import InputError
    from triemine.mining.generators import TrieSearch
    from triemine.io.tsv import column_order, write_rows

    cols = column_order(["n_tokens", "prior", "src_line", "tgt_line"])
    rows = [(1, 4, -2.0), (1, 2, -3.0), (1, 4, -1.5), (2, 1, -1.0), (2, 1, -1.0), (4, 3, -4.0),
            (4, 2, -0.5), (4, 3, -0.25), (4, 1, -0.5), (6, 6, -2.5)]
    cells = {"src_id": [str(a) for a, _, _ in rows], "tgt_id": [str(b) for _, b, _ in rows],
             "src": ["x"] * len(rows), "tgt": ["y"] * len(rows),
             "score": [c for *_, c in rows], "ce_word": [1.0] * len(rows),
             "ce_token": [1.0] * len(rows), "n_tokens": list(range(1, len(rows) + 1)),
             "prior": [-float(i) for i in range(len(rows))],
             "src_line": [a for a, _, _ in rows], "tgt_line": [b for _, b, _ in rows]}
    tsv = tmp_path / "trie.tsv"
    write_rows(tsv, cols, cells)
    gen = TrieSearch()
    want = {(0, 3): (-1.5, 3.0), (0, 1): (-3.0, 2.0), (1, 0): (-1.0, 4.0), (3, 2): (-0.25, 8.0),
            (3, 1): (-0.5, 7.0), (3, 0): (-0.5, 9.0), (5, 5): (-2.5, 10.0)}
    for size in range(1, len(rows) + 2):
        monkeypatch.setattr(TrieSearch, "block_rows", size)
        blocks = list(gen._candidates(tsv, ["score", "n_tokens", "prior"], 6, 6))
        assert all(b.is_canonical() for b in blocks)
        got = {(s, t): (sc, n) for b in blocks for s, t, sc, n in zip(
            b.src.tolist(), b.tgt.tolist(), b.col("score").tolist(), b.col("n_tokens").tolist())}
        assert got == want and sum(map(len, blocks)) == len(want)
        srcs = [set(b.src.tolist()) for b in blocks]
        assert all(not (x & y) for i, x in enumerate(srcs) for y in srcs[i + 1:])
    with pytest.raises(RuntimeError, match=r"trie.tsv:11: .* target line 6 .* 6 and 5 lines"):
        list(gen._candidates(tsv, ["score"], 6, 5))  # the last row names no target line
    cells["src_line"][5], cells["src_line"][3] = 2, 4
    write_rows(tsv, cols, cells)
    with pytest.raises(RuntimeError, match=r"trie.tsv:6: .* source line 2 .*after source line 4"):
        list(gen._candidates(tsv, ["score"], 6, 6))  # rows out of source order
    cells["src_line"][5], cells["src_line"][3] = 4, 2
    write_rows(tsv, cols, cells)
    lines = tsv.read_text(encoding="utf-8").split("\n")
    assert "\t-0.250000\t" in lines[8]  # row 8, file line 9
    lines[8] = lines[8].replace("\t-0.250000\t", "\tx\t")
    tsv.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(InputError, match=r"trie.tsv:9: column score: not a number"):
        list(gen._candidates(tsv, ["score"], 6, 6))
    write_rows(tsv, cols, {c: [] for c in cells})  # a search with no match: no candidates
    assert list(gen._candidates(tsv, ["score"], 6, 6)) == []


def test_a_job_without_a_pool_scores_in_shards_with_the_model_it_loaded(tiny_model, corpora,
                                                                       tmp_path, monkeypatch):
    """Without a pool the exact scores and priors run the pool's shards in the job's own
    process, with the model the job has loaded (none is loaded again): the shards' manifests
    are written as on a pool, and the TSV is that of a pool's run (a worker loading the model
    from its directory)."""
    import json

    from triemine.models import model_dir
    from triemine.distributed.local import InlinePool
    from triemine.mining.run import mine_pipeline

    src, tgt, _, _ = corpora
    cfg = job_options(candidates=("knn",), encoder="cipher", min_margin=None,
                         combination=combination_file(tmp_path))
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-pool"))
    with InlinePool() as pool:
        mine_pipeline(tiny_model, src, tgt, tmp_path / "pool.tsv", cfg, pool=pool)

    def refuse(*_a, **_k):
        raise AssertionError("the model was loaded again")
    monkeypatch.setattr(model_dir, "load_model_dir", refuse)
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-none"))
    out = tmp_path / "none.tsv"
    mine_pipeline(tiny_model, src, tgt, out, cfg)
    for name in ("scores.shards", "priors.shards"):
        manifest = json.loads((tmp_path / "none.tsv.work" / name / "manifest.json").read_text(
            encoding="utf-8"))
        assert manifest["done"] and len(manifest["done"]) == len(manifest["key"]["shards"])
    assert out.read_bytes() == (tmp_path / "pool.tsv").read_bytes()


def test_scores_merge_rows_in_order_and_skip_a_stage_with_nothing_to_score(tmp_path):
    """The computed rows reach the store's NaN rows in order whatever the shards' lengths, a
    stream of other length is an error; a store whose pairs all have their scores (a trie
    search's) is marked scored without a scorer or a rewrite of its columns."""
    import types

    from triemine.mining import run
    from triemine.mining.columns import write_set

    rows = run._Rows(iter([(np.arange(3.0), np.arange(3.0) + 10), (np.arange(3.0, 8.0),
                                                                  np.arange(13.0, 18.0))]))
    got = [rows.take(n) for n in (2, 0, 4, 2)]
    assert [g[0].tolist() for g in got] == [[0, 1], [], [2, 3, 4, 5], [6, 7]]
    assert got[2][1].tolist() == [12, 13, 14, 15]
    rows.check_done("scores")
    with pytest.raises(RuntimeError, match="fewer computed rows"):
        run._Rows(iter([(np.zeros(2), np.zeros(2))])).take(3)
    extra = run._Rows(iter([(np.zeros(2), np.zeros(2)), (np.zeros(1), np.zeros(1))]))
    extra.take(2)
    with pytest.raises(RuntimeError, match="scores: more computed rows"):
        extra.check_done("scores")

    store = write_set(tmp_path / "c.cols", CandidateSet([0, 1], [1, 0], [1, 1], {
        "score": [-1.0, -2.0], "n_tokens": [3.0, 4.0]}), done=("candidates",))
    stamps = {p.name: p.stat().st_mtime_ns for p in store.dir.glob("*.npy")}
    job = types.SimpleNamespace(work=tmp_path, pool=None, progress=False)
    done = run._scores(job, store, model=None)  # no model: a scorer would fail
    assert done.done == ["candidates", "scores"]
    assert {p.name: p.stat().st_mtime_ns for p in store.dir.glob("*.npy")} == stamps
    assert not (tmp_path / "scores.todo.cols").exists()


def test_forced_scores_encode_the_pairs_lines_not_the_corpus_with_the_same_bits(tiny_model,
                                                                                monkeypatch):
    """A scoring shard encodes the distinct lines of its pairs and gives the scorer lists of
    those (a list of one slot a corpus line was 800 MB a side at 10^8 lines, in every shard);
    the scores are the bits of the scorer given the whole corpus's lists, the empty source
    (-1, the targets' priors) included."""
    from triemine.mining.features import forced_scores

    rng = np.random.default_rng(3)
    src_texts = [s for s, _ in PAIRS] * 4
    tgt_texts = [t for _, t in PAIRS] + OTHER
    s_idx = rng.integers(-1, len(src_texts), 40)
    t_idx = rng.integers(0, len(tgt_texts), 40)
    sc = ForcedScorer(tiny_model)
    whole_src = [tiny_model.encode_source(x) for x in src_texts] + [None]
    whole_tgt = [tiny_model.encode_target(t) for t in tgt_texts]
    want = np.concatenate([sc.score_pairs(whole_src, whole_tgt,
                                          np.where(s_idx[a:a + 16] >= 0, s_idx[a:a + 16],
                                                   len(src_texts)), t_idx[a:a + 16])
                           for a in range(0, 40, 16)])
    sizes = []
    real = ForcedScorer.score_pairs
    monkeypatch.setattr(ForcedScorer, "score_pairs", lambda self, srcs, tgts, *a, **k: (
        sizes.append((len(srcs), len(tgts))), real(self, srcs, tgts, *a, **k))[1])
    score, ntok = forced_scores(tiny_model, s_idx, t_idx, src_texts, tgt_texts, chunk=16)
    assert score.tobytes() == want.tobytes()
    assert ntok.tolist() == [len(whole_tgt[t]) for t in t_idx]
    distinct = (len(np.unique(s_idx[s_idx >= 0])) + 1, len(np.unique(t_idx)))
    assert sizes == [distinct] * 3 and distinct[0] < len(src_texts)


def test_pipeline_refuses_unknown_generators():
    with pytest.raises(InputError, match="unknown candidate generator"):
        job_options(candidates=("trie", "magic")).check()


@pytest.fixture(scope="module")
def reverse_model(tmp_path_factory):
    import torch

    from triemine.models.model_dir import load_model_dir
    from triemine.testing.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    return load_model_dir(build_tiny_model(tmp_path_factory.mktemp("rev"),
                                           reverse=True, updates=300))


def test_reverse_model_adds_dual_conditional_cross_entropy(tiny_model,
                                                           reverse_model, corpora, tmp_path):
    from triemine.mining.run import mine_pipeline

    src, tgt, pairs, targets = corpora
    cfg = job_options(candidates=("knn",), encoder="cipher", min_margin=None, per_source=4,
                         combination=combination_file(tmp_path, ("dual_ce",), (-1.0,)))
    out = tmp_path / "out.tsv"
    mine_pipeline(tiny_model, src, tgt, out, cfg, reverse_model=reverse_model)
    m = read_mined(out)
    src_lines = src.read_text(encoding="utf-8").split("\n")
    s_idx = np.array([int(i) - 1 for i in m.src_ids])
    t_idx = np.array([int(i) - 1 for i in m.tgt_ids])
    back = ForcedScorer(reverse_model).score_pairs(
        [reverse_model.encode_source(t) for t in targets],
        [reverse_model.encode_target(x) if x else None for x in src_lines], t_idx, s_idx)
    assert m.col("score_rev") == pytest.approx(back, abs=1e-3)
    fwd, bwd = m.col("ce_token"), m.col("ce_token_rev")
    assert m.col("dual_ce") == pytest.approx(np.abs(fwd - bwd) + (fwd + bwd) / 2, abs=1e-4)
    true = np.array([t == 24 + s for s, t in zip(s_idx, t_idx)])
    assert true.any() and (~true).any()
    assert m.col("dual_ce")[true].mean() < m.col("dual_ce")[~true].mean()


def test_cli_named_configurations(tiny_model_dir, corpora, tmp_path, capsys, monkeypatch):
    """``trie-mine --config mt-only`` runs the MT-only job with its shipped combination (priors
    included); a configuration whose combination needs a column the chosen generators cannot
    produce is refused before any work, with a clear error."""
    from triemine.cli import mine_main
    from triemine.judging.shipped import shipped

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    src, tgt, _, _ = corpora
    out = tmp_path / "mt.tsv"
    base = ["--model", str(tiny_model_dir), "--source", str(src), "--target", str(tgt), "-q"]
    assert mine_main(base + ["--config", "mt-only", "-o", str(out)]) == 0
    m = read_mined(out)
    assert len(m) > 0 and set(m.columns) >= {"prior", "pmi", "ret_margin", "combined"}
    assert (m.col("origin").astype(int) == 4).all()  # the retrieval generator only
    comb = shipped("mt-only")
    assert m.col("combined") == pytest.approx(comb({f: m.col(f) for f in comb.features}), abs=1e-4)
    capsys.readouterr()
    bad = tmp_path / "bad.tsv"
    assert mine_main(base + ["--encoder", "cipher", "-o", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "combination combined needs use_cos, use_margin" in err or "needs use_margin" in err
    assert not bad.exists() and not (tmp_path / "bad.tsv.work").exists()
    with pytest.raises(SystemExit) as exc:
        mine_main(base + ["--config", "paper", "--min-margin", "1", "-o", str(bad)])
    assert exc.value.code == 2
    assert "--min-margin needs the mining job" in capsys.readouterr().err
