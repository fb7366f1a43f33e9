"""The test tiers: every test has exactly one of the markers ``unit``, ``integration`` and
``cluster`` (``pyproject.toml`` registers them; ``make test-unit`` runs ``-m unit``).

* ``cluster``: starts processes (subprocesses, worker pools, Ray) or builds the wheel; marked
  explicitly, on the test or on its module (``pytestmark``).
* ``integration``: loads a model (the tiny one, the shared OPUS-MT one, Bicleaner's), trains or
  converts one; marked explicitly, or given by :func:`tier_of` to a test that uses a fixture of
  :data:`MODEL_FIXTURES` or carries a marker of :data:`MODEL_MARKERS`.
* ``unit``: everything else, pure Python on small inputs.

While a test runs, :func:`guard` makes what its tier excludes raise :class:`TierError` (a unit
test: starting a process, ``torch.load``; an integration test: starting a process), so a test in
the wrong tier fails loudly instead of slowing its tier down.

Used by ``tests/conftest.py`` (its collection hook and an autouse fixture)."""
from __future__ import annotations

import multiprocessing.process
import subprocess

TIERS = ("unit", "integration", "cluster")
MODEL_FIXTURES = ("tiny_model_dir", "tiny_model")
MODEL_MARKERS = ("shared_model", "bicleaner")


class TierError(RuntimeError):
    """A unit test started a process or loaded a model."""


def explicit_tiers(item) -> list:
    """The tier markers on ``item``, its class and its module, nearest first, without repeats."""
    out = []
    for mark in item.iter_markers():
        if mark.name in TIERS and mark.name not in out:
            out.append(mark.name)
    return out


def tier_of(item) -> str:
    """The nearest explicit tier marker; else ``integration`` for a test that uses a model
    fixture (directly or through another fixture) or a model marker; else ``unit``."""
    marked = explicit_tiers(item)
    if marked:
        return marked[0]
    if any(f in MODEL_FIXTURES for f in getattr(item, "fixturenames", ())) or \
            any(item.get_closest_marker(m) is not None for m in MODEL_MARKERS):
        return "integration"
    return "unit"


def assign(items) -> None:
    """Give every collected test the marker of its tier (:func:`tier_of`), before ``-m``
    selects; a test marked with two different tiers keeps both, which ``tests/test_tiers.py``
    reports."""
    import pytest

    for item in items:
        tier = tier_of(item)
        if tier not in explicit_tiers(item):
            item.add_marker(getattr(pytest.mark, tier))


def guard(monkeypatch, tier: str) -> None:
    """Make what ``tier`` excludes raise :class:`TierError` until ``monkeypatch`` is undone (the
    end of the test): starting a subprocess or a ``multiprocessing`` process (``unit`` and
    ``integration``), ``torch.load`` (``unit``); nothing for ``cluster``."""
    if tier == "cluster":
        return

    def refuse(what):
        def refused(*args, **kwargs):
            raise TierError(f"a{'n' if tier == 'integration' else ''} {tier} test {what}: mark "
                            f"it cluster (processes) or integration (models), see tests/tiers.py")
        return refused

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("started a subprocess"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start",
                        refuse("started a process"))
    if tier == "unit":
        import torch

        monkeypatch.setattr(torch, "load", refuse("loaded a model (torch.load)"))
