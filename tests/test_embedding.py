"""The two shipped sentence encoders (``use``, the mining job's default, and ``e5``) on real
gold pairs of the BUCC sample, and the registry's error for an unknown name."""
import numpy as np
import pytest

from triemine.embedding.encoders import ENCODERS, get_encoder
from triemine.errors import TrieMineError
from triemine.evaluation.bucc import read_gold, read_sentences
from triemine.paths import shared_path

N_PAIRS = 24


@pytest.fixture(scope="module")
def gold_pairs():
    """The first gold pairs of the sample, as (zh texts, en texts), aligned."""
    base = shared_path("data", "bucc2018", "zh-en") / "zh-en.sample"
    zh, en = read_sentences(f"{base}.zh"), read_sentences(f"{base}.en")
    pairs = sorted(read_gold(f"{base}.gold"))[:N_PAIRS]
    return [zh.text_of(s) for s, _ in pairs], [en.text_of(t) for _, t in pairs]


# e5's cosines crowd into a narrow band (0.7-0.9 here; measured gap 0.115), USE's spread wide (0.655)
@pytest.mark.parametrize("name, dim, gap", [("use", 512, 0.4), ("e5", 384, 0.08)])
def test_encoder_finds_translations_among_the_gold_pairs(gold_pairs, name, dim, gap):
    zh, en = gold_pairs
    enc = get_encoder(name, threads=1)
    assert enc.dim == dim and enc.name == name
    a = enc.encode(zh + [""], batch_size=5)  # batches of 5: the last one partial
    b = enc.encode(en)
    assert a.shape == (N_PAIRS + 1, dim) and b.shape == (N_PAIRS, dim)
    assert a.dtype == np.float32 and b.dtype == np.float32
    assert np.allclose(np.linalg.norm(a[:-1], axis=1), 1.0, atol=1e-5)
    assert not a[-1].any()  # an empty line gets a zero vector: it matches nothing
    # batching does not change a sentence's vector
    assert np.allclose(a[:-1], enc.encode(zh, batch_size=256), atol=1e-5)
    # each Chinese sentence's nearest English one among the 24 is its translation
    nearest = (a[:-1] @ b.T).argmax(axis=1)
    assert (nearest == np.arange(N_PAIRS)).sum() >= N_PAIRS - 2
    # and a translation is closer than the average other sentence by a clear gap
    sim = a[:-1] @ b.T
    off = (sim.sum(axis=1) - np.diag(sim)) / (N_PAIRS - 1)
    assert (np.diag(sim) - off).mean() > gap


def test_unknown_encoder_is_a_clear_error():
    assert {"use", "e5"} <= set(ENCODERS)
    with pytest.raises(TrieMineError, match="unknown sentence encoder 'usee'.*choose from"):
        get_encoder("usee")
