"""Helpers shared by the tests (imported by them and by ``tests/conftest.py``, which registers
the tiny pair's encoder for every test): the tiny synthetic pair's sentences, the search and
forced scores on the tiny model, the ``cipher`` encoder, option trees and command lines of the
mining job, and the fault hook's files. Fixtures live in the ``conftest.py`` files."""
import json

import numpy as np
import torch
from fairseq.data import data_utils

from triemine.decoding.generator import TrieSequenceGenerator
from triemine.decoding.search import TrieConstrainedBeamSearch
from triemine.distributed.worker import FAULTS_ENV
from triemine.embedding import register_encoder
from triemine.embedding.encoders import SentenceEncoder
from triemine.judging.combination import Combination
from triemine.mining.options import MineOptions
from triemine.config.settings import with_values
from triemine.testing.tiny_model import synthetic_pairs
from triemine.trie import Trie

# -- the tiny pair, the search and forced scores (tests/decoding, tests/scoring, tests/mining)
# ------

PAIRS = synthetic_pairs(40, seed=101)
OTHER = [t for _, t in synthetic_pairs(60, seed=202)]


def make_trie(model, texts, token_seqs=()):
    seqs = [list(t) for t in token_seqs] + [model.encode_target(t).tolist() for t in texts]
    return Trie.build(seqs, eos=model.tgt_dict.eos())


def sample_of(model, sources):
    toks = [model.encode_source(s) for s in sources]
    return {"net_input": {
        "src_tokens": data_utils.collate_tokens(toks, model.src_dict.pad(), left_pad=True),
        "src_lengths": torch.tensor([len(t) for t in toks])}}


def run(model, sources, trie, mode, beam, debug=False, **search_kwargs):
    search = None if mode is None else TrieConstrainedBeamSearch(model.tgt_dict, trie, mode,
                                                                  debug=debug, **search_kwargs)
    gen = TrieSequenceGenerator(model.models, model.tgt_dict, search=search, beam_size=beam)
    return gen.generate(model.models, sample_of(model, sources)), gen, search


def forced_scores(model, source, targets):
    """Total log-prob of every target given the source (teacher forcing, EOS included)."""
    m = model.model
    src = model.encode_source(source)
    tgt = [model.encode_target(t) for t in targets]
    eos, pad = model.tgt_dict.eos(), model.tgt_dict.pad()
    n = len(tgt)
    target = data_utils.collate_tokens(tgt, pad, eos, left_pad=False)
    prev = data_utils.collate_tokens(tgt, pad, eos, left_pad=False, move_eos_to_beginning=True)
    with torch.no_grad():
        out = m(src.unsqueeze(0).repeat(n, 1), torch.tensor([len(src)] * n), prev)
        lp = m.get_normalized_probs(out, log_probs=True)
    tok = lp.gather(2, target.unsqueeze(-1)).squeeze(-1).masked_fill(target.eq(pad), 0.0)
    return tok.sum(1), torch.tensor([len(t) for t in tgt])


# -- the cipher encoder (registered on import)
# ------------------------------------------------------

class CipherEncoder(SentenceEncoder):
    """An encoder for the tiny model's synthetic language pair: bag of words over the target
    vocabulary, source words mapped through the cipher (so translations are close).  Real
    encoders are tested on real text in tests/embedding/test_encoders.py."""

    name, dim = "cipher", 24

    def _encode(self, texts):
        from triemine.testing.tiny_model import SRC_WORDS, TGT_WORDS, translate_synthetic

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            words = t.split()
            if words and words[0] in SRC_WORDS:
                words = translate_synthetic(t).split()
            for w in words:  # a word of neither vocabulary (a tiny model's output) counts
                if w in TGT_WORDS:  # for nothing
                    out[i, TGT_WORDS.index(w)] += 1
        return out + 0.05


register_encoder("cipher")(CipherEncoder)


# -- the mining job's options and command lines
# ------------------------------------------------------

def job_options(**settings):
    """The default configuration's tree with ``settings`` (by field name; ``None`` too)."""
    return with_values(MineOptions.of("combined"), settings)


def combination_file(tmp_path, features=("cipher_margin", "ce_token"), weights=(1.0, -1.0)):
    path = tmp_path / "comb.json"
    Combination("test", list(features), list(weights), [0.0] * len(features),
                [1.0] * len(features), "test").save(path)
    return str(path)


def mine_args(model_dir, src, tgt, comb, *extra):
    """trie-mine's arguments of a combined job with the combination file ``comb`` on the
    cipher encoder (the tiny model's)."""
    return ["--model", str(model_dir), "--source", str(src), "--target", str(tgt),
            "--config", "combined", "--encoder", "cipher", "--min-margin", "0",
            "--combination", comb, "-q", *extra]


def run_main(capsys, main, argv):
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's refusal of a bad option value
        rc = exc.code
    return rc, capsys.readouterr().err


def paper_job(model_dir, src, tgt, *extra):
    """The paper configuration's command line with the default batches (``paper_args``: small
    ones, for many shards)."""
    return ["--config", "paper", "--model", str(model_dir), "--source", str(src), "--target",
            str(tgt), "--beam", "5", "-q", *extra]


def snapshot(*paths):
    return {p: p.read_bytes() for p in paths if p.is_file()}


# -- the sharded jobs (tests/distributed): their corpora's sentences, command line, fault hook
# ------

SHARD_PAIRS = synthetic_pairs(48, seed=11)
SHARD_OTHER = [t for _, t in synthetic_pairs(40, seed=12)]


def paper_args(model_dir, src, tgt, *extra):
    return ["--config", "paper", "--model", str(model_dir), "--source", str(src), "--target",
            str(tgt), "--beam", "5", "--batch-size", "2", "--sort-window", "2", "-q", *extra]


def fault_env(tmp_path, monkeypatch=None, **kw):
    d = tmp_path / "faults"
    d.mkdir(exist_ok=True)
    spec = json.dumps(dict(kw, dir=str(d)))
    if monkeypatch is not None:
        monkeypatch.setenv(FAULTS_ENV, spec)
    return d, spec


def computed_shards(d):
    log = d / "computed.log"
    return [int(x) for x in log.read_text().split()] if log.is_file() else []

