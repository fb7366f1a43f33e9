"""The judge's surfaces refuse bad input before any work: its file (every parameter of its
kind, finite values, features it can read), the settings only a judge reads, the training
command's settings, gold and outputs, and the cut every tool applies to a judge's TSV."""
import json
from pathlib import Path

import numpy as np
import pytest

from triemine.errors import InputError
from triemine.judging.model import SHIPPED, Judge, check_reads, judge_path, load_judge
from triemine.judging.train import feature_list, gold_labels


def _shipped() -> dict:
    return json.loads(SHIPPED.read_text(encoding="utf-8"))


@pytest.mark.parametrize("drop", ["bias", "mean", "std", "weights", "forest", "kind",
                                  "features", "train_prior", "version"])
def test_every_parameter_of_the_judges_kind_is_required(tmp_path, drop):
    data = _shipped()
    del data[drop]
    path = tmp_path / "j.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match="not a judge file") as exc:
        Judge.load(path)
    assert str(path) in str(exc.value)


def test_a_logistic_judge_needs_its_bias_and_a_trees_judge_only_its_forest(tmp_path):
    cols = {"a": np.arange(20.0), "b": np.arange(20.0) % 3}
    y = (np.arange(20) > 9).astype(int)
    judge = Judge.fit(cols, y, ("a", "b"))
    data = judge.as_dict()
    del data["bias"]
    with pytest.raises(InputError, match="a logistic judge needs bias"):
        Judge.of(data, "j.json")
    trees = dict(_shipped(), kind="trees", mean=[], std=[], weights=[], bias=0.0)
    assert Judge.of(trees, "t.json").kind == "trees"   # a trees judge has no linear part
    del trees["forest"]
    with pytest.raises(InputError, match="a trees judge needs forest"):
        Judge.of(trees, "t.json")


@pytest.mark.parametrize("features,message", [
    (["a", "a"], "named twice"), ([""], "list of column names"), ("ab", "list of column")])
def test_a_judges_features_are_distinct_column_names(features, message):
    data = dict(_shipped(), features=features)
    with pytest.raises(InputError, match=message):
        Judge.of(data, "j.json")


def test_a_folder_is_no_judge_file(tmp_path):
    with pytest.raises(InputError, match="is a folder"):
        Judge.load(tmp_path)
    with pytest.raises(InputError, match="no such judge file"):
        Judge.load(tmp_path / "none.json")


def test_a_judge_reading_its_own_outputs_or_missing_columns_is_refused_naming_the_file():
    judge = load_judge()
    have = set(judge.features)
    check_reads(judge, have, "j.json", "the job")
    with pytest.raises(InputError, match="reads use_margin, which the job does not write") as e:
        check_reads(judge, have - {"use_margin"}, "j.json", "the job")
    assert "j.json" in str(e.value)
    own = Judge(list(judge.features) + ["prob"], judge.train_prior, mean=[0.0] * 13,
                std=[1.0] * 13, weights=[0.0] * 13)
    with pytest.raises(InputError, match="prob, which the judge itself writes"):
        check_reads(own, have | {"prob"}, "j.json", "the job")
    assert judge_path() == str(SHIPPED) and Path(judge_path("x.json")).is_absolute()


@pytest.mark.parametrize("text,message", [
    (",", "no column named"), ("", "no column named"), ("a,a", "a named twice"),
    ("use_margin,prob,judge", "prob, judge: the judge's own output")])
def test_feature_lists_are_refused_before_training(text, message):
    with pytest.raises(ValueError, match=message):
        feature_list(text)
    assert feature_list(" a, b ,") == ["a", "b"]


class _Rows:
    src_ids = ["1", "2", "3"]
    tgt_ids = ["a", "b", "c"]


def test_gold_labels_say_when_no_gold_pair_is_a_candidate():
    assert gold_labels(_Rows(), [("1", "a"), ("9", "z")], "m.tsv", "g").tolist() == [1, 0, 0]
    with pytest.raises(InputError, match="2 match with its columns swapped") as exc:
        gold_labels(_Rows(), [("a", "1"), ("b", "2")], "m.tsv", "g.gold")
    assert "g.gold" in str(exc.value) and "m.tsv" in str(exc.value)
    with pytest.raises(InputError, match="none of its 1 gold pairs"):
        gold_labels(_Rows(), [("7", "q")], "m.tsv", "g.gold")


def _labelled_tsv(tmp_path):
    from triemine.io.tsv import write_rows

    rng = np.random.default_rng(0)
    n = 40
    y = np.arange(n) % 4 == 0
    cells = {"src_id": [str(i) for i in range(n)], "tgt_id": [f"e{i}" for i in range(n)],
             "score": [-1.0] * n, "ce_word": [1.0] * n, "ce_token": [1.0] * n,
             "a": (rng.normal(size=n) + 2 * y).tolist(), "b": rng.normal(size=n).tolist(),
             "src": ["甲"] * n, "tgt": ["x"] * n}
    mined = tmp_path / "m.tsv"
    write_rows(mined, list(cells), cells, meta={"pipeline": {}})
    gold = tmp_path / "m.gold"
    gold.write_text("".join(f"{i}\te{i}\n" for i in range(n) if y[i]))
    return mined, gold


@pytest.mark.parametrize("extra,message", [
    (["--c", "0"], "--c must be a finite number > 0"), (["--c", "-1"], "--c must be"),
    (["--features", ","], "--features: no column named"),
    (["--features", "a,prob,judge"], "the judge's own output"),
    (["--features", "a,zz"], "no column zz")])
def test_train_judge_refuses_bad_settings_in_one_line(tmp_path, capsys, extra, message):
    from triemine.cli import train_judge_main

    mined, gold = _labelled_tsv(tmp_path)
    with pytest.raises(SystemExit) as exc:
        train_judge_main([str(mined), "--gold", str(gold), "-o", str(tmp_path / "j.json"),
                          "--kind", "logistic", "--features", "a,b", *extra])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "j.json").exists()


def test_train_judge_never_writes_onto_an_input(tmp_path, capsys):
    from triemine.cli import train_judge_main

    mined, gold = _labelled_tsv(tmp_path)
    (tmp_path / "link.tsv").symlink_to(mined)
    before = {p: p.read_bytes() for p in (mined, gold, Path(str(mined) + ".meta.json"))}
    for out in (mined, gold, Path(str(mined) + ".meta.json"), tmp_path / "link.tsv"):
        rc = train_judge_main([str(mined), "--gold", str(gold), "-o", str(out),
                               "--kind", "logistic", "--features", "a,b"])
        assert rc == 2 and "must not be an input" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in before} == before
    assert train_judge_main([str(mined), "--gold", str(gold), "-o", str(tmp_path / "j.json"),
                             "--kind", "logistic", "--features", "a,b"]) == 0
    assert Judge.load(tmp_path / "j.json").features == ["a", "b"]
    swapped = tmp_path / "swapped.gold"
    swapped.write_text("".join(f"{t}\t{s}\n" for s, t in (
        line.split("\t") for line in gold.read_text().split("\n") if line)))
    rc = train_judge_main([str(mined), "--gold", str(swapped), "-o", str(tmp_path / "k.json"),
                           "--kind", "logistic", "--features", "a,b"])
    assert rc == 2 and "columns swapped" in capsys.readouterr().err
