"""Compact trie vs a reference dict-of-dicts trie (hypothesis), file format and bad input."""
from __future__ import annotations

import os
import pickle
import struct
import tempfile
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triemine.errors import InputError, TrieFormatError
from triemine.trie import Trie
from triemine.trie.fileformat import _HEADER, FORMAT_VERSION

EOS = 2
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Small alphabets give many shared prefixes; the extremes 0 and 65534 test the uint16 range.
token = st.one_of(st.sampled_from([0, 1, 3, 4, 5, 65534]), st.integers(0, 65534)).filter(
    lambda t: t != EOS)
sequence = st.lists(token, min_size=1, max_size=8).map(lambda s: tuple(s) + (EOS,))


@st.composite
def corpus(draw):
    seqs = draw(st.lists(sequence, min_size=0, max_size=40))
    # duplicates of earlier sequences under other line ids, and line ids shared by sequences
    if seqs:
        seqs += draw(st.lists(st.sampled_from(seqs), max_size=5))
    lids = draw(st.lists(st.integers(0, 12), min_size=len(seqs), max_size=len(seqs)))
    return seqs, lids


class RefTrie:
    """Reference: nested dicts, terminals keyed by sequence."""

    def __init__(self, seqs, lids):
        self.root: dict = {}
        self.terms: dict = {}
        for s, lid in zip(seqs, lids):
            node = self.root
            for t in s:
                node = node.setdefault(t, {})
            self.terms.setdefault(tuple(s), set()).add(lid)

    def prefixes(self):
        stack = [((), self.root)]
        while stack:
            prefix, node = stack.pop()
            yield prefix, node
            for t, child in node.items():
                stack.append((prefix + (t,), child))


def _walk_all(trie: Trie, ref: RefTrie):
    """Map every reference prefix to its node in the compact trie."""
    nodes = {}
    for prefix, _ in ref.prefixes():
        nodes[prefix] = trie.walk(prefix)
    return nodes


@SETTINGS
@given(corpus())
def test_build_matches_reference(data):
    seqs, lids = data
    trie = Trie.build(seqs, lids, eos=EOS)
    ref = RefTrie(seqs, lids)
    nodes = _walk_all(trie, ref)
    assert trie.n_nodes == len(nodes) == len(set(nodes.values()))
    assert all(v >= 0 for v in nodes.values())
    for prefix, rnode in ref.prefixes():
        node = nodes[prefix]
        keys, child_ids = trie.children(node)
        assert keys.tolist() == sorted(rnode)
        assert [nodes[prefix + (k,)] for k in sorted(rnode)] == child_ids.tolist()
        for k in rnode:
            assert trie.step(node, k) == nodes[prefix + (k,)]
        expect = ref.terms.get(prefix, set())
        assert sorted(trie.terminal_ids(node).tolist()) == sorted(expect)
        assert trie.contains(prefix) == bool(expect)
    assert len(trie) == sum(len(v) for v in ref.terms.values())
    assert trie.n_terminals == len(ref.terms)
    assert trie.n_lines == len(set(lids))
    assert trie.depth == max((len(s) for s in seqs), default=0)
    assert [(s, sorted(ids.tolist())) for s, ids in trie] == \
        sorted((s, sorted(v)) for s, v in ref.terms.items())


@SETTINGS
@given(corpus())
def test_bfs_layout_invariants(data):
    seqs, lids = data
    trie = Trie.build(seqs, lids, eos=EOS)
    fc = trie.first_child.astype(np.int64)
    n = trie.n_nodes
    assert fc[0] == 1 and fc[-1] == n and np.all(np.diff(fc) >= 0)
    has_children = fc[1:] > fc[:-1]
    assert np.all(fc[:-1][has_children] > np.arange(n)[has_children])  # children come later
    for v in range(n):
        ks = trie.keys[fc[v]:fc[v + 1]].astype(np.int64)
        assert np.all(np.diff(ks) > 0)  # strictly sorted
    # terminals are exactly the nodes entered by EOS, and they are leaves
    eos_nodes = np.flatnonzero(trie.keys == EOS)
    assert trie.term_nodes.tolist() == eos_nodes.tolist()
    assert np.all(fc[eos_nodes] == fc[eos_nodes + 1])
    assert trie.nbytes >= 6 * n and trie.node_nbytes == 6 * n + 4


