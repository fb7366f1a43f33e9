"""Algorithm 1 of Chen et al. (2020) as a fairseq-compatible generator.

:class:`TrieSequenceGenerator` has the interface of fairseq's ``SequenceGenerator``
(``generate(models, sample)`` -> per sentence a list of hypothesis dicts, best first), so the
``trie_translation`` task returns it from ``build_generator`` and the miner calls it directly.
Compared with running :class:`~triemine.decoding.search.TrieConstrainedBeamSearch` inside the stock
generator it:

* keeps exactly ``B - |matches|`` live hypotheses per sentence (the top ``B - m`` candidates of
  each step; an EOS candidate among them becomes a match, the others stay live);
* removes a sentence from the batch as soon as it has ``B`` matches **or its live beam is empty**
  (post-expansion early stop; the sentence keeps what it matched, possibly nothing);
* runs at most ``trie.depth`` steps (the longest trie sequence, EOS included), forcing EOS on
  the last one, so it never asks for a position past the trie;
* reports the total log-probability, the token count and the matched target line ids.

With ``search=None`` it is the same shrinking-beam search without a trie (the unconstrained
baseline).  Every trie rule (length limit, pre/post expansion, the shrinking beam) is applied by
:meth:`TrieConstrainedBeamSearch.constrain`, the same code the fairseq ``Search`` adapter calls;
this
class only keeps the live rows, reorders the decoder state and finalises matches.  All per-step
work is batched tensor operations plus one or two batched trie calls; the only Python loop runs
over *finished* hypotheses to build the result dicts.
"""
from __future__ import annotations

import math
from typing import Dict, List

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor

from triemine.decoding.matches import rank_key
from triemine.decoding.search import dense_topk, shrink


