"""The settings only a judge or a second look reads are refused where the configuration has
none, a judge file is read before any work, and its columns are checked against the stages'
before any stage runs (no model needed: every refusal comes first)."""
import json
from pathlib import Path

import pytest

from triemine.config.configurations import configuration
from triemine.errors import InputError
from triemine.judging.model import SHIPPED
from triemine.mining.options import MineOptions
from triemine.mining.run import check_stages


@pytest.mark.parametrize("config,given,message", [
    ("combined", dict(judge=str(SHIPPED)), "--judge applies to a configuration with a learned"),
    ("combined", dict(density=0.3), "--density applies to a configuration with a learned"),
    ("mt-only", dict(density=0.3), "not --config mt-only"),
    ("mt-only", dict(second_look=True), "--second-look: --config mt-only has no second look"),
    ("judge", dict(judge="/no/such/judge.json"), "no such judge file"),
    ("judge", dict(density=1e-9), "--density must be >= 1e-06"),
])
def test_settings_no_stage_reads_are_refused(config, given, message):
    with pytest.raises(InputError, match=message):
        MineOptions.of(config, **given).check()


def test_a_judge_file_is_a_path_or_a_string():
    opts = MineOptions.of("judge", judge=Path(SHIPPED)).check()
    assert opts.scores.judge == str(SHIPPED)
    with pytest.raises(InputError, match="expected a file path"):
        MineOptions.of("judge", judge=123)


def test_a_judge_reading_a_column_the_job_does_not_write_is_refused_before_any_stage(tmp_path):
    data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    stages = configuration("judge").stages
    check_stages(stages, MineOptions.of("judge").check(), False)   # the shipped one reads them
    data["features"] = ["bicleaner"] + data["features"][1:]       # a column no stage writes
    path = tmp_path / "j.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    opts = MineOptions.of("judge", judge=str(path)).check()       # a judge file all the same
    with pytest.raises(InputError, match="reads bicleaner, which --config judge with "
                       "--candidates knn and --encoder use") as exc:
        check_stages(stages, opts, False)
    assert str(path) in str(exc.value)
