"""A tiny fairseq transformer trained on synthetic data in seconds, written as a model directory.

Shared by the test fixture (``tests/conftest.py``) and the quick benchmarks
(``bench/benchlib.py``'s ``cached_tiny_model``).  The synthetic language pair is a word-for-word
substitution cipher ("sa sb" -> "ta tb" with a fixed permutation of the vocabulary), so a
one-layer transformer learns it in a few hundred updates and beam search gives meaningful,
peaked distributions.

The directory follows the project's model-directory convention (see ``model_dir.py``)::

    DIR/checkpoint.pt  DIR/dict.src.txt  DIR/dict.tgt.txt  DIR/source.spm  DIR/target.spm
    DIR/triemine-model.json
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import List, Sequence, Tuple

N_WORDS = 24


def _words(prefix: str) -> List[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return [prefix + letters[i // 26 % 26] + letters[i % 26] for i in range(N_WORDS)]


SRC_WORDS = _words("s")
TGT_WORDS = _words("t")


def _permutation(seed: int = 7) -> List[int]:
    perm = list(range(N_WORDS))
    random.Random(seed).shuffle(perm)
    return perm


def translate_synthetic(sentence: str) -> str:
    """The reference translation of a synthetic source sentence (word-for-word cipher)."""
    perm = _permutation()
    index = {w: i for i, w in enumerate(SRC_WORDS)}
    return " ".join(TGT_WORDS[perm[index[w]]] for w in sentence.split())


def synthetic_pairs(n: int, seed: int = 0, min_len: int = 2,
                    max_len: int = 7) -> List[Tuple[str, str]]:
    """``n`` (source, target) pairs of the synthetic language pair."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        length = rng.randint(min_len, max_len)
        src = " ".join(rng.choice(SRC_WORDS) for _ in range(length))
        pairs.append((src, translate_synthetic(src)))
    return pairs


def _train_spm(lines: Sequence[str], prefix: Path, vocab_size: int) -> None:
    import sentencepiece as spm

    text = prefix.with_suffix(".train.txt")
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(prefix), vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, num_threads=1, minloglevel=2,
        bos_id=-1, eos_id=-1, unk_id=0, pad_id=-1,
    )
    text.unlink()


def build_tiny_model(out_dir, *, n_train: int = 3000, updates: int = 500, seed: int = 0,
                     embed_dim: int = 64, reverse: bool = False) -> Path:
    """Train the tiny model and write a model directory at ``out_dir``; returns the path.

    Takes a few seconds on one CPU thread.  Deterministic for a given seed.  ``reverse`` trains
    the other direction (target language -> source language), for two-direction scoring.
    """
    import sentencepiece as spm
    import torch
    from fairseq import options, tasks
    from fairseq.data import Dictionary
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    pairs = synthetic_pairs(n_train, seed=seed)
    if reverse:
        pairs = [(t, s_) for s_, t in pairs]
    _train_spm([s for s, _ in pairs], out / "source", vocab_size=40)
    _train_spm([t for _, t in pairs], out / "target", vocab_size=40)
    (out / "source.model").rename(out / "source.spm")
    (out / "target.model").rename(out / "target.spm")
    for name in ("source.vocab", "target.vocab"):
        (out / name).unlink()
    sp_src = spm.SentencePieceProcessor(model_file=str(out / "source.spm"))
    sp_tgt = spm.SentencePieceProcessor(model_file=str(out / "target.spm"))

    dicts = {}
    for lang, sp, side in (("src", sp_src, 0), ("tgt", sp_tgt, 1)):
        d = Dictionary()
        for pair in pairs:
            for piece in sp.encode(pair[side], out_type=str):
                d.add_symbol(piece)
        d.finalize(padding_factor=1)
        d.save(str(out / f"dict.{lang}.txt"))
        dicts[lang] = d

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(out), "--task", "translation", "--source-lang", "src", "--target-lang", "tgt",
        "--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1",
        "--encoder-embed-dim", str(embed_dim), "--decoder-embed-dim", str(embed_dim),
        "--encoder-ffn-embed-dim", str(2 * embed_dim), "--decoder-ffn-embed-dim",
                                                str(2 * embed_dim),
        "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
        "--share-decoder-input-output-embed", "--dropout", "0.0",
        "--max-source-positions", "64", "--max-target-positions", "64", "--seed", str(seed),
    ])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)

    def encode(sp, d, text):
        return d.encode_line(" ".join(sp.encode(text, out_type=str)), append_eos=True,
                             add_if_not_exist=False).long()

    data = [(encode(sp_src, dicts["src"], s), encode(sp_tgt, dicts["tgt"], t)) for s, t in pairs]
    src_pad, tgt_pad, eos = dicts["src"].pad(), dicts["tgt"].pad(), dicts["tgt"].eos()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = random.Random(seed)
    model.train()
    batch = 64
    for _ in range(updates):
        items = rng.sample(data, batch)
        src_len = max(len(s) for s, _ in items)
        tgt_len = max(len(t) for _, t in items)
        src = torch.full((batch, src_len), src_pad, dtype=torch.long)
        tgt = torch.full((batch, tgt_len), tgt_pad, dtype=torch.long)
        prev = torch.full((batch, tgt_len), tgt_pad, dtype=torch.long)
        lengths = torch.empty(batch, dtype=torch.long)
        for i, (s, t) in enumerate(items):
            src[i, src_len - len(s):] = s  # fairseq's default left-padded source
            tgt[i, : len(t)] = t
            prev[i, 0] = eos
            prev[i, 1: len(t)] = t[:-1]
            lengths[i] = len(s)
        logits, _ = model(src, lengths, prev)
        loss = torch.nn.functional.cross_entropy(
            logits.view(-1, logits.size(-1)), tgt.view(-1), ignore_index=tgt_pad)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()

    cfg.task.data = str(out)
    state = {
        "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        "model": model.state_dict(),
        "args": None,
        "optimizer_history": [{"criterion_name": "CrossEntropyCriterion", "optimizer_name": "Adam",
                               "lr_scheduler_state": {}, "num_updates": updates}],
        "extra_state": {"final_loss": float(loss.detach())},
    }
    torch.save(state, out / "checkpoint.pt")
    (out / "triemine-model.json").write_text(json.dumps({
        "format": 1, "source_lang": "src", "target_lang": "tgt",
        "description": "tiny synthetic test model (triemine.testing.tiny_model)",
        "final_train_loss": float(loss.detach()),
    }, indent=2) + "\n", encoding="utf-8")
    return out
