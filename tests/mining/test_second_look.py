"""The second look (triemine.mining.second_look) on the tiny model: a source the encoder's kNN
gives no candidate gets its pair from the model's own translation, judged and kept as every
pair is; the first pass's kept pairs stay kept; the same bytes with 2 workers and after a job
killed inside the second look resumes."""
import dataclasses

import numpy as np
import pytest

from triemine.filtering.selection import choose
from triemine.io.tsv import read_mined
from triemine.mining.generators import REGISTRY

from helpers import combination_file, job_options, mine_args

BIT = REGISTRY["mt_knn"].bit
GIVEN = {"combined": 0.0}


def _kept(path):
    m = read_mined(str(path))
    rows = choose(m, given=GIVEN).keep(m)
    return m, {(m.src_ids[i], m.tgt_ids[i]) for i in rows}


def test_the_second_look_gives_a_source_without_knn_candidates_its_pair(tiny_model, corpora,
                                                                        tmp_path,
                                                                        monkeypatch):
    from triemine.mining.run import mine_pipeline
    from triemine.mining.second_look import second_look

    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache"))
    src, tgt, pairs, targets = corpora
    comb = combination_file(tmp_path)
    # a high margin floor: the kNN proposes few pairs, most sources get none
    cfg = job_options(candidates=("knn",), encoder="cipher", min_margin=1.6, combination=comb,
                      look_min_cos=0.0, second_look=True)
    first = tmp_path / "first.tsv"
    mine_pipeline(tiny_model, src, tgt, first, cfg)
    out = tmp_path / "look.tsv"
    summary = mine_pipeline(tiny_model, src, tgt, out, cfg,
                            after=lambda m: second_look(m, given=GIVEN))
    m0, kept0 = _kept(first)
    m, kept = _kept(out)
    assert kept0 < kept  # every pair kept before still kept, and more
    origin = m.col("origin").astype(int)
    with_knn = {m.src_ids[i] for i in np.flatnonzero(origin & REGISTRY["knn"].bit)}
    gold = {(str(pairs.index(p) + 1), str(targets.index(p[1]) + 1)) for p in pairs
            if p[1] in targets}
    found = [(s, t) for s, t in gold if s not in with_knn and (s, t) in kept]
    assert found  # a source the kNN proposed nothing for: its gold pair, kept
    at = {(s, t): i for i, (s, t) in enumerate(zip(m.src_ids, m.tgt_ids))}
    assert all(origin[at[p]] & BIT for p in found)
    # the first pass's rows are the TSV's, with their values (the second look only adds)
    for i, p in enumerate(zip(m0.src_ids, m0.tgt_ids)):
        assert m.col("combined")[at[p]] == pytest.approx(m0.col("combined")[i], abs=1e-6)
    look = summary["second_look"]
    assert look["new"] == len(m) - len(m0) > 0 and look["proposed"] >= look["new"]
    assert summary["kept_by_generator"]["mt_knn"] >= len(found)
    assert summary["by_generator"]["mt_knn"] == int((origin & BIT > 0).sum())
    assert m.meta["second_look"] == look
    assert {"look_translate", "look_scoring"} <= set(summary["stage_s"])
    # resumed under a threshold that keeps other first-pass pairs: the look is made again,
    # for that first pass, the same bytes as a fresh job with it on a fresh cache (the first
    # look's priors never entered the shared cache, so none of its bits are reused)
    none = {"combined": 1e9}
    again = mine_pipeline(tiny_model, src, tgt, out, cfg, resume=True,
                          after=lambda m: second_look(m, given=none))
    fresh = tmp_path / "fresh.tsv"
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "fresh-cache"))
    mine_pipeline(tiny_model, src, tgt, fresh, cfg, after=lambda m: second_look(m, given=none))
    assert out.read_bytes() == fresh.read_bytes()
    assert again["second_look"]["unpaired_sources"] > look["unpaired_sources"]
    # turned off: the first pass's TSV
    off = tmp_path / "off.tsv"
    mine_pipeline(tiny_model, src, tgt, off, dataclasses.replace(
        cfg, look=dataclasses.replace(cfg.look, second_look=False)),
        after=lambda m: second_look(m, given=GIVEN))
    assert off.read_bytes() == first.read_bytes()


@pytest.mark.cluster
def test_the_second_look_gives_the_same_bytes_with_two_workers_and_after_a_resume(
        tiny_model_dir, corpora, tmp_path, monkeypatch):
    from triemine.cli import mine_main
    from triemine.mining import second_look

    src, tgt, _, _ = corpora
    args = mine_args(tiny_model_dir, src, tgt, combination_file(tmp_path), "--min-margin",
                     "1.6", "--threshold", "combined=0", "--second-look")
    outs = {}
    for name, extra in (("one", []), ("two", ["--workers", "2"])):
        monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / f"cache-{name}"))
        outs[name] = tmp_path / f"{name}.tsv"
        assert mine_main(args + ["-o", str(outs[name]), "--bitext",
                                 str(tmp_path / f"{name}.pairs")] + extra) == 0
    assert read_mined(str(outs["one"])).col("origin").astype(int).max() & BIT
    assert outs["one"].read_bytes() == outs["two"].read_bytes()
    assert (tmp_path / "one.pairs").read_bytes() == (tmp_path / "two.pairs").read_bytes()
    assert (tmp_path / "two.tsv.work" / "look" / "scores.shards" / "manifest.json").is_file()
    # killed after the second look scored its pairs, before it united them: resumed, the same
    monkeypatch.setenv("TRIEMINE_CACHE", str(tmp_path / "cache-kill"))
    killed = tmp_path / "killed.tsv"
    unite = second_look.unite

    def kill(*_a, **_k):
        raise KeyboardInterrupt
    monkeypatch.setattr(second_look, "unite", kill)
    again = args + ["-o", str(killed), "--bitext", str(tmp_path / "killed.pairs")]
    assert mine_main(again) != 0  # "trie-mine: interrupted"
    assert not killed.exists()
    monkeypatch.setattr(second_look, "unite", unite)
    assert mine_main(again + ["--resume"]) == 0
    assert killed.read_bytes() == outs["one"].read_bytes()


def test_the_second_look_is_off_by_default_and_refused_for_the_trie_search_alone():
    from triemine.errors import InputError
    from triemine.mining.options import MineOptions

    assert not MineOptions.of("combined").look.second_look
    assert MineOptions.of("judge", second_look=True).look.second_look
    with pytest.raises(InputError, match="--second-look needs the mining job"):
        MineOptions.of("paper", candidates=("trie",), second_look=True)