@SETTINGS
@given(corpus(), st.data())
def test_batched_queries_match_single(data, draw):
    seqs, lids = data
    trie = Trie.build(seqs, lids, eos=EOS)
    n = trie.n_nodes
    nodes = draw.draw(st.lists(st.integers(-1, n - 1), max_size=30))
    toks = draw.draw(st.lists(st.one_of(st.integers(-3, 7), st.integers(65530, 70000)),
                              min_size=len(nodes), max_size=len(nodes)))
    out = trie.step_many(np.array(nodes, dtype=np.int64), np.array(toks, dtype=np.int64))
    assert out.dtype == np.int64
    assert out.tolist() == [trie.step(v, t) for v, t in zip(nodes, toks)]
    offs, keys, child = trie.children_many(np.array(nodes, dtype=np.int64))
    assert offs.shape == (len(nodes) + 1,)
    for i, v in enumerate(nodes):
        if v == -1:
            assert offs[i + 1] == offs[i]
            continue
        k, c = trie.children(v)
        assert keys[offs[i]:offs[i + 1]].tolist() == k.tolist()
        assert child[offs[i]:offs[i + 1]].tolist() == c.tolist()
    term = trie.is_terminal_many(nodes)
    toffs, tids = trie.terminal_ids_many(nodes)
    for i, v in enumerate(nodes):
        ids = trie.terminal_ids(v).tolist() if v >= 0 else []
        assert term[i] == bool(ids)
        assert tids[toffs[i]:toffs[i + 1]].tolist() == ids


@SETTINGS
@given(corpus())
def test_save_load_round_trip(data):
    seqs, lids = data
    trie = Trie.build(seqs, lids, eos=EOS, metadata={"source": "hyp", "n": len(seqs)})
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.trie")
        trie.save(path)
        loaded = Trie.load(path)
        for name in ("keys", "first_child", "term_nodes", "term_offsets", "term_ids"):
            assert np.array_equal(getattr(loaded, name), getattr(trie, name))
        assert (loaded.eos, loaded.depth, loaded.n_lines, len(loaded)) == \
            (trie.eos, trie.depth, trie.n_lines, len(trie))
        assert loaded.metadata == {"source": "hyp", "n": len(seqs)}
        assert [(s, i.tolist()) for s, i in loaded] == [(s, i.tolist()) for s, i in trie]
        for s in seqs:
            assert loaded.contains(s)
        del loaded


def test_loaded_arrays_are_readonly_memmaps(tmp_path):
    trie = Trie.build([(5, 6, EOS), (5, 7, EOS)])
    trie.save(tmp_path / "t.trie")
    loaded = Trie.load(tmp_path / "t.trie")
    base = loaded.keys
    while base.base is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap)
    assert not loaded.keys.flags.writeable and not trie.keys.flags.writeable
    with pytest.raises(ValueError):
        loaded.first_child[0] = 7
    again = pickle.loads(pickle.dumps(loaded))
    assert again.path == loaded.path and again.contains((5, 7, EOS))
    built = pickle.loads(pickle.dumps(trie))
    assert built.contains((5, 6, EOS)) and not built.contains((5, 6))


def test_step_semantics_and_node_range():
    trie = Trie.build([(10, 11, EOS), (10, EOS), (12, EOS)], eos=EOS)
    a = trie.step(0, 10)
    assert a > 0 and trie.step(a, 11) > 0 and trie.step(a, 12) == -1
    assert trie.step(-1, 10) == -1 and trie.step(0, 70000) == -1 and trie.step(0, -5) == -1
    assert trie.terminal_ids(-1).size == 0 and trie.children(-1)[0].size == 0
    assert trie.walk((10, 99, 11)) == -1
    for bad in (trie.n_nodes, -2, 10**12):
        with pytest.raises(IndexError):
            trie.step(bad, 10)
        with pytest.raises(IndexError):
            trie.step_many([0, bad], [10, 10])
        with pytest.raises(IndexError):
            trie.children_many([bad])
    with pytest.raises(ValueError):
        trie.step_many([0, 0], [10])


@pytest.mark.parametrize("seqs,line,problem", [
    ([(5, EOS), (5, 6)], 2, "does not end with EOS"),
    ([(5, EOS), (EOS,)], 2, "empty sentence"),
    ([(5, EOS), (5, EOS), ()], 3, "empty sequence"),
    ([(65535, EOS)], 1, "token id 65535 out of range"),
    ([(5, EOS), (1, -1, EOS)], 2, "token id -1 out of range"),
    ([(5, EOS), (5, EOS, 6, EOS)], 2, "EOS (2) inside"),
])
def test_bad_sequences(seqs, line, problem):
    with pytest.raises(InputError) as info:
        Trie.build(seqs, eos=EOS)
    assert info.value.line == line and problem in info.value.problem
    assert f"<sequences>:{line}: " in str(info.value)
    with pytest.raises(InputError) as info:
        Trie.build(seqs, eos=EOS, path="corpus.en", lines=[10 * (i + 1) for i in range(len(seqs))])
    assert str(info.value).startswith(f"corpus.en:{10 * line}: ")


