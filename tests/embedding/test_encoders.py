"""The two shipped sentence encoders (``use``, the mining job's default, and ``e5``) on real
gold pairs of the BUCC sample, and the registry's error for an unknown name."""
import numpy as np
import pytest

from triemine.embedding.encoders import ENCODERS, get_encoder
from triemine.errors import OutputError, TrieMineError
from triemine.evaluation.bucc import read_gold, read_sentences
from triemine.io.paths import shared_path

N_PAIRS = 24


@pytest.fixture(scope="module")
def gold_pairs():
    """The first gold pairs of the sample, as (zh texts, en texts), aligned."""
    base = shared_path("data", "bucc2018", "zh-en") / "zh-en.sample"
    zh, en = read_sentences(f"{base}.zh"), read_sentences(f"{base}.en")
    pairs = sorted(read_gold(f"{base}.gold"))[:N_PAIRS]
    return [zh.text_of(s) for s, _ in pairs], [en.text_of(t) for _, t in pairs]


# e5's cosines crowd into a narrow band (0.7-0.9 here; measured gap 0.115), USE's spread wide
# (0.655)
@pytest.mark.integration
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


def _margin_candidates_whole(nb, per_source, per_target, min_margin):
    """The reference: every list at once, the union deduplicated (forward first), then the cut
    (margin_candidates as it was before it read the lists in blocks)."""
    n_src, k = nb.fwd_idx.shape
    n_tgt, kb = nb.bwd_idx.shape
    s1 = np.repeat(np.arange(n_src), k)
    m1 = nb.margin(s1, nb.fwd_idx.reshape(-1), nb.fwd_sim.reshape(-1)).reshape(n_src, k)
    o1 = np.argsort(-m1, axis=1, kind="stable")[:, :per_source]
    r1 = np.arange(n_src)[:, None]
    t2 = np.repeat(np.arange(n_tgt), kb)
    m2 = nb.margin(nb.bwd_idx.reshape(-1), t2, nb.bwd_sim.reshape(-1)).reshape(n_tgt, kb)
    o2 = np.argsort(-m2, axis=1, kind="stable")[:, :per_target]
    r2 = np.arange(n_tgt)[:, None]
    s = np.concatenate([np.broadcast_to(r1, o1.shape).reshape(-1), nb.bwd_idx[r2, o2].reshape(-1)])
    t = np.concatenate([nb.fwd_idx[r1, o1].reshape(-1), np.broadcast_to(r2, o2.shape).reshape(-1)])
    m = np.concatenate([m1[r1, o1].reshape(-1), m2[r2, o2].reshape(-1)])
    _, first = np.unique(s * n_tgt + t, return_index=True)
    s, t, m = s[first], t[first], m[first]
    keep = m >= min_margin if min_margin is not None else np.ones(len(m), dtype=bool)
    return s[keep], t[keep], m[keep]


