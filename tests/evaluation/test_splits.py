"""The shared data's split into text the benchmarks measure on and text a judge may be fitted on
(triemine.evaluation.splits), checked on the shared data itself."""
from __future__ import annotations

from triemine.evaluation import splits
from triemine.io import DEVSET_ZH_EN, shared_path


def test_the_draws_are_disjoint_seeded_and_outside_the_transfer_set():
    clean, density = splits.clean_bench_draw(), splits.density_bench_draw()
    assert len(clean) == len(density) == splits.DRAW
    assert not set(clean.tolist()) & set(density.tolist())
    en, dev = splits.de_en_english(), splits.transfer_english()
    assert not any(en[i].strip() in dev for i in density.tolist())
    assert (splits.clean_bench_draw() == clean).all()  # the same lines on every call


def test_no_training_english_is_measured_on():
    reserved = splits.reserved_english()
    train = splits.training_english()
    texts = [t for _, t in train]
    assert len(set(texts)) == len(texts) and all(texts)
    assert not set(texts) & reserved
    en = splits.de_en_english()
    assert all(en[i].strip() == t for i, t in train[:1000])
    # every de-en English text is either reserved or offered for training
    assert {t.strip() for t in en if t.strip()} <= reserved | set(texts)


def test_every_transfer_set_source_has_its_reference():
    refs = splits.zh_en_references()
    lines = shared_path(*DEVSET_ZH_EN, "zh-en.dev.zh").read_text(encoding="utf-8").splitlines()
    zh = [line.split("\t", 1)[1].strip() for line in lines]
    assert sum(t in refs for t in zh) == len(zh)