def test_first_error_in_line_order_and_bad_line_ids():
    with pytest.raises(InputError) as info:
        Trie.build([(5, EOS), (70000, EOS), (5, 6)], eos=EOS)  # two problems: report line 2
    assert info.value.line == 2
    with pytest.raises(InputError, match="line id -3"):
        Trie.build([(5, EOS)], [-3])
    with pytest.raises(InputError, match="integers"):
        Trie.build([(5.5, EOS)])


def test_from_arrays_fast_path_equals_build():
    rng = np.random.default_rng(0)
    seqs = [tuple(rng.integers(3, 40, size=rng.integers(1, 6)).tolist()) + (EOS,
                                                                            ) for _ in range(300)]
    flat = np.concatenate([np.array(s, dtype=np.uint16) for s in seqs])
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])])
    a = Trie.from_arrays(flat, offsets, np.arange(300) // 2, eos=EOS)
    b = Trie.build(seqs, [i // 2 for i in range(300)], eos=EOS)
    assert np.array_equal(a.keys, b.keys) and np.array_equal(a.first_child, b.first_child)
    assert np.array_equal(a.term_ids, b.term_ids) and a.n_lines == 150


# -- corrupted, truncated and foreign files --------------------------------------------------

@pytest.fixture()
def trie_file(tmp_path):
    seqs = [(5, 6, EOS), (5, 7, 8, EOS), (9, EOS), (5, 6, EOS)]
    Trie.build(seqs, [0, 1, 2, 3], metadata={"k": "v"}).save(tmp_path / "ok.trie")
    return tmp_path / "ok.trie"


def test_every_truncation_is_a_clear_error(trie_file, tmp_path):
    data = trie_file.read_bytes()
    bad = tmp_path / "cut.trie"
    for n in range(len(data)):
        bad.write_bytes(data[:n])
        with pytest.raises(TrieFormatError) as info:
            Trie.load(bad)
        assert str(bad) in str(info.value)
        assert "truncated" in info.value.problem or "bad magic" in info.value.problem


def test_every_byte_flip_is_detected(trie_file, tmp_path):
    data = trie_file.read_bytes()
    bad = tmp_path / "flip.trie"
    for i in range(len(data)):
        mutated = bytearray(data)
        mutated[i] ^= 0x41
        bad.write_bytes(bytes(mutated))
        with pytest.raises(TrieFormatError):
            Trie.load(bad)
        # Without payload verification a flip may load, but queries must never crash.
        try:
            t = Trie.load(bad, verify=False)
        except TrieFormatError:
            continue
        t.step_many(np.arange(t.n_nodes), np.full(t.n_nodes, 5))
        t.children_many(np.arange(t.n_nodes))
        t.terminal_ids_many(np.arange(t.n_nodes))
        list(t)


def _rewrite_header(data: bytes, **changes) -> bytes:
    fields = list(_HEADER.unpack(data[:_HEADER.size]))
    names = ["magic", "version", "eos", "n_nodes", "n_term", "n_ids", "n_lines", "depth",
             "meta_len", "payload_crc", "head_crc"]
    for k, v in changes.items():
        fields[names.index(k)] = v
    head = _HEADER.pack(*fields)
    head = head[:-4] + struct.pack("<I", zlib.crc32(head[:-4]))
    return head + data[_HEADER.size:]


def test_foreign_version_trailing_and_inconsistent_files(trie_file, tmp_path):
    data = trie_file.read_bytes()
    bad = tmp_path / "bad.trie"
    cases = {
        b"hello world, this is a text file and not a trie at all.\n" * 3: "bad magic",
        _rewrite_header(data, version=FORMAT_VERSION + 1): f"version {FORMAT_VERSION + 1}",
        data + b"\0" * 8: "trailing bytes",
        _rewrite_header(data, n_nodes=2**40): "impossible sizes",
        _rewrite_header(data, n_ids=9): "truncated",
    }
    for content, problem in cases.items():
        bad.write_bytes(content)
        with pytest.raises(TrieFormatError, match=problem):
            Trie.load(bad)
    with pytest.raises(TrieFormatError, match="cannot open"):
        Trie.load(tmp_path / "missing.trie")
    with pytest.raises(TrieFormatError, match="directory"):
        Trie.load(tmp_path)
    # a structurally broken first_child with a *valid* checksum is still refused
    trie = Trie.load(trie_file)
    fc = np.array(trie.first_child)
    fc[1] = trie.n_nodes + 5
    broken = Trie(np.array(trie.keys), fc, np.array(trie.term_nodes), np.array(trie.term_offsets),
                  np.array(trie.term_ids), eos=EOS, depth=trie.depth, n_lines=trie.n_lines)
    broken.save(bad)
    with pytest.raises(TrieFormatError, match="structure"):
        Trie.load(bad)


def test_node_limit_is_a_clear_error(monkeypatch):
    """Offsets are uint32: a trie beyond the limit fails clearly (limit lowered to test it)."""
    import triemine.trie.core as core
    monkeypatch.setattr(core, "MAX_NODES", 10)
    Trie.build([(5, 6, 7, EOS), (5, 6, 8, EOS)])  # 7 nodes: fine
    with pytest.raises(InputError, match="exceed 10 nodes"):
        Trie.build([(5, 6, 7, EOS), (9, 10, 11, 12, EOS), (13, EOS)])


def _resave(trie, path, **changes):
    """Write ``trie`` with some arrays or header fields replaced, checksums valid."""
    arrays = {k: np.array(getattr(trie, k)) for k in
              ("keys", "first_child", "term_nodes", "term_offsets", "term_ids")}
    fields = {"eos": trie.eos, "depth": trie.depth, "n_lines": trie.n_lines,
              "metadata": dict(trie.metadata)}
    for k, v in changes.items():
        (arrays if k in arrays else fields)[k] = v
    Trie(arrays["keys"], arrays["first_child"], arrays["term_nodes"], arrays["term_offsets"],
         arrays["term_ids"], **fields).save(path)


def test_valid_checksums_but_wrong_content_are_refused(trie_file, tmp_path):
    """Issue 9's probe: files written by a buggy or hostile tool, checksums recomputed."""
    trie = Trie.load(trie_file)
    bad = tmp_path / "bad.trie"
    keys = np.array(trie.keys)
    kids = trie.children(0)[1]
    swapped = keys.copy()
    swapped[kids[0]], swapped[kids[1]] = keys[kids[1]], keys[kids[0]]
    not_eos = keys.copy()
    not_eos[trie.term_nodes[0]] = 77
    cases = [
        (dict(keys=swapped), "not sorted by token"),
        (dict(depth=3), "header depth 3"),
        (dict(depth=trie.depth + 1), "levels"),
        (dict(n_lines=trie.n_lines + 1), "lines"),
        (dict(keys=not_eos), "EOS nodes and terminals disagree"),
        (dict(metadata={"dict_size": "abc"}), "dict_size is 'abc'"),
        (dict(metadata={"dict_size": True}), "dict_size is True"),
        (dict(metadata={"dict_fingerprint": 5}), "dict_fingerprint is 5"),
    ]
    for change, problem in cases:
        _resave(trie, bad, **change)
        with pytest.raises(TrieFormatError, match=problem):
            Trie.load(bad)
    _resave(trie, bad)  # unchanged: loads and answers as the original
    assert [(q, ids.tolist()) for q, ids in Trie.load(bad)] == \
        [(q, ids.tolist()) for q, ids in trie]


def test_a_wrong_trie_file_is_a_clean_cli_error(tiny_model, tiny_model_dir, tmp_path, capsys):
    """Issue 9: a trie whose header depth was rewritten to 3 (checksums valid) made trie-mine
    exit 0 with no rows; now it is exit 2 with a message naming the file, no traceback."""
    from triemine.cli import mine_main
    from triemine.testing.tiny_model import synthetic_pairs

    pairs = synthetic_pairs(20, seed=5, min_len=4)
    (tmp_path / "src.txt").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    seqs = [tiny_model.encode_target(t).tolist() for _, t in pairs]
    trie = Trie.build(seqs, eos=tiny_model.tgt_dict.eos())
    bad = tmp_path / "bad.trie"
    _resave(trie, bad, depth=3)
    code = mine_main(["--candidates", "trie", "--pre-expansion", "--model", str(tiny_model_dir),
                      "--source",
                      str(tmp_path / "src.txt"), "--target", str(tmp_path / "tgt.txt"),
                      "-o", str(tmp_path / "o.tsv"), "--trie", str(bad), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"{bad}: corrupted trie structure (header depth 3" in err
