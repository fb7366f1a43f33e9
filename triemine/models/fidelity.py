"""Check that an imported fairseq model computes what the CTranslate2 original computes.

Three measurements on the same source sentences:

* greedy and beam-k outputs, token for token (fairseq ``SequenceGenerator`` with ``lenpen=1``,
  normalised scores vs ``ctranslate2.Translator.translate_batch`` with ``length_penalty=1``);
* forced-decoding log-probabilities of CTranslate2's own output (``score_batch``), per token
  including ``</s>``.

CTranslate2 with ``compute_type="int8"`` also quantises activations, so the conversion itself is
judged against ``compute_type="float32"`` (same dequantised weights); the int8 comparison is
reported too and is expected to be somewhat lower.

A Hugging Face Marian import is judged the same way against ``transformers`` (:class:`HFSide`,
float32; ``transformers`` is needed only for this check, not for importing).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np
import torch
from tqdm import tqdm

from triemine.models.model_dir import load_model_dir
from triemine.errors import InputError
from triemine.models.hf_marian import import_transformers


@dataclass
class FidelityReport:
    sentences: int
    compute_type: str
    beam_size: int
    greedy_exact: float                 # fraction of sentences with identical greedy output
    beam_exact: float                   # fraction with identical beam-k output
    exact_match_rate: float             # mean of the two
    score_max_abs_diff_per_token: float  # max over sentences of mean |Δ logprob| per token
    score_mean_abs_diff_per_token: float
    score_within_0_01: float            # fraction of sentences whose mean |Δ| per token <= 0.01
    mismatches: List[dict] = field(default_factory=list)
    fairseq_decode_seconds: float = 0.0  # fairseq greedy + beam search time for all sentences

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["mismatches"] = self.mismatches[:5]
        return d


class FairseqSide:
    """An imported model plus its dictionaries, run the fairseq way."""

    def __init__(self, model_dir, device: str = "cpu"):
        loaded = load_model_dir(model_dir, device=device, require_source_spm=False)
        self.model, self.task = loaded.model, loaded.task
        self.src_dict = self.task.source_dictionary
        self.tgt_dict = self.task.target_dictionary
        self.device = device

    def encode(self, pieces: Sequence[str], target: bool = False) -> torch.Tensor:
        d = self.tgt_dict if target else self.src_dict
        ids = [d.index(p) for p in pieces] + [d.eos()]
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids) -> List[str]:
        eos = self.tgt_dict.eos()
        return [self.tgt_dict[i] for i in ids if i != eos]

    def _batch(self, sources: List[List[str]]):
        toks = [self.encode(s) for s in sources]
        lengths = torch.tensor([len(t) for t in toks])
        pad = self.src_dict.pad()
        src = torch.full((len(toks), int(lengths.max())), pad, dtype=torch.long)
        for i, t in enumerate(toks):  # fairseq's default: left-padded source
            src[i, src.size(1) - len(t):] = t
        return {"net_input": {"src_tokens": src.to(self.device),
                              "src_lengths": lengths.to(self.device)}}

    @torch.no_grad()
    def translate(self, sources: List[List[str]], beam_size: int, max_len_b: int = 256):
        from fairseq.sequence_generator import SequenceGenerator
        gen = SequenceGenerator([self.model], self.tgt_dict, beam_size=beam_size,
                                max_len_a=0, max_len_b=max_len_b, len_penalty=1.0,
                                normalize_scores=True)
        out = gen.generate([self.model], self._batch(sources))
        return [self.decode(hyps[0]["tokens"].tolist()) for hyps in out]

    @torch.no_grad()
    def score(self, sources: List[List[str]], targets: List[List[str]]) -> List[np.ndarray]:
        """Per-token log-probabilities of ``targets`` (each ends with ``</s>``)."""
        batch = self._batch(sources)
        tgt = [self.encode(t, target=True) for t in targets]
        eos, pad = self.tgt_dict.eos(), self.tgt_dict.pad()
        tmax = max(len(t) for t in tgt)
        prev = torch.full((len(tgt), tmax), pad, dtype=torch.long)
        gold = torch.full((len(tgt), tmax), pad, dtype=torch.long)
        for i, t in enumerate(tgt):
            gold[i, :len(t)] = t
            prev[i, 0] = eos
            prev[i, 1:len(t)] = t[:-1]
        net = batch["net_input"]
        logits, _ = self.model(net["src_tokens"], net["src_lengths"], prev.to(self.device))
        lp = torch.log_softmax(logits.float(), dim=-1)
        tok_lp = lp.gather(-1, gold.to(self.device).unsqueeze(-1)).squeeze(-1).cpu()
        return [tok_lp[i, :len(t)].numpy() for i, t in enumerate(tgt)]


class CT2Side:
    def __init__(self, ct2_dir, compute_type: str = "float32"):
        import ctranslate2
        self.translator = ctranslate2.Translator(str(ct2_dir), device="cpu",
                                                 compute_type=compute_type, inter_threads=1,
                                                 intra_threads=1)

    def translate(self, sources: List[List[str]], beam_size: int, max_len: int = 256):
        res = self.translator.translate_batch(sources, beam_size=beam_size, length_penalty=1.0,
                                              max_decoding_length=max_len)
        return [r.hypotheses[0] for r in res]

    def score(self, sources: List[List[str]], targets: List[List[str]]) -> List[np.ndarray]:
        res = self.translator.score_batch(sources, targets)
        return [np.asarray(r.log_probs, dtype=np.float32) for r in res]


class HFSide:
    """A Hugging Face ``MarianMTModel`` directory run by ``transformers`` (float32, eval mode),
    on sentencepiece pieces like :class:`CT2Side`: beam search with ``length_penalty`` 1 and
    ``early_stopping`` True (fairseq's stopping rule), at least one token, never ``<pad>``, at
    most ``max_len`` tokens before ``</s>`` (as fairseq's ``max_len_b``)."""

    def __init__(self, hf_dir):
        transformers = import_transformers()
        hf_dir = Path(hf_dir)
        self.model = transformers.MarianMTModel.from_pretrained(str(hf_dir)).float().eval()
        self.vocab = json.loads((hf_dir / "vocab.json").read_text(encoding="utf-8"))
        self.pieces = {i: p for p, i in self.vocab.items()}
        cfg = self.model.config
        self.eos, self.pad = cfg.eos_token_id, cfg.pad_token_id
        self.unk = self.vocab["<unk>"]
        self.start = cfg.decoder_start_token_id

    def _ids(self, pieces: Sequence[str], eos: bool = True) -> List[int]:
        return [self.vocab.get(p, self.unk) for p in pieces] + ([self.eos] if eos else [])

    def _batch(self, sources: List[List[str]]):
        ids = [self._ids(s) for s in sources]
        n = max(len(i) for i in ids)
        input_ids = torch.full((len(ids), n), self.pad, dtype=torch.long)
        mask = torch.zeros((len(ids), n), dtype=torch.long)
        for k, row in enumerate(ids):  # right padding, as the Marian tokenizer pads
            input_ids[k, :len(row)] = torch.tensor(row)
            mask[k, :len(row)] = 1
        return input_ids, mask

    @torch.no_grad()
    def translate(self, sources: List[List[str]], beam_size: int, max_len: int = 256):
        input_ids, mask = self._batch(sources)
        out = self.model.generate(input_ids=input_ids, attention_mask=mask, num_beams=beam_size,
                                  do_sample=False, length_penalty=1.0, early_stopping=True,
                                  max_new_tokens=max_len + 1, min_new_tokens=1,
                                  bad_words_ids=[[self.pad]], num_return_sequences=1)
        result = []
        for row in out.tolist():
            toks = row[1:]  # the decoder start token
            if self.eos in toks:
                toks = toks[:toks.index(self.eos)]
            result.append([self.pieces[i] for i in toks if i != self.pad])
        return result

    @torch.no_grad()
    def score(self, sources: List[List[str]], targets: List[List[str]]) -> List[np.ndarray]:
        input_ids, mask = self._batch(sources)
        tgt = [self._ids(t) for t in targets]
        n = max(len(t) for t in tgt)
        dec = torch.full((len(tgt), n), self.pad, dtype=torch.long)
        gold = torch.full((len(tgt), n), self.pad, dtype=torch.long)
        for k, t in enumerate(tgt):
            dec[k, 0] = self.start
            dec[k, 1:len(t)] = torch.tensor(t[:-1])
            gold[k, :len(t)] = torch.tensor(t)
        logits = self.model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=dec).logits
        lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, gold.unsqueeze(-1)).squeeze(-1)
        return [lp[k, :len(t)].numpy() for k, t in enumerate(tgt)]


