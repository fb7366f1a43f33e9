"""The settings tree (triemine.config.settings, triemine.mining.options), the configurations'
records."""
import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Optional

import pytest

from triemine.config import settings
from triemine.cli.mine import _mine_parser
from triemine.config.configurations import NAMES, PAPER, configuration
from triemine.errors import InputError
from triemine.filtering import registry
from triemine.filtering.selection import SELECTION, shipped_default
from triemine.judging.shipped import configuration_judge, shipped, shipped_combination_fields
from triemine.mining.generators import REGISTRY
from triemine.mining.options import MineOptions

# every option trie-mine had before its flags were generated from the tree, with the same names
FLAGS = {"-h", "--help", "--model", "--source", "--target", "-o", "--output", "--config",
         "--candidates", "--pre-expansion", "--post-expansion", "--beam", "--prior-weight",
         "--priors",
         "--encoder", "--knn-index", "--min-margin", "--reverse-model", "--combination",
         "--batch-size", "--sort-window", "--max-tokens", "--max-length", "--nbest", "--device",
         "--target-spm", "--trie", "--trie-nbest", "--resume", "--debug", "--workers", "--ray",
         "--target-shards", "--shard-size", "--bitext", "--threshold", "--thresholds", "-q",
         "--quiet"}


def _nodes(tree_type):
    yield tree_type
    for f in fields(tree_type):
        if f.default_factory is not None and is_dataclass(f.default_factory):
            yield from _nodes(f.default_factory)


def test_no_setting_is_declared_twice_in_the_tree():
    names = [f.name for node in _nodes(MineOptions) for f in fields(node)
             if not is_dataclass(getattr(f, "default_factory", None))]
    assert len(names) == len(set(names)) == len(settings.paths(MineOptions))

    @dataclass(frozen=True)
    class Inner:
        beam: int = settings.setting(1)

    @dataclass(frozen=True)
    class Outer:
        beam: int = settings.setting(2)
        inner: Inner = field(default_factory=Inner)

    with pytest.raises(TypeError, match="'beam' declared twice"):
        settings.paths(Outer)


def test_the_flags_are_the_fields_and_keep_their_names():
    parser = _mine_parser()
    flags = {s for a in parser._actions for s in a.option_strings}
    assert FLAGS <= flags  # none gone or renamed (new ones may come)
    for _, f in settings.leaves(MineOptions):  # every flag of the tree reaches its own field
        flag = settings.flag_of(f)
        if flag:
            dest = next(a.dest for a in parser._actions if flag in a.option_strings)
            assert dest == f.name


def test_a_configuration_gives_its_settings_and_the_user_overrides_them():
    combined, paper, mt = (MineOptions.of(n) for n in ("combined", PAPER, "mt-only"))
    assert (combined.search.beam, paper.search.beam, mt.search.beam) == (5, 90, 5)
    assert (combined.candidates, paper.candidates, mt.candidates) == (("knn",), ("trie",),
                                                                      ("retrieval",))
    assert (combined.scores.combination, paper.scores.combination) == ("combined", None)
    assert (mt.retrieval.translate_beam, mt.retrieval.retrieval_min_margin) == (1, 1.02)
    # the trie search alone takes the paper's settings whatever --config names
    assert MineOptions.of("combined", candidates=["trie"]).search.beam == 90
    told = MineOptions.of("mt-only", beam=7, min_margin=1.1, workers=2)
    assert told.search.beam == 7 and told.pool.workers == 2
    # --min-margin is both generators' floor, over the configuration's own
    assert told.neighbours.min_margin == told.retrieval.retrieval_min_margin == 1.1
    assert MineOptions.of("combined", beam=None) == combined  # None: the configuration's


