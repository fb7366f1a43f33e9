"""Keys read from the settings (triemine.config.settings.key_of,
triemine.distributed.stage.stage_key, triemine.io.keys): a new setting is in every key built from
its node, a transient one in none, an older key version is rebuilt once with a warning naming the
folder."""
import json
import warnings
from dataclasses import make_dataclass

import pytest

from triemine.config import settings
from triemine.decoding.driver import search_key
from triemine.decoding.settings import SearchSettings
from triemine.distributed.local import InlinePool
from triemine.distributed.shards import MANIFEST, Shard
from triemine.distributed.stage import EchoTask, Stage, run_stage
from triemine.io.keys import KEY_VERSION
from triemine.mining import run
from triemine.mining.options import MineOptions
from triemine.io.tsv import PROGRESS_SUFFIX, prepare_resume, write_progress


def _corpora(tmp_path):
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("a\n", encoding="utf-8")
    tgt.write_text("b\n", encoding="utf-8")
    return src, tgt


def test_a_new_setting_changes_the_key_and_a_transient_one_does_not(tmp_path, tiny_model):
    """Adding a field to a settings node (here a node made with one more field, as an edit of
    its class would) is all it takes for the stage's and the job's keys to hold it."""
    src, tgt = _corpora(tmp_path)
    node = make_dataclass("Search", [
        ("precision", str, settings.setting("fp32")),
        ("progress_every", int, settings.setting(1, transient=True))],
        bases=(SearchSettings,), frozen=True)
    base = search_key(tiny_model, node(), src, tgt, 1)
    assert base["precision"] == "fp32" and "progress_every" not in base
    assert search_key(tiny_model, node(precision="fp16"), src, tgt, 1) != base
    assert search_key(tiny_model, node(progress_every=9), src, tgt, 1) == base
    assert base["key_version"] == KEY_VERSION
    tree = make_dataclass("Tree", [
        ("precision", str, settings.setting("fp32")),
        ("threads", int, settings.setting(1, transient=True))], bases=(MineOptions,), frozen=True)
    job = run._settings_digest(tiny_model, src, tgt, tree())
    assert job["config"]["precision"] == "fp32" and "threads" not in job["config"]
    assert run._settings_digest(tiny_model, src, tgt, tree(precision="bf16")) != job
    assert run._settings_digest(tiny_model, src, tgt, tree(threads=8)) == job


def _echo(tmp_path, resume=True):
    return Stage("echo", tmp_path / "echo.shards", {"n": 3}, [Shard(i, i, i + 1) for i in range(3)],
                 lambda s: EchoTask(s.id, s.start, s.end), resume=resume, task=EchoTask)


def test_a_stage_key_names_its_task_and_version_and_an_older_folder_is_rebuilt_once(tmp_path):
    first = run_stage(_echo(tmp_path), InlinePool())
    assert first.computed == [0, 1, 2]
    key = first.store.key["settings"]
    assert key["task"] == "EchoTask" and key["key_version"] == KEY_VERSION and key["n"] == 3
    assert run_stage(_echo(tmp_path), InlinePool()).computed == []  # same key: reused
    # the folder as an older triemine wrote it: a key without a version
    manifest = tmp_path / "echo.shards" / MANIFEST
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    for name in ("key_version", "task"):
        del doc["key"]["settings"][name]
    doc.pop("manifest_crc32")
    from triemine.io.checksum import json_crc32
    manifest.write_text(json.dumps(dict(doc, manifest_crc32=json_crc32(doc))), encoding="utf-8")
    with pytest.warns(UserWarning, match=r"echo\.shards: shards of an older triemine \(key "
                                         rf"version 1, now {KEY_VERSION}\)"):
        again = run_stage(_echo(tmp_path), InlinePool())
    assert again.computed == [0, 1, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run_stage(_echo(tmp_path), InlinePool()).computed == []  # once


def test_an_older_progress_file_starts_the_search_over_with_a_warning(tmp_path):
    out = tmp_path / "o.tsv"
    out.write_bytes(b"h\nrow\n")
    write_progress(out, {"beam": 5}, 1, 6, 0)  # an older search's key: no version
    with pytest.warns(UserWarning, match=rf"o\.tsv{PROGRESS_SUFFIX}: the interrupted output of "
                                         "an older triemine"):
        assert prepare_resume(out, {"beam": 5, "key_version": KEY_VERSION}, "h") is None