def tokenize_sources(spm_path, texts: Sequence[str]) -> List[List[str]]:
    import sentencepiece as spm
    path = Path(spm_path)
    if not path.is_file():
        raise InputError("source sentencepiece model not found", path)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    return [sp.encode(t, out_type=str) for t in texts]


def compare_many(fairseq_side: FairseqSide, ct2_sides: Dict[str, CT2Side],
                 sources: List[List[str]], beam_size: int = 4, batch_size: int = 16,
                 progress: bool = True, max_len: int = 256) -> Dict[str, FidelityReport]:
    """Compare greedy, beam-``beam_size`` and forced scores on tokenised ``sources`` against each
    reference side (CTranslate2 keyed by compute type, or :class:`HFSide`); fairseq decodes each
    sentence once. Outputs are capped at ``max_len`` tokens on both sides."""
    if not sources:
        raise InputError("no sentences to compare")
    stats = {k: {"greedy": 0, "beam": 0, "diffs": [], "mismatches": []} for k in ct2_sides}
    bar = tqdm(total=len(sources), desc="fidelity", disable=not progress, unit="sent")
    fs_seconds = 0.0
    for start in range(0, len(sources), batch_size):
        chunk = sources[start:start + batch_size]
        t0 = time.perf_counter()
        fs_out = {beam: fairseq_side.translate(chunk, beam, max_len_b=max_len)
                  for beam in (1, beam_size)}
        fs_seconds += time.perf_counter() - t0
        for key, ct2 in ct2_sides.items():
            st = stats[key]
            for beam, counter in ((1, "greedy"), (beam_size, "beam")):
                ct = ct2.translate(chunk, beam, max_len=max_len)
                for j, (a, b) in enumerate(zip(fs_out[beam], ct)):
                    if a == b:
                        st[counter] += 1
                    elif len(st["mismatches"]) < 20:
                        st["mismatches"].append({"index": start + j, "search": counter,
                                                 "fairseq": " ".join(a),
                                                 "ctranslate2": " ".join(b)})
                if counter == "beam":
                    targets = ct
            fs_lp = fairseq_side.score(chunk, targets)
            ct_lp = ct2.score(chunk, targets)
            for a, b in zip(fs_lp, ct_lp):
                if len(a) != len(b):
                    raise RuntimeError(f"score lengths differ: fairseq {len(a)} vs ct2 {len(b)}")
                st["diffs"].append(float(np.mean(np.abs(a - b))))
        bar.update(len(chunk))
    bar.close()
    n = len(sources)
    reports = {}
    for key, st in stats.items():
        d = np.asarray(st["diffs"])
        reports[key] = FidelityReport(
            sentences=n, compute_type=key, beam_size=beam_size,
            greedy_exact=st["greedy"] / n, beam_exact=st["beam"] / n,
            exact_match_rate=(st["greedy"] + st["beam"]) / (2 * n),
            score_max_abs_diff_per_token=float(d.max()),
            score_mean_abs_diff_per_token=float(d.mean()),
            score_within_0_01=float(np.mean(d <= 0.01)), mismatches=st["mismatches"],
            fairseq_decode_seconds=fs_seconds)
    return reports


def compare(fairseq_side: FairseqSide, ct2_side, sources: List[List[str]],
            beam_size: int = 4, batch_size: int = 16, compute_type: str = "float32",
            progress: bool = True, max_len: int = 256) -> FidelityReport:
    """:func:`compare_many` against a single reference side (``compute_type`` names it)."""
    return compare_many(fairseq_side, {compute_type: ct2_side}, sources, beam_size=beam_size,
                        batch_size=batch_size, progress=progress, max_len=max_len)[compute_type]


def check_fidelity(ct2_dir, model_dir, texts: Sequence[str], beam_size: int = 4,
                   compute_types: Sequence[str] = ("float32",), spm_path=None,
                   progress: bool = True) -> Dict[str, FidelityReport]:
    """Tokenise ``texts`` with the model's source sentencepiece and compare per compute type."""
    spm_path = spm_path or Path(model_dir) / "source.spm"
    sources = tokenize_sources(spm_path, texts)
    fs = FairseqSide(model_dir)
    sides = {ct: CT2Side(ct2_dir, ct) for ct in compute_types}
    return compare_many(fs, sides, sources, beam_size=beam_size, progress=progress)