@pytest.mark.parametrize("given, message", [
    ({"beam": 0}, "--beam must be >= 1"),
    ({"max_length": 1}, "--max-length must be >= 2 (one piece and EOS)"),
    ({"beam": "5"}, "option beam: '5' is not a valid value (expected an integer)"),
    ({"prior_weight": float("nan")}, "expected a finite number"),
    ({"workers": True}, "expected an integer"),
    ({"magic": 1}, "unknown option"),
    ({"nbest": 3}, "--nbest applies to --candidates trie only"),
])
def test_bad_settings_are_refused_naming_the_flag(given, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        MineOptions.of("combined", **given).check()


def test_paper_refuses_the_mining_jobs_settings_even_at_their_default_value():
    with pytest.raises(InputError, match="--min-margin needs the mining job"):
        MineOptions.of(PAPER, min_margin=1.02)
    with pytest.raises(InputError, match="--config paper is the trie search alone"):
        MineOptions.of(PAPER, candidates=("knn",))


def test_the_cli_builds_the_same_tree_as_the_api():
    parser = _mine_parser()
    args = parser.parse_args(["--model", "m", "--source", "s", "--target", "t", "-o", "o",
                              "--config", "mt-only", "--post-expansion", "--min-margin", "1.1",
                              "--workers", "2", "--ray", "--candidates", "retrieval,trie"])
    given = settings.given(args, MineOptions)
    assert given == {"config": "mt-only", "mode": "post", "min_margin": 1.1, "workers": 2,
                     "ray": "local", "candidates": ("retrieval", "trie")}
    cli = MineOptions.of(given.pop("config"), **given)
    assert cli == MineOptions.of("mt-only", mode="post", min_margin=1.1, workers=2, ray="local",
                                 candidates=["retrieval", "trie"])


def test_the_jobs_key_is_every_setting_but_the_transient_ones():
    """The job's key and its TSV's ``pipeline`` record: the tree's settings by name, without
    threads of execution (workers, Ray) or checks that change no output (debug, shard size)."""
    key = settings.key_of(MineOptions.of("combined", workers=2, ray="local", shard_sources=9))
    assert key == settings.key_of(MineOptions.of("combined"))
    assert settings.key_of(MineOptions.of(PAPER, debug=True)) == \
        settings.key_of(MineOptions.of(PAPER))
    assert not {"workers", "ray", "debug", "shard_sources"} & set(key)
    assert key["candidates"] == ["knn"] and key["beam"] == 5 and key["combination"] == "combined"
    assert json.loads(json.dumps(key)) == key
    other = settings.key_of(MineOptions.of("mt-only", knn_index="ivf"))
    assert other["knn_index"] == "ivf" and other["translate_beam"] == 1


def test_with_values_replaces_nested_settings_and_keeps_none():
    base = MineOptions.of("combined")
    new = settings.with_values(base, {"min_margin": None, "sort_window": 3, "device": "cpu:0"})
    assert new.neighbours.min_margin is None and new.retrieval.retrieval_min_margin is None
    assert (new.search.sort_window, new.device, new.search.beam) == (3, "cpu:0", 5)
    assert base.search.sort_window == 8  # frozen: a new tree
    with pytest.raises(InputError, match="unknown option"):
        settings.with_values(base, {"sortwindow": 3})


@pytest.mark.parametrize("name", NAMES)
def test_each_configuration_is_one_complete_record(name):
    record = configuration(name)
    assert record.name == name and set(record.generators) <= set(REGISTRY)
    assert record.selection.rule in registry.RULES
    assert SELECTION[name] == record.selection.as_tuple()
    assert set(record.settings) <= set(settings.paths(MineOptions))
    saved = shipped_default(name)
    assert (saved.rule, saved.rank_by, saved.filter) == record.selection.as_tuple()
    comb = shipped_combination_fields(name)
    assert (configuration_judge(name) is None) == record.paper  # one judge, but the paper's
    if comb is None:
        assert record.paper
    else:  # its threshold belongs to its own combination
        assert saved.combination == comb == asdict(shipped(name))


def test_an_unknown_configuration_names_the_known_ones():
    with pytest.raises(InputError,
                       match="unknown configuration .fast.*combined, judge, mt-only, paper"):
        MineOptions.of("fast")


def test_an_optional_field_type_is_read_from_its_annotation():
    @dataclass(frozen=True)
    class Node:
        size: Optional[int] = settings.setting(None, low=1)

    f = fields(Node)[0]
    assert settings.check_value(f, None) is None and settings.check_value(f, 3) == 3
    with pytest.raises(InputError, match="size must be >= 1"):
        settings.check_value(f, 0)
