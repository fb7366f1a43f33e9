"""Trie-constrained beam search (Chen et al., 2020, Algorithm 1) as a fairseq ``Search``.

Every hypothesis carries the id of its trie node (``-1``: dead, i.e. it left the trie or the slot is
unused).  Per decoding step the work is a handful of batched calls, with no Python loop over
hypotheses or tokens:

* **pre-expansion** (``mode="pre"``): one ``trie.children_many`` call gives the allowed
  ``(row, token, child)`` triples of all hypotheses; their log-probabilities are gathered, scattered
  into a (sentences x widest) matrix and top-k'ed (:meth:`sparse_topk`).  This is the masking of
  every token outside the trie, done sparsely: no vocabulary-sized mask is built, and the trie
  children of the chosen candidates come for free.
* **post-expansion** (``mode="post"``): ordinary top-k over the unconstrained distribution, then one
  ``trie.step_many`` call advances all candidates; candidates that left the trie get ``-inf`` and
  are re-sorted behind the surviving ones (the beam shrinks; a sentence whose candidates all left
  the trie has an empty beam).

Algorithm 1's shrinking beam is applied in both modes: a sentence that has ``m`` matches (finished
hypotheses, i.e. EOS reached inside the trie) keeps only its best ``B - m`` candidates per step;
the others are set to ``-inf``.  The class works inside fairseq's stock ``SequenceGenerator``
(``fairseq-generate``/``fairseq-interactive`` via the plugin), where ``-inf`` candidates become dead
beam slots that can never be finalised (fairseq's ``eos_mask`` requires a finite score).  The
miner uses :class:`triemine.decoding.generator.TrieSequenceGenerator`, which additionally drops
sentences whose live beam is empty (early stop) and stops at the trie depth.

Edge cases, none of which trips a fairseq assertion:

* node with fewer children than the beam: the remaining candidates are ``-inf`` and become dead
  slots (node ``-1``, all-``-inf`` rows afterwards);
* dead ends cannot occur in pre-expansion (every trie path ends in EOS); in post-expansion a
  sentence whose candidates all left the trie keeps only dead slots;
* max length: no trie sequence is longer than ``trie.depth`` tokens (EOS included), so the search
  itself applies ordinary beam search's max-length rule at the trie's depth: at step
  ``depth - 1`` only EOS may be written, whatever ``max_len`` the generator was given.  Without
  this, post-expansion lost every hypothesis that an unconstrained search ends by its length rule
  (forced EOS): the stock generator forces EOS one step later (its ``max_len`` counts tokens
  before EOS), so the model's own top-k, which does not contain EOS there, left the trie.
  ``stop_on_max_len`` is set, so stock fairseq stops at ``max_len`` instead of asserting that
  every sentence has finished; the task sets ``max_len_b = depth - 1``.  EOS forced at
  ``max_len`` is only finalised when it is a trie continuation (pre: masked; post: dropped).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
import triemine.models.fairseq_import  # noqa: F401  (before fairseq: logging)
from fairseq.search import Search
from torch import Tensor

MODES = ("pre", "post")


def dense_topk(lprobs: Tensor, cum: Tensor, row_sent: Tensor, n_sent: int, k: int):
    """Ordinary beam-search candidates: the ``k`` best ``(row, token)`` of every sentence.

    ``lprobs`` (rows x V), ``cum`` (rows,), ``row_sent`` (rows,) with rows grouped by sentence
    in ascending order.  Returns ``(scores, tokens, src_rows)``, each (n_sent x k'), best first,
    ``k' = min(k, widest * V - 1)``; a sentence with fewer rows gets ``-inf`` candidates.
    Without a copy when every sentence has the same number of rows (fairseq's layout).
    """
    rows, vocab = lprobs.shape
    device = lprobs.device
    per_sent = torch.bincount(row_sent, minlength=n_sent)
    first_row = torch.cumsum(per_sent, 0) - per_sent
    width = max(int(per_sent.max()), 1)
    total = lprobs + cum.unsqueeze(1)
    if rows == n_sent * width:
        dense = total.view(n_sent, width * vocab)
    else:
        rank = torch.arange(rows, device=device) - first_row[row_sent]
        dense = torch.full((n_sent * width, vocab), -math.inf, dtype=lprobs.dtype, device=device)
        dense[row_sent * width + rank] = total
        dense = dense.view(n_sent, width * vocab)
    scores, idx = torch.topk(dense, k=min(k, width * vocab - 1), dim=1)
    slot = torch.div(idx, vocab, rounding_mode="trunc")
    tokens = idx.fmod(vocab)
    src_rows = (first_row.unsqueeze(1) + slot).clamp(max=rows - 1)
    scores = scores.masked_fill(slot >= per_sent.unsqueeze(1), -math.inf)
    return scores, tokens, src_rows


def shrink(scores: Tensor, live_beam: Tensor) -> Tensor:
    """Algorithm 1: only the best ``live_beam[s]`` (= B - |matches|) candidates of sentence ``s``
    survive; ``scores`` (n_sent x k) are in rank order."""
    pos = torch.arange(scores.size(1), device=scores.device).unsqueeze(0)
    return scores.masked_fill(pos >= live_beam.unsqueeze(1), -math.inf)


class TrieConsistencyError(AssertionError):
    """Raised in debug mode when a cached trie node disagrees with a walk from the root."""


class TrieConstrainedBeamSearch(Search):
    """Beam search constrained to the sequences of ``trie`` (pre- or post-expansion).

    Args:
        tgt_dict: fairseq target dictionary (the trie must hold ids of this dictionary).
        trie: a :class:`triemine.trie.Trie` whose sequences end in ``tgt_dict.eos()``.
        mode: ``"pre"`` or ``"post"``.
        debug: check every live hypothesis's cached node against a walk from the root each step.
        shrink_beam: Algorithm 1's live beam ``B - |matches|`` (default on).
        node_prior: optional ``float32[n_nodes]`` cumulative prior log P(prefix | empty source)
            of every node (:mod:`triemine.scoring.prior`); with ``prior_weight`` > 0,
            pre-expansion ranks candidates by ``log P(y|x) - prior_weight * prior(node)``.
            The scores it returns stay the exact ``log P(y|x)``.
        prior_weight: lambda of the prior correction (0: the plain search).
    """

    def __init__(self, tgt_dict, trie, mode: str = "pre", debug: bool = False,
                 shrink_beam: bool = True, node_prior=None, prior_weight: float = 0.0):
        super().__init__(tgt_dict)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if int(trie.eos) != self.eos:
            raise ValueError(f"trie EOS id {trie.eos} differs from the dictionary's {self.eos}")
        self.trie = trie
        self.mode = mode
        self.debug = debug
        self.shrink_beam = shrink_beam
        self.stop_on_max_len = True
        self.root = int(getattr(trie, "root", 0))
        self.prior_weight = float(prior_weight)
        self.node_prior: Optional[Tensor] = None
        if node_prior is not None:
            prior = np.asarray(node_prior, dtype=np.float32)
            if prior.shape != (int(trie.n_nodes),):
                raise ValueError(f"node_prior has shape {prior.shape}, the trie has "
                                 f"{int(trie.n_nodes)} nodes")
            self.node_prior = torch.from_numpy(np.array(prior))
        if self.prior_weight and self.node_prior is None:
            raise ValueError("prior_weight needs node_prior")
        if self.prior_weight and mode != "pre":
            raise ValueError("the prior correction ranks trie children: pre-expansion only")
        self.nodes: Optional[Tensor] = None       # (bsz, beam) node of every beam slot
        self.cand_nodes: Optional[Tensor] = None  # (bsz, cand) node of every candidate
        self.n_match: Optional[Tensor] = None     # (bsz,) matches found so far
        self.debug_checks = 0                     # number of hypotheses verified (debug mode)

    # -- vectorised building blocks -------------------------------------------------------------

    def sparse_topk(self, lprobs: Tensor, cum: Tensor, nodes: Tensor, row_sent: Tensor,
                    n_sent: int, k: int):
        """Pre-expansion top-k without touching the full vocabulary.

        ``lprobs`` (rows x V) are the step's log-probs, ``cum`` (rows,) the hypotheses'
        cumulative scores, ``nodes`` (rows,) their trie nodes and ``row_sent`` (rows,) their
        sentence (rows grouped by sentence, ascending).  One ``children_many`` call lists the
        allowed (row, token, child) triples; their scores are gathered, scattered into a
        (sentences x widest) matrix and top-k'ed (by the prior-corrected score when a prior
        weight is set).  Returns ``(scores, tokens, src_rows, child_nodes)``, each (n_sent x k),
        in rank order; ``scores`` are exact cumulative log-probabilities; missing candidates have
        score ``-inf`` and node ``-1``.
        """
        device = lprobs.device
        rows = nodes.numel()
        offsets, keys, child = self.trie.children_many(nodes.reshape(-1).cpu().numpy())
        offsets = torch.from_numpy(np.asarray(offsets, dtype=np.int64)).to(device)
        keys = torch.from_numpy(np.asarray(keys, dtype=np.int64)).to(device)
        child = torch.from_numpy(np.asarray(child, dtype=np.int64)).to(device)
        m = keys.numel()
        if m == 0:  # every hypothesis is dead
            zeros = torch.zeros((n_sent, k), dtype=torch.long, device=device)
            return (torch.full((n_sent, k), -math.inf, dtype=lprobs.dtype, device=device),
                    zeros + self.eos, zeros, zeros - 1)
        row_of = torch.repeat_interleave(torch.arange(rows, device=device), offsets.diff())
        vals = lprobs[row_of, keys] + cum.reshape(-1)[row_of]
        rank = vals
        if self.prior_weight:
            rank = vals - self.prior_weight * self.node_prior.to(device)[child].to(vals.dtype)
        sent_of = row_sent[row_of]
        per_sent = torch.bincount(sent_of, minlength=n_sent)
        sent_start = torch.cumsum(per_sent, 0) - per_sent
        width = max(int(per_sent.max()), k)
        mat = torch.full((n_sent, width), -math.inf, dtype=lprobs.dtype, device=device)
        mat[sent_of, torch.arange(m, device=device) - sent_start[sent_of]] = rank
        ranked, j = torch.topk(mat, k=k, dim=1)
        missing = j >= per_sent.unsqueeze(1)
        flat = (sent_start.unsqueeze(1) + j).clamp(max=m - 1)
        dead = missing | ~torch.isfinite(ranked)
        scores = ranked if rank is vals else vals[flat].masked_fill(dead, -math.inf)
        tokens = keys[flat].masked_fill(missing, self.eos)
        src_rows = row_of[flat]
        nodes_out = child[flat].masked_fill(dead, -1)
        return scores, tokens, src_rows, nodes_out

    def prior_of(self, nodes: Tensor) -> Optional[Tensor]:
        """Cumulative prior of ``nodes`` (None without a node prior)."""
        if self.node_prior is None:
            return None
        return self.node_prior.to(nodes.device)[nodes.clamp(min=0)].double()

    def advance(self, nodes: Tensor, tokens: Tensor) -> Tensor:
        """Child of each node by each token (``-1`` where absent or node is ``-1``)."""
        out = self.trie.step_many(nodes.reshape(-1).cpu().numpy(), tokens.reshape(-1).cpu().numpy())
        return torch.from_numpy(np.asarray(out, dtype=np.int64)).view(nodes.shape).to(nodes.device)

    def walk(self, prefixes: Tensor) -> Tensor:
        """Nodes reached from the root by each row of ``prefixes`` (rows x t, no BOS)."""
        nodes = np.full(prefixes.size(0), self.root, dtype=np.int64)
        toks = prefixes.cpu().numpy().astype(np.int64)
        for t in range(toks.shape[1]):  # debug only: one batched call per position
            nodes = np.asarray(self.trie.step_many(nodes, np.ascontiguousarray(toks[:, t])))
        return torch.from_numpy(nodes).to(prefixes.device)

    def check_nodes(self, prefixes: Tensor, nodes: Tensor, live: Tensor) -> None:
        """Debug check: the cached node of every live hypothesis equals a walk from the root."""
        nodes = nodes.reshape(-1)
        live = live.reshape(-1)
        walked = self.walk(prefixes)
        bad = live & ((walked != nodes) | (nodes < 0))
        if bool(bad.any()):
            r = int(bad.nonzero()[0])
            raise TrieConsistencyError(
                f"hypothesis row {r}: cached trie node {int(nodes[r])} but walking its prefix "
                f"{prefixes[r].tolist()} from the root gives {int(walked[r])}")
        self.debug_checks += int(live.sum())

    # -- fairseq Search interface ---------------------------------------------------------------

    # -- the one home of the trie constraint --------------------------------------------------

    def constrain(self, step: int, lprobs: Tensor, cum: Tensor, nodes: Tensor, row_sent: Tensor,
                  n_sent: int, k: int, live_beam: Optional[Tensor] = None):
        """Candidates of one decoding step under the trie; every rule of the search lives here.

        Rows are hypotheses grouped by sentence (ascending ``row_sent``); ``lprobs`` (rows x V),
        ``cum`` (rows,) exact cumulative log-probabilities (``-inf``: an empty slot), ``nodes``
        (rows,) their trie nodes (``-1``: dead).  ``live_beam`` (n_sent,) is Algorithm 1's
        ``B - |matches|`` (None: no shrinking).  The rules, in order:

        1. the trie's length limit: at step ``depth - 1`` only EOS may follow;
        2. pre-expansion: only trie children compete (ranked by the prior-corrected score when a
           prior weight is set); post-expansion: ordinary top-k, then the candidates that left
           the trie are dropped and the survivors moved to the front;
        3. Algorithm 1: only the first ``live_beam`` candidates survive.

        Returns ``(scores, tokens, src_rows, cand_nodes)``, each (n_sent x k), in rank order:
        exact cumulative scores, ``-inf`` and node ``-1`` for candidates that do not survive.
        """
        if step >= int(self.trie.depth) - 1:  # rule 1
            only_eos = torch.ones(lprobs.size(1), dtype=torch.bool, device=lprobs.device)
            only_eos[self.eos] = False
            lprobs = lprobs.masked_fill(only_eos, -math.inf)
        if self.mode == "pre":
            scores, tokens, src_rows, cand_nodes = self.sparse_topk(lprobs, cum, nodes, row_sent,
                                                                    n_sent, k)
        else:
            lprobs = lprobs.masked_fill((nodes < 0).unsqueeze(1), -math.inf)
            scores, tokens, src_rows = dense_topk(lprobs, cum, row_sent, n_sent, k)
            cand_nodes = self.advance(nodes[src_rows], tokens)
            scores = scores.masked_fill(cand_nodes < 0, -math.inf)
            scores, order = torch.sort(scores, dim=1, descending=True, stable=True)
            tokens, src_rows = tokens.gather(1, order), src_rows.gather(1, order)
            cand_nodes = cand_nodes.gather(1, order)
        if live_beam is not None and self.shrink_beam:
            scores = shrink(scores, live_beam)
        cand_nodes = cand_nodes.masked_fill(~torch.isfinite(scores), -1)
        return scores, tokens, src_rows, cand_nodes

    # -- fairseq Search interface (a thin adapter over constrain) -------------------------------

    @torch.jit.export
    def init_constraints(self, batch_constraints: Optional[Tensor], beam_size: int):
        self.nodes = None
        self.cand_nodes = None
        self.n_match = None

    def step(self, step: int, lprobs: Tensor, scores: Optional[Tensor],
             prev_output_tokens: Optional[Tensor] = None,
             original_batch_idxs: Optional[Tensor] = None):
        """fairseq's layout: ``lprobs`` (bsz x beam x V), ``scores`` (bsz x beam x steps);
        returns ``(cand_scores, cand_tokens, cand_beams)``, each (bsz x 2*beam)."""
        bsz, beam_size, vocab_size = lprobs.size()
        device = lprobs.device
        if step == 0 or self.nodes is None:
            self.nodes = torch.full((bsz, beam_size), self.root, dtype=torch.long, device=device)
            self.n_match = torch.zeros(bsz, dtype=torch.long, device=device)
        nodes = self.nodes
        if self.debug and step > 0 and prev_output_tokens is not None:
            live = torch.isfinite(scores[:, :, step - 1]).reshape(-1)
            self.check_nodes(prev_output_tokens[:, 1: step + 1], nodes, live)
        if step == 0:  # all beam slots are identical: expand the first only
            cum = torch.full((bsz, beam_size), -math.inf, dtype=lprobs.dtype, device=device)
            cum[:, 0] = 0.0
            nodes = nodes.clone()
            nodes[:, 1:] = -1
        else:
            cum = scores[:, :, step - 1]
        k = min(2 * beam_size, beam_size * vocab_size - 1)  # as BeamSearch (never pad)
        row_sent = torch.arange(bsz, device=device).repeat_interleave(beam_size)
        cand_scores, cand_tokens, cand_rows, cand_nodes = self.constrain(
            step, lprobs.reshape(bsz * beam_size, vocab_size), cum.reshape(-1),
            nodes.reshape(-1), row_sent, bsz, k, (beam_size - self.n_match).clamp(min=0))
        cand_beams = cand_rows - (torch.arange(bsz, device=device) * beam_size).unsqueeze(1)
        # candidates that do not survive may point at another sentence's row: keep them in range
        cand_beams = cand_beams.masked_fill(~torch.isfinite(cand_scores), 0)
        # fairseq finalises the finite EOS candidates among the first beam_size positions
        finite = torch.isfinite(cand_scores)
        self.n_match = self.n_match + (finite & cand_tokens.eq(self.eos))[:, :beam_size].sum(1)
        self.cand_nodes = cand_nodes
        return cand_scores, cand_tokens, cand_beams

    @torch.jit.export
    def prune_sentences(self, batch_idxs: Tensor):
        self.cand_nodes = self.cand_nodes[batch_idxs]
        self.n_match = self.n_match[batch_idxs]

    @torch.jit.export
    def update_constraints(self, active_hypos: Tensor):
        self.nodes = torch.gather(self.cand_nodes, 1, active_hypos)