@pytest.mark.parametrize("seed", range(6))
def test_margin_candidates_in_blocks_are_the_whole_lists_candidates(seed, tmp_path):
    """Reading the neighbour lists a block at a time (the driver's memory at 10^8 sentences)
    gives the very pairs and margins of the whole lists, for any block size, and so do the
    candidates a range of sources at a time, the backward ones kept in memory or in spill
    files; a pair both directions propose keeps the forward search's margin, even where the two
    cosines differ in their last bits, and the cut applies to that margin."""
    from triemine.embedding.knn import margin_candidate_blocks, margin_candidates, margin_neighbours

    rng = np.random.default_rng(seed)
    n_src, n_tgt, k = int(rng.integers(1, 40)), int(rng.integers(1, 60)), 4
    x = rng.normal(size=(n_src, 8)).astype(np.float32)
    y = rng.normal(size=(n_tgt, 8)).astype(np.float32)
    y[: n_tgt // 3] = y[n_tgt // 3: 2 * (n_tgt // 3)]  # duplicate rows: ties in the lists
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    nb = margin_neighbours(x, y, k)
    nb.bwd_sim = nb.bwd_sim + np.float32(1e-6) * rng.integers(1, 3, nb.bwd_sim.shape)  # last bits
    margins = nb.margin(np.arange(n_src).repeat(nb.fwd_idx.shape[1]), nb.fwd_idx.reshape(-1),
                        nb.fwd_sim.reshape(-1))
    # a cut between the two margins of a pair both directions propose: only the forward one counts
    t0 = int(nb.fwd_idx[0, 0])
    both = np.flatnonzero(nb.bwd_idx[t0] == 0)
    split = []
    if len(both):
        m_f = nb.margin(np.array([0]), np.array([t0]), nb.fwd_sim[0, :1])[0]
        m_b = nb.margin(np.array([0]), np.array([t0]), nb.bwd_sim[t0, both[:1]])[0]
        assert m_b > m_f
        split = [(m_f + m_b) / 2]
    for per_source, per_target in ((2, 1), (1, 1), (4, 0), (0, 3), (9, 9)):
        for min_margin in [None, float(np.median(margins)), 1e9] + split:
            want = _margin_candidates_whole(nb, per_source, per_target, min_margin)
            for block in (1, 3, 7, 1 << 20):
                got = margin_candidates(nb, per_source, per_target, min_margin, block=block)
                for a, b in zip(got, want):
                    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
            for sources, spill in ((1, tmp_path / "s"), (5, tmp_path / "s"), (5, None),
                                   (1 << 18, tmp_path / "s")):
                parts = list(margin_candidate_blocks(nb, per_source, per_target, min_margin,
                                                     block=3, sources=sources, spill=spill))
                assert len(parts) == -(-n_src // sources)
                for r, (s, _t, _m) in enumerate(parts):
                    assert ((s >= r * sources) & (s < (r + 1) * sources)).all()
                for a, b in zip((np.concatenate(p) for p in zip(*parts)), want):
                    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
                assert not (tmp_path / "s").exists()  # the spill files are gone
            assert len(want[0]) or min_margin is not None or not (per_source or per_target)
    assert len(_margin_candidates_whole(nb, 2, 1, None)[0]) >= n_src  # the test is not empty
    (tmp_path / "file").write_text("")
    if n_src > 1:  # spill files that cannot be written: an error naming them
        with pytest.raises(OutputError, match="file/spill"):
            list(margin_candidate_blocks(nb, 2, 1, None, sources=1,
                                         spill=tmp_path / "file" / "spill"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_neighbour_means_in_blocks_and_in_a_mapped_file_are_the_whole_means(dtype, tmp_path):
    """The margin's per-sentence means, computed a block of rows at a time from a strided view
    (the merged lists' records) and written to a mapped file (the driver's memory at 10^8
    sentences), are the bits of one mean over the whole array; a space given a work directory
    keeps them there and proposes the very candidates and margins of one without."""
    from triemine.embedding.knn import row_means
    from triemine.mining.candidates import embedding_space

    rng = np.random.default_rng(7)
    rec = np.zeros(1001, dtype=[("sim", dtype, (4,)), ("idx", "<i8", (4,))])
    rec["sim"] = rng.normal(size=(1001, 4))
    sim = rec["sim"]  # not contiguous, as the mapped lists are
    want = sim.mean(axis=1)
    for block in (1, 7, 1000, 1 << 20):
        for path in (None, tmp_path / f"m{block}.npy"):
            got = row_means(sim, path, block=block)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
            if path is not None:
                assert isinstance(got, np.memmap) and not got.flags.writeable
    assert row_means(np.zeros((3, 0), dtype=np.float32), tmp_path / "e.npy").tolist() == [0] * 3
    assert row_means(np.zeros((0, 4), dtype=np.float32)).shape == (0,)

    x = rng.normal(size=(30, 8)).astype(np.float32)
    y = rng.normal(size=(50, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    plain = embedding_space(x, y, "enc", 4)
    mapped = embedding_space(x, y, "enc", 4, work=tmp_path)
    assert isinstance(mapped.nb.src_mean, np.memmap) and isinstance(mapped.nb.tgt_mean, np.memmap)
    assert sorted(p.name for p in tmp_path.glob("enc.means.*")) == ["enc.means.src.npy",
                                                                    "enc.means.tgt.npy"]
    a, b = plain.candidates(2, 1), mapped.candidates(2, 1)
    assert (
        len(a) >= 30 and a.src.tobytes() == b.src.tobytes() and a.tgt.tobytes() == b.tgt.tobytes()
    )
    for c in plain.columns:
        assert a.col(c).tobytes() == b.col(c).tobytes()


def test_faiss_blas_threshold_counts_queries_or_query_values_by_version():
    """faiss compares its BLAS threshold with the number of queries up to 1.13 and with queries x
    dimensions from 1.14: either way a block of BLAS_FROM_QUERIES queries is the first to go to
    the matrix products."""
    from triemine.embedding.knn import BLAS_FROM_QUERIES, blas_threshold

    assert blas_threshold(512, "1.13.2") == BLAS_FROM_QUERIES
    assert blas_threshold(512, "1.15.1") == BLAS_FROM_QUERIES * 512
    assert blas_threshold(384, "2.0.0") == BLAS_FROM_QUERIES * 384


def test_exact_knn_without_an_index_has_the_bits_of_a_flat_index():
    """The exact search calls faiss's search without building an index (no copy of the
    database): the same bits as an ``IndexFlatIP`` holding the rows, which the job used before
    (its resume keys and the TSVs of earlier runs stay valid), on both of faiss's paths."""
    import faiss

    from triemine.embedding.knn import knn, set_faiss

    rng = np.random.default_rng(5)
    db = rng.standard_normal((5000, 64)).astype(np.float32)
    db /= np.linalg.norm(db, axis=1, keepdims=True)
    for n_q in (2, 37, 700):  # below the BLAS rule, and above it
        q = db[rng.integers(0, 5000, n_q)] + 0.1 * rng.standard_normal((n_q, 64)).astype(np.float32)
        sims, idx = knn(q, db, 4)
        set_faiss(64)
        flat = faiss.IndexFlatIP(64)
        flat.add(db)
        want_s, want_i = flat.search(np.ascontiguousarray(q, dtype=np.float32), 4)
        assert (
            sims.tobytes() == want_s.tobytes()
            and idx.tobytes() == want_i.astype(np.int64).tobytes()
        )


def test_exact_knn_of_a_small_block_is_exact_and_independent_of_earlier_faiss_settings():
    """A block of 20 queries (which faiss 1.14+ would search one by one) gets the brute-force
    neighbours, and the same bits whatever faiss's process-wide threshold was before the call
    (another search of another size in the same worker must not change a result)."""
    import faiss

    from triemine.embedding.knn import knn

    rng = np.random.default_rng(3)
    db = rng.standard_normal((3000, 512)).astype(np.float32)
    q = rng.standard_normal((20, 512)).astype(np.float32)
    db /= np.linalg.norm(db, axis=1, keepdims=True)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    sims, idx = knn(q, db, 4)
    brute = np.argsort(-(q.astype(np.float64) @ db.T.astype(np.float64)), axis=1)[:, :4]
    assert np.array_equal(idx, brute)
    saved = faiss.cvar.distance_compute_blas_threshold
    try:
        faiss.cvar.distance_compute_blas_threshold = 10 ** 9  # one by one, had nothing reset it
        one_by_one = faiss.IndexFlatIP(512)
        one_by_one.add(db)
        seq_sims, _ = one_by_one.search(q, 4)
        assert not np.array_equal(seq_sims, sims)  # the two paths differ in the last bits
        again = knn(q, db, 4)
    finally:
        faiss.cvar.distance_compute_blas_threshold = saved
    assert np.array_equal(again[0], sims) and np.array_equal(again[1], idx)


@pytest.mark.parametrize("query_block,row_block", [(1, 1), (3, 7), (64, 500), (8192, 65536)])
def test_the_device_search_finds_the_exact_neighbours_in_blocks_with_ties_to_the_lower_row(
        query_block, row_block):
    """The exact search off the CPU (torch's products, here on torch's CPU device): the same
    neighbours as faiss's exact search for any blocks, similarities within float32 rounding,
    most similar first and, among tied rows kept, the lower row first, as the grid's merge
    orders them (a duplicated database row ties exactly; faiss itself lists tied rows in its
    heap's order, here the higher first)."""
    from triemine.embedding.knn import device_knn, knn

    rng = np.random.default_rng(9)
    db = rng.standard_normal((900, 32)).astype(np.float32)
    db[450] = db[17]  # an exact tie wherever row 17 is found
    db /= np.linalg.norm(db, axis=1, keepdims=True)
    q = np.concatenate([db[[17, 3, 450]], rng.standard_normal((60, 32)).astype(np.float32)])
    want_s, want_i = knn(q, db, 4)
    order = np.lexsort((want_i, -want_s), axis=1)  # faiss puts tied rows in its heap's order
    want_s, want_i = np.take_along_axis(want_s, order, 1), np.take_along_axis(want_i, order, 1)
    sims, idx = device_knn(q, db, 4, "cpu", query_block=query_block, row_block=row_block)
    assert idx.dtype == np.int64 and sims.dtype == np.float32 and idx.shape == (63, 4)
    assert np.array_equal(idx, want_i)
    np.testing.assert_allclose(sims, want_s, atol=1e-5)
    assert idx[0, :2].tolist() == [17, 450] and idx[2, :2].tolist() == [17, 450]
    assert (np.diff(sims, axis=1) <= 0).all()
    # through knn(): any device but "cpu" (torch's "cpu:0" here) takes the device search
    got = knn(q, db, 4, device="cpu:0")
    assert np.array_equal(got[1], want_i)
    few = knn(q[:2], db[:3], 10, device="cpu:0")  # k above the database: all of its rows
    assert few[1].shape == (2, 3) and sorted(few[1][1].tolist()) == [0, 1, 2]
