"""The judge (triemine.judging): its model's fit, file and fingerprint, the prior shift, and
the text features shared by mined candidates and given pairs."""
import json

import numpy as np
import pytest

from triemine.errors import InputError
from triemine.judging.features import MINED_FEATURES, text_features
from triemine.judging.model import SHIPPED, Judge, load_judge
from triemine.judging.prior import estimate_prior, shift_logit, sigmoid


def _synthetic(n: int, share: float, seed: int):
    """Two features; positives centred at (1, 1), negatives at (-1, -1); ``share`` positive."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < share).astype(int)
    x = rng.normal(size=(n, 2)) + np.where(y[:, None] > 0, 1.0, -1.0)
    return {"a": x[:, 0], "b": x[:, 1]}, y


def test_fit_separates_and_learns_the_prior():
    cols, y = _synthetic(4000, 0.3, 1)
    judge = Judge.fit(cols, y, ("a", "b"), fitted_on="synthetic")
    assert judge.weights[0] > 0 and judge.weights[1] > 0
    assert judge.train_prior == pytest.approx(y.mean())
    p = judge.prob(judge.logit(cols))
    assert abs(p.mean() - y.mean()) < 0.01           # calibrated in the large
    assert ((p >= 0.5) == y).mean() > 0.9
    test, ty = _synthetic(4000, 0.3, 2)              # and on fresh rows
    assert ((judge.prob(judge.logit(test)) >= 0.5) == ty).mean() > 0.9


def test_nan_feature_gives_nan_and_missing_column_is_named():
    cols, y = _synthetic(500, 0.5, 3)
    judge = Judge.fit(cols, y, ("a", "b"))
    cols["a"][0] = np.nan
    out = judge.logit(cols)
    assert np.isnan(out[0]) and np.isfinite(out[1:]).all()
    with pytest.raises(InputError, match="b"):
        judge.logit({"a": cols["a"]})


def test_fit_needs_both_classes():
    cols, _ = _synthetic(50, 0.5, 4)
    with pytest.raises(ValueError, match="both"):
        Judge.fit(cols, np.ones(50), ("a", "b"))


def test_save_load_fingerprint(tmp_path):
    cols, y = _synthetic(300, 0.4, 5)
    judge = Judge.fit(cols, y, ("a", "b"), fitted_on="x")
    path = tmp_path / "j.json"
    judge.save(path)
    back = Judge.load(path)
    assert back == judge and back.fingerprint() == judge.fingerprint()
    np.testing.assert_array_equal(back.logit(cols), judge.logit(cols))
    other = Judge.fit(cols, 1 - y, ("a", "b"))
    assert other.fingerprint() != judge.fingerprint()


@pytest.mark.parametrize("text,problem", [("[1]", "judge"), ('{"version": 1}', "judge"),
                                          ("{", "JSON")])
def test_bad_judge_file_is_one_clear_error(tmp_path, text, problem):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=problem):
        Judge.load(path)
    with pytest.raises(InputError, match="no such"):
        Judge.load(tmp_path / "absent.json")


def test_shipped_judge_is_small_and_reads_the_mined_features():
    assert SHIPPED.stat().st_size <= 5 << 20
    judge = load_judge()
    assert set(judge.features) <= set(MINED_FEATURES) | {"uncovered"}
    assert json.loads(SHIPPED.read_text())["version"] == judge.version


def test_shift_is_monotone_and_identity_at_the_training_prior():
    z = np.linspace(-6, 6, 50)
    np.testing.assert_allclose(shift_logit(z, 0.2, 0.2), z)
    low = sigmoid(shift_logit(z, 0.2, 0.01))
    assert (np.diff(low) > 0).all() and (low < sigmoid(z)).all()
    # the odds move by the ratio of the prior odds
    np.testing.assert_allclose(low / (1 - low), sigmoid(z) / (1 - sigmoid(z)) * (0.01 / 0.99)
                               / (0.2 / 0.8), rtol=1e-9)


@pytest.mark.parametrize("share", [0.02, 0.1, 0.5])
def test_em_recovers_a_shifted_share(share):
    train, ty = _synthetic(20000, 0.3, 6)
    judge = Judge.fit(train, ty, ("a", "b"))
    run, ry = _synthetic(20000, share, 7)
    est = estimate_prior(judge.logit(run), judge.train_prior)
    assert abs(est - ry.mean()) < 0.02
    p = judge.prob(judge.logit(run), "estimate")
    assert abs(p.mean() - ry.mean()) < 0.02


def test_text_features_are_the_given_pairs_columns():
    src, tgt = ["三千五百万人。", "你好"], ["35 million people.", "Hello there, 2019"]
    cols = text_features(src, tgt)
    assert set(cols) == {"src_chars", "tgt_chars", "len_ratio", "number_match"}
    assert cols["number_match"][0] == 1.0 and cols["number_match"][1] == 0.0
    np.testing.assert_allclose(cols["len_ratio"], np.log((np.array([18, 17]) + 1)
                                                         / (np.array([7, 2]) + 1)))
    with pytest.raises(ValueError):
        text_features(src, tgt[:1])


def test_train_judge_command_fits_on_a_users_mined_tsv(tmp_path, capsys):
    """trie-mine-train-judge: a mining TSV and its gold pairs -> a judge file that separates
    them; a TSV without a feature the judge reads is one clear error (exit 2)."""
    from triemine.cli.train_judge import train_judge_main
    from triemine.io import Mined, write_mined

    rng = np.random.default_rng(8)
    n = 400
    y = np.arange(n) % 4 == 0
    cols = {f: rng.normal(size=n) + 2.0 * y for f in MINED_FEATURES
            if f not in ("len_ratio", "number_match")}
    cols.update(score=-rng.random(n), ce_word=rng.random(n), ce_token=cols["ce_token"] - 4 * y)
    src = [f"第{i}句。" for i in range(n)]
    tgt = [f"Sentence {i}." for i in range(n)]
    m = Mined.from_columns([f"zh-{i}" for i in range(n)], [f"en-{i}" for i in range(n)], src,
                           tgt, cols)
    write_mined(m, tmp_path / "m.tsv")
    (tmp_path / "gold").write_text("".join(f"zh-{i}\ten-{i}\n" for i in np.flatnonzero(y)))
    out = tmp_path / "j.json"
    assert train_judge_main([str(tmp_path / "m.tsv"), "--gold", str(tmp_path / "gold"),
                             "-o", str(out)]) == 0
    judge = Judge.load(out)
    back = read_tsv_columns(tmp_path / "m.tsv")
    assert judge.kind == "blend"  # the shipped judge's kind
    capsys.readouterr()
    assert ((judge.prob(judge.logit(back)) >= 0.5) == y).mean() > 0.95
    assert judge.features == list(MINED_FEATURES)
    for kind in ("trees", "logistic"):
        assert train_judge_main([str(tmp_path / "m.tsv"), "--gold", str(tmp_path / "gold"),
                                 "-o", str(out), "--kind", kind]) == 0
        judge = Judge.load(out)
        assert judge.kind == kind and json.loads(capsys.readouterr().out)["kind"] == kind
        assert ((judge.prob(judge.logit(back)) >= 0.5) == y).mean() > 0.95
    with pytest.raises(SystemExit) as exc:
        train_judge_main([str(tmp_path / "m.tsv"), "--gold", str(tmp_path / "gold"), "-o",
                          str(out), "--features", "use_margin,bogus"])
    assert exc.value.code == 2 and "bogus" in capsys.readouterr().err
    # a TSV mined without coverage lacks the exact pass's judge rows: the error says how to get them
    write_mined(Mined.from_columns(m.src_ids, m.tgt_ids, src, tgt, {
        f: v for f, v in cols.items() if f not in ("eos_lp", "tok_min_lp")}), tmp_path / "c.tsv")
    with pytest.raises(SystemExit) as exc:
        train_judge_main([str(tmp_path / "c.tsv"), "--gold", str(tmp_path / "gold"), "-o",
                          str(out)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "eos_lp, tok_min_lp" in err and "--config judge" in err


def read_tsv_columns(path):
    from triemine.io import read_mined
    from triemine.judging.train import mined_columns

    return mined_columns(read_mined(path))


def test_a_weight_of_two_is_a_row_twice():
    cols, y = _synthetic(300, 0.4, 9)
    w = np.where(np.arange(300) % 3 == 0, 2.0, 1.0)
    twice = np.flatnonzero(w == 2.0)
    dup = {f: np.concatenate([v, v[twice]]) for f, v in cols.items()}
    a = Judge.fit(cols, y, ("a", "b"), sample_weight=w)
    b = Judge.fit(dup, np.concatenate([y, y[twice]]), ("a", "b"))
    np.testing.assert_allclose(a.weights, b.weights, rtol=1e-6)
    assert a.train_prior == pytest.approx(b.train_prior)
