"""The job's settings tree: everything ``trie-mine`` and :func:`triemine.mine` can be told.

:class:`MineOptions` nests one node per part of the job (:class:`SearchSettings` of the trie
search, :class:`NeighbourSettings` and :class:`RetrievalSettings` of the candidate generators,
:class:`ScoreSettings`, :class:`PoolSettings`); each setting is one field, declared once with its
default, help, range and flag (:mod:`triemine.config.settings`), and no field name occurs twice, so
a
setting is named by its field name alone (``beam``, ``workers``).  ``trie-mine``'s flags are
built from the fields; the keys are derived from the tree: every setting not declared
``transient`` (:func:`triemine.config.settings.key_of`).

:meth:`MineOptions.of` is how a tree is made: the named configuration's record
(:mod:`triemine.config.configurations`: its generators and settings) over the declared defaults, the
user's settings over both.  The paper's trie search (``candidates == ("trie",)``) takes the
``paper`` record's settings whatever ``config`` names.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, Mapping, Optional, Tuple

from triemine.config.configurations import DEFAULT, NAMES, PAPER, configuration
from triemine.models.model_dir import check_device, spm_problem
from triemine.decoding.settings import DEFAULT_SHARD_SOURCES, PAPER_BEAM, SearchSettings
from triemine.distributed.settings import PoolSettings
from triemine.errors import InputError
from triemine.judging.model import load_judge
from triemine.judging.shipped import judge_only, learned, shipped_combination_fields
from triemine.mining.features import MIN_SCORE_CHUNK, SCORE_CHUNK
from triemine.mining.generators import REGISTRY
from triemine.scoring.precision import AUTO, DEFAULT as DEFAULT_PRECISION, PRECISIONS, \
    check_precision, resolve_precision
from triemine.mining.settings import (DedupSettings, LookSettings, NeighbourSettings,
                                      RetrievalSettings, ScoreSettings)
from triemine.config.settings import (check_value, flag_of, setting, setting_field,
                                      with_also, with_values)

GENERATORS = tuple(REGISTRY)
# the settings that apply only to the paper's trie search, and only to the mining job
PAPER_ONLY = ("nbest", "debug", "trie", "max_tokens")
JOB_ONLY = ("reverse_model", "min_margin", "knn_index", "combination", "second_look")


def _generator_list(text: str) -> Tuple[str, ...]:
    return tuple(c.strip() for c in text.split(",") if c.strip())


@dataclass(frozen=True)
class MineOptions:
    """The settings tree of one job (module docstring).  Make one with :meth:`of`;
    :meth:`check` refuses combinations that do not apply."""

    config: str = setting(DEFAULT, "{config_help}", flag="--config", choices=lambda: NAMES)
    candidates: Tuple[str, ...] = setting(
        ("knn",), "comma-separated generators among {generators} (default: the configuration's; "
        "'trie' alone is --config paper)", flag="--candidates", parse=_generator_list)
    search: SearchSettings = field(default_factory=SearchSettings)
    neighbours: NeighbourSettings = field(default_factory=NeighbourSettings)
    reverse_model: Optional[str] = setting(
        None, "a model of the other direction (target -> source): adds log P(x|y) and the dual "
        "conditional cross-entropy dual_ce (mining job only)", flag="--reverse-model",
        metavar="DIR", path=True)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    scores: ScoreSettings = field(default_factory=ScoreSettings)
    duplicates: DedupSettings = field(default_factory=DedupSettings)
    look: LookSettings = field(default_factory=LookSettings)
    device: str = setting("cpu", "cpu or cuda (default cpu)", flag="--device")
    precision: str = setting(
        DEFAULT_PRECISION, "arithmetic of the model's encoder and decoder for the exact scores: "
        "auto (default: bf16 where the CPU has a bf16 matrix unit, amx_bf16 or avx512_bf16, else "
        "fp32; fp32 on a GPU, for the trie search and for --config combined; the job's key and "
        "record name the one chosen), fp32, bf16 (on the CPU: the output projection in bf16 "
        "tiles), fp16 (GPU only); log-sum-exps and sums stay float32", flag="--precision",
        choices=lambda: PRECISIONS + (AUTO,))
    target_spm: Optional[str] = setting(
        None, "target sentencepiece model when the model directory has none", flag="--target-spm",
        kind=spm_problem)
    trie: Optional[str] = setting(None, "prebuilt trie (trie-build) instead of the cache",
                                  flag="--trie", path=True)
    debug: bool = setting(False, "verify every hypothesis's trie node against a walk from the "
                          "root", flag="--debug", const=True, transient=True)
    pool: PoolSettings = field(default_factory=PoolSettings)

    @classmethod
    def of(cls, config: str = DEFAULT, **given: Any) -> "MineOptions":
        """The tree of configuration ``config`` with the settings ``given`` by field name (a
        value ``None`` is not given: the configuration's); an :class:`InputError` for an
        unknown configuration or setting, a value of the wrong type or out of range, or a
        setting that does not apply to the configuration."""
        given = with_also(cls, {k: v for k, v in given.items() if v is not None})
        record = configuration(config)
        if "candidates" in given:
            given["candidates"] = check_value(setting_field(cls, "candidates"),
                                              given["candidates"])
        generators = tuple(given.get("candidates", record.generators))
        if config == PAPER and generators != ("trie",):
            raise InputError("--config paper is the trie search alone (--candidates trie)")
        effective = configuration(PAPER) if generators == ("trie",) else record
        _check_applies(generators == ("trie",), given)
        values: Dict[str, Any] = dict(effective.settings, config=config, candidates=generators)
        # resolved here: keys and records name the one run
        given["precision"] = resolve_precision(
            given.get("precision", values.get("precision", DEFAULT_PRECISION)),
            given.get("device", values.get("device", "cpu")), trie_search="trie" in generators)
        if shipped_combination_fields(effective.name) is not None:
            values["combination"] = effective.name
        return with_values(cls(), {**values, **given})

    def __post_init__(self):
        # ``auto`` never outlives construction: keys and records name the arithmetic run
        if self.precision == AUTO:
            object.__setattr__(self, "precision", resolve_precision(
                AUTO, self.device, trie_search="trie" in self.candidates))

    @property
    def paper(self) -> bool:
        """The plain trie search (the paper's configuration), not the mining job."""
        return self.candidates == ("trie",)

    @property
    def sharded(self) -> bool:
        return self.pool.sharded

    def check(self) -> "MineOptions":
        """An :class:`InputError` for options that do not apply together, and for a ``device``
        this machine does not have (before any model loads)."""
        bad = [c for c in self.candidates if c not in GENERATORS]
        if bad or not self.candidates:
            raise InputError(f"unknown candidate generator(s) {', '.join(bad) or '(none)'} "
                             f"(choose from {', '.join(GENERATORS)})")
        if self.search.mode not in ("pre", "post"):
            raise InputError(f"mode must be pre or post, got {self.search.mode!r}")
        if self.search.prior_weight and self.search.mode != "pre":
            raise InputError("--prior-weight ranks trie children: it needs --pre-expansion")
        s = self.search
        _check_applies(self.paper, {"nbest": s.nbest, "debug": self.debug or None,
                                    "trie": self.trie, "max_tokens": s.max_tokens,
                                    "reverse_model": self.reverse_model})
        d = self.duplicates
        if self.paper and d.dedup:
            raise InputError("deduplication applies to the mining job (--config paper mines every "
                             "line)")
        if not d.dedup and (d.every_pair or d.dedup_case or d.dedup_punct):
            raise InputError("--every-pair, --dedup-case and --dedup-punct need deduplication "
                             "(not with --no-dedup or --config paper)")
        trie_search = "trie" in self.candidates
        if s.target_shards > 1 and not trie_search:
            raise InputError("--target-shards applies to the trie search (--config paper or "
                             "--candidates with trie)")
        if s.shard_sources is not None and not (trie_search and (self.sharded or
                                                                 s.target_shards > 1)):
            raise InputError("--shard-size applies to a sharded trie search (--workers, --ray or "
                             "--target-shards with --config paper or --candidates with trie)")
        if s.target_shards > 1 and self.trie is not None:
            raise InputError("--target-shards builds a trie per target range: not with --trie")
        if self.sharded and self.debug:
            raise InputError("--debug checks the search in this process: not with --workers/--ray")
        if self.pool.ray is not None and self.device.startswith("cuda:"):
            raise InputError(f"--device {self.device} with --ray: Ray gives each actor one GPU of "
                             "its own (as cuda); pass --device cuda")
        check_device(self.device, local=self.pool.ray is None)
        check_precision(self.precision, self.device)
        self._check_judge_settings()
        if self.precision != "fp32" and trie_search:
            raise InputError(f"--precision {self.precision} applies to the exact scores and "
                             "priors; the trie search computes in fp32 (not with --config paper "
                             "or --candidates with trie)")
        return self

    def _check_judge_settings(self) -> None:
        """Refuse the settings only a judge or a second look reads (``--judge``,
        ``--density``, ``--second-look``) with a configuration that has none (they would be
        ignored), and a judge file that is not one (its columns are checked with the stages',
        :func:`triemine.mining.finish.check_judge`)."""
        record = configuration(PAPER if self.paper else self.config)
        sc = self.scores
        for name, value in (("judge", sc.judge), ("density", sc.density)):
            if value is not None and not learned(record.name):
                raise judge_only(flag_of(setting_field(MineOptions, name)), self.config)
        if learned(record.name):
            load_judge(sc.judge)  # a missing or broken judge file, named, before any import
        if self.look.second_look and "second_look" not in record.stages:
            looks = [n for n in NAMES if "second_look" in configuration(n).stages]
            raise InputError(f"--second-look: --config {self.config} has no second look "
                             f"(configurations with one: {', '.join(looks)})")

    def job_search(self) -> SearchSettings:
        """The trie search as the mining job's trie generator runs it: every match with its
        token counts and corpus lines, no prior columns of its own."""
        return replace(self.search, nbest=None, max_tokens=None, with_prior=False,
                       token_counts=True, line_numbers=True)


def _check_applies(paper: bool, given: Mapping[str, Any]) -> None:
    """Refuse settings of the other kind of job (``given``: by field name, ``None``: not
    given)."""
    names = JOB_ONLY if paper else PAPER_ONLY
    for name in names:
        if given.get(name) is None:
            continue
        flag = flag_of(setting_field(MineOptions, name)) or f"--{name.replace('_', '-')}"
        if paper:
            raise InputError(f"{flag} needs the mining job (not --config paper / "
                             "--candidates trie alone)")
        raise InputError(f"{flag} applies to --candidates trie only")


def flag_help_values(opts: Optional[MineOptions] = None) -> Dict[str, Any]:
    """The values ``trie-mine``'s help templates name (defaults of the configurations)."""
    job = opts or MineOptions.of("combined")
    helps = "; ".join(f"{n}{' (default)' if n == DEFAULT else ''}: {configuration(n).help}"
                      for n in NAMES)
    return {"config_help": helps, "generators": ", ".join(GENERATORS), "paper_beam": PAPER_BEAM,
            "job_beam": job.search.beam, "sort_window": job.search.sort_window,
            "encoder": job.neighbours.encoder, "min_margin": job.neighbours.min_margin,
            "shard_sources": DEFAULT_SHARD_SOURCES, "score_chunk": SCORE_CHUNK,
            "min_score_chunk": MIN_SCORE_CHUNK}
