"""The trie search's shard task and the worker resources it needs.

:class:`TrieShardTask` (a task of :mod:`triemine.distributed.tasks`, made by
:func:`triemine.decoding.driver.mine_to_tsv` given a pool): the trie search of sources
``[start, end)`` (a range that starts and ends on block boundaries of the single-process plan)
with the driver's :class:`~triemine.decoding.settings.SearchSettings`, against one trie or, with
target shards, against several tries whose matches are merged by score
(:func:`merge_matches`: the beam ``B`` best per source); payload: the mining-TSV rows.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from triemine.decoding.matches import match_rows, rank_key
from triemine.decoding.model_spec import ModelSpec
from triemine.decoding.runner import long_targets, mine_batches, source_lengths
from triemine.decoding.settings import SearchSettings
from triemine.distributed.tasks import Corpus, WorkerContext
from triemine.scoring.prior import get_node_priors
from triemine.trie import Trie


@dataclass(frozen=True)
class TrieFile:
    """A trie file, memory-mapped (its pages shared by every process of the node)."""

    path: str

    def load(self, ctx: WorkerContext):
        return Trie.load(self.path, verify=False)


@dataclass(frozen=True)
class NodePriors:
    """The node priors of a trie file under a model (:func:`triemine.scoring.prior.get_node_priors`:
    the file the driver wrote beside the trie)."""

    model: ModelSpec
    trie: str

    def load(self, ctx: WorkerContext):
        return get_node_priors(ctx.get(self.model), ctx.get(TrieFile(self.trie)))


@dataclass(frozen=True)
class LongTargets:
    """The mask of the target corpus's lines over ``max_length`` tokens
    (:func:`~triemine.decoding.runner.long_targets`): the whole corpus tokenised once per worker,
    not per shard."""

    model: ModelSpec
    target: str
    max_length: int

    def load(self, ctx: WorkerContext):
        return long_targets(ctx.get(self.model), ctx.get(Corpus(self.target)).texts,
                            self.max_length)


@dataclass(frozen=True)
class TrieShardTask:
    shard: int
    model: ModelSpec
    source: str
    target: str
    start: int
    end: int
    tries: Tuple[Tuple[str, int], ...]   # (trie file, target line offset) per target shard
    search: SearchSettings               # the driver's settings, as they are
    debug: bool = False                  # check every hypothesis's node (no effect on the rows)

    def needs(self) -> list:
        needs = [self.model, Corpus(self.source), Corpus(self.target)]
        for trie_path, _ in self.tries:
            needs.append(TrieFile(trie_path))
            if self.search.priors:
                needs.append(NodePriors(self.model, trie_path))
        return needs

    def run(self, ctx: WorkerContext) -> Tuple[bytes, dict]:
        model = ctx.get(self.model)
        src, tgt = ctx.get(Corpus(self.source)), ctx.get(Corpus(self.target))
        search = self.search
        a, b = self.start, self.end
        texts = src.texts[a:b]
        with warnings.catch_warnings():  # the driver already warned about skipped sources
            warnings.simplefilter("ignore")
            lengths, _ = source_lengths(model, texts, max_length=search.max_length)
        skip_tgt = (ctx.get(LongTargets(self.model, self.target, search.max_length))
                    if search.max_length else None)
        # several tries: every match of each, merged below before the nbest cut
        per_trie_search = replace(search, nbest=None) if len(self.tries) > 1 else search
        per_trie = []
        for trie_path, offset in self.tries:
            trie = ctx.get(TrieFile(trie_path))
            node_prior: Optional[object] = (ctx.get(NodePriors(self.model, trie_path))
                                            if search.priors else None)
            results: List[List] = []
            for _, _, batch in mine_batches(model, texts, trie, per_trie_search,
                                            device=self.model.device, debug=self.debug,
                                            lengths=lengths, node_prior=node_prior):
                if offset:
                    batch = [[replace(m, tgt_line_ids=tuple(i + offset for i in m.tgt_line_ids))
                              for m in ms] for ms in batch]
                results.extend(batch)
            per_trie.append(results)
        if len(per_trie) == 1:
            results = per_trie[0]
        else:
            results = [merge_matches([r[i] for r in per_trie], search.beam,
                                     search.prior_weight)[:search.nbest or None]
                       for i in range(len(texts))]
        flat = [m for ms in results for m in ms]
        text = match_rows(flat, search.columns, src.ids[a:b], texts, tgt.ids, tgt.texts,
                          skip_tgt, first_source=a)
        return text.encode("utf-8"), {"rows": text.count("\n"),
                                      "with_matches": sum(1 for ms in results if ms),
                                      "sources": b - a}


def merge_matches(per_trie: Sequence[List], beam: int, prior_weight: float = 0.0) -> List:
    """One source's matches from several tries (line ids already global), merged as one trie's
    search would rank them: the same target text found in two tries is one match with both
    lines' ids; order by the search's own key; the ``beam`` best are kept, ranks renumbered."""
    by_tokens: Dict[Tuple[int, ...], object] = {}
    for matches in per_trie:
        for m in matches:
            old = by_tokens.get(m.tokens)
            if old is None:
                by_tokens[m.tokens] = m
            else:
                by_tokens[m.tokens] = replace(
                    old, tgt_line_ids=tuple(sorted(set(old.tgt_line_ids) | set(m.tgt_line_ids))))
    best = sorted(by_tokens.values(),
                  key=lambda m: rank_key(m.score, m.n_tokens, m.tokens, m.prior,
                                         prior_weight))[:beam]
    return [replace(m, rank=r) for r, m in enumerate(best)]