class TrieSequenceGenerator(nn.Module):
    """Shrinking-beam (Algorithm 1) generator; trie-constrained when ``search`` is given.

    Args:
        models: fairseq models (an ensemble) or an ``EnsembleModel``.
        tgt_dict: target dictionary.
        search: a :class:`TrieConstrainedBeamSearch` (mode pre/post) or None (unconstrained).
        beam_size: B.
        max_len_a, max_len_b: unconstrained maximum output length ``a * src_len + b`` (tokens,
            EOS excluded); with a trie the limit is the trie depth.
        len_penalty: hypotheses are ranked by ``total / n_tokens ** len_penalty`` (fairseq's
            normalised score, ``n_tokens`` includes EOS).
    """

    def __init__(self, models, tgt_dict, search=None, beam_size: int = 5, max_len_a: float = 0,
                 max_len_b: int = 200, len_penalty: float = 1.0, **_ignored):
        super().__init__()
        from fairseq.sequence_generator import EnsembleModel

        self.model = models if isinstance(models, EnsembleModel) else EnsembleModel(models)
        self.model.eval()
        self.tgt_dict = tgt_dict
        self.pad = tgt_dict.pad()
        self.eos = tgt_dict.eos()
        self.vocab_size = len(tgt_dict)
        self.search = search
        self.beam_size = min(int(beam_size), self.vocab_size - 1)
        self.max_len_a = max_len_a
        self.max_len_b = max_len_b
        self.len_penalty = len_penalty
        self.stats = {"steps": 0, "sentences": 0, "early_stopped": 0}

    def cuda(self):
        self.model.cuda()
        return self

    @torch.no_grad()
    def generate(self, models, sample: Dict[str, Dict[str, Tensor]], **kwargs):
        return self._generate(sample)

    @torch.no_grad()
    def forward(self, sample, **kwargs):
        return self._generate(sample)

    def n_steps(self, src_len: int) -> int:
        """Decoding steps (tokens including EOS) allowed for a batch with ``src_len`` columns."""
        cap = self.model.max_decoder_positions() - 1
        if self.search is not None:
            return max(1, min(int(self.search.trie.depth), cap))
        return max(1, min(int(self.max_len_a * src_len + self.max_len_b) + 1, cap))

    def _generate(self, sample) -> List[List[Dict[str, Tensor]]]:
        """Decode a batch.  Only live hypotheses occupy decoder rows: row ``r`` belongs to
        sentence ``row_sent[r]`` (rows grouped by sentence, in order); a sentence has at most
        ``B - |matches|`` rows and leaves the batch when it has none."""
        net_input = sample["net_input"]
        src_tokens = net_input["src_tokens"]
        device = src_tokens.device
        bsz, src_len = src_tokens.size()[:2]
        B, eos = self.beam_size, self.eos
        search = self.search
        n_steps = self.n_steps(src_len)
        self.stats["sentences"] += bsz

        encoder_outs = self.model.forward_encoder(net_input)
        incremental_states = [{} for _ in range(self.model.models_size)]

        # one live row per sentence at step 0
        tokens = torch.full((bsz, n_steps + 1), self.pad, dtype=torch.long, device=device)
        tokens[:, 0] = eos
        step_scores = torch.zeros(bsz, n_steps, device=device)
        cum = torch.zeros(bsz, device=device)
        nodes = torch.full((bsz,), search.root if search is not None else -1, dtype=torch.long,
                           device=device)
        row_sent = torch.arange(bsz, device=device)
        n_match = torch.zeros(bsz, dtype=torch.long, device=device)
        sent_ids = torch.arange(bsz, device=device)  # original index of each batch sentence
        finalized: List[List[Dict[str, Tensor]]] = [[] for _ in range(bsz)]
        nb = bsz

        for step in range(n_steps):
            self.stats["steps"] += 1
            if search is not None and search.debug and step > 0:
                search.check_nodes(tokens[:, 1: step + 1], nodes,
                                   torch.ones_like(nodes, dtype=torch.bool))
            lprobs, _ = self.model.forward_decoder(tokens[:, : step + 1], encoder_outs,
                                                   incremental_states, 1.0)
            torch.nan_to_num_(lprobs, nan=-math.inf, posinf=math.inf, neginf=-math.inf)
            lprobs[:, self.pad] = -math.inf
            if step == 0:
                lprobs[:, eos] = -math.inf  # min length 1, as fairseq's default
            if step == n_steps - 1:  # last step: only EOS
                keep = lprobs[:, eos].clone()
                lprobs.fill_(-math.inf)
                lprobs[:, eos] = keep
            if search is not None:  # every trie rule, Algorithm 1's shrinking included
                cand_scores, toks, src_rows, cand_nodes = search.constrain(
                    step, lprobs, cum, nodes, row_sent, nb, B, B - n_match)
            else:
                cand_scores, toks, src_rows = dense_topk(lprobs, cum, row_sent, nb, B)
                cand_scores = shrink(cand_scores, B - n_match)
                cand_nodes = torch.full_like(toks, -1)
            valid = torch.isfinite(cand_scores)
            is_eos = valid & toks.eq(eos)
            live = valid & ~is_eos
            tok_scores = torch.where(valid, cand_scores - cum[src_rows],
                                     torch.zeros_like(cand_scores))

            if bool(is_eos.any()):
                self._finalize(step, is_eos, src_rows, tokens, step_scores, tok_scores,
                               cand_scores, cand_nodes, sent_ids, finalized)
                n_match = n_match + is_eos.sum(1)

            if step == n_steps - 1:
                break
            has_live = live.any(1)
            self.stats["early_stopped"] += int((~has_live & (n_match < B)).sum())
            if not bool(has_live.any()):
                break
            keep_sents = has_live.nonzero().squeeze(1)
            new_index = torch.cumsum(has_live.long(), 0) - 1  # old sentence -> new position
            live_s, live_j = live.nonzero(as_tuple=True)  # sentence-major: rows stay grouped
            reorder = src_rows[live_s, live_j]
            tokens = tokens[reorder]
            tokens[:, step + 1] = toks[live_s, live_j]
            step_scores = step_scores[reorder]
            step_scores[:, step] = tok_scores[live_s, live_j]
            cum = cand_scores[live_s, live_j]
            nodes = cand_nodes[live_s, live_j]
            row_sent = new_index[live_s]
            n_match = n_match[keep_sents]
            sent_ids = sent_ids[keep_sents]
            nb = keep_sents.numel()
            self.model.reorder_incremental_state(incremental_states, reorder)
            encoder_outs = self.model.reorder_encoder_out(encoder_outs, reorder)

        weight = search.prior_weight if search is not None else 0.0
        for hyps in finalized:
            # the search's own ranking: log P(y|x) - lambda * prior, length-normalised
            hyps.sort(key=lambda h: rank_key(h["total_score"], h["n_tokens"], h["tokens"].tolist(),
                                             h.get("prior"), weight, self.len_penalty))
        return finalized

    def _finalize(self, step, is_eos, src_rows, tokens, step_scores, tok_scores, cand_scores,
                  cand_nodes, sent_ids, finalized) -> None:
        s_idx, j_idx = is_eos.nonzero(as_tuple=True)
        rws = src_rows[s_idx, j_idx]
        fin_tokens = torch.cat([tokens[rws, 1: step + 1],
                                torch.full((rws.numel(), 1), self.eos, dtype=torch.long,
                                           device=tokens.device)], dim=1)
        fin_pos = torch.cat([step_scores[rws, :step], tok_scores[s_idx, j_idx].unsqueeze(1)], dim=1)
        totals = cand_scores[s_idx, j_idx]
        n_tok = step + 1
        norm = totals / (n_tok ** self.len_penalty)
        node_t = cand_nodes[s_idx, j_idx]
        nodes = node_t.tolist()
        sents = sent_ids[s_idx].tolist()
        trie = self.search.trie if self.search is not None else None
        prior_t = self.search.prior_of(node_t) if self.search is not None else None
        priors = prior_t.tolist() if prior_t is not None else None
        # one device->host copy and one split per field, then a loop over finished hypotheses
        tok_rows = fin_tokens.cpu().unbind(0)
        pos_rows = fin_pos.cpu().unbind(0)
        norm_rows = norm.cpu().unbind(0)
        total_list = totals.tolist()
        no_ids = np.empty(0, dtype=np.int64)
        for i, sent in enumerate(sents):
            line_ids = (trie.terminal_ids(nodes[i]).astype(np.int64)
                        if trie is not None else no_ids)
            extra = {"prior": priors[i]} if priors is not None else {}
            finalized[sent].append({
                **extra,
                "tokens": tok_rows[i],
                "score": norm_rows[i],
                "total_score": total_list[i],
                "n_tokens": n_tok,
                "positional_scores": pos_rows[i],
                "attention": torch.empty(0),
                "alignment": torch.empty(0),
                "node": nodes[i],
                "line_ids": line_ids,
            })
