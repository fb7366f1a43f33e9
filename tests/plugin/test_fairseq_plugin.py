"""The fairseq plugin: stock fairseq-interactive / fairseq-generate with --task trie_translation."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from triemine.testing.tiny_model import synthetic_pairs
from triemine.plugin import user_dir
from triemine.trie import Trie

pytestmark = pytest.mark.cluster

PAIRS = synthetic_pairs(12, seed=31)
OTHER = [t for _, t in synthetic_pairs(20, seed=32)]
BIN = Path(os.environ.get("VIRTUAL_ENV", Path(__file__).resolve().parents[2] / ".venv")) / "bin"


def _tool(name):
    exe = BIN / name
    if not exe.exists():
        exe = shutil.which(name)
    assert exe, f"{name} not installed"
    return str(exe)


@pytest.fixture(scope="module")
def plugin_setup(tiny_model, tiny_model_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plugin")
    texts = [t for _, t in PAIRS[:8]] + OTHER
    seqs = [tiny_model.encode_target(t).tolist() for t in texts]
    trie_path = tmp / "targets.trie"
    Trie.build(seqs, eos=tiny_model.tgt_dict.eos()).save(trie_path)
    allowed = {" ".join(tiny_model.tgt_dict[i] for i in s[:-1]) for s in seqs}
    sp = tiny_model.source_spm
    src_lines = [" ".join(sp.encode(s, out_type=str)) for s, _ in PAIRS]
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    return tmp, trie_path, allowed, src_lines, env


def _hypotheses(stdout):
    hyps = {}
    for line in stdout.splitlines():
        if line.startswith("H-"):
            sid, _, text = line.split("\t", 2)
            hyps.setdefault(int(sid[2:]), []).append(text)
    return hyps


@pytest.mark.parametrize("mode,generator", [("pre", "algorithm1"), ("post", "fairseq")])
def test_fairseq_interactive_with_trie_task(plugin_setup, tiny_model_dir, mode, generator):
    tmp, trie_path, allowed, src_lines, env = plugin_setup
    cmd = [_tool("fairseq-interactive"), str(tiny_model_dir), "--path",
           str(tiny_model_dir / "checkpoint.pt"), "--source-lang", "src", "--target-lang", "tgt",
           "--user-dir", user_dir(), "--task", "trie_translation", "--trie", str(trie_path),
           "--trie-mode", mode, "--trie-generator", generator, "--trie-debug", "--beam", "5",
           "--nbest", "3", "--buffer-size", "4", "--batch-size", "4"]
    r = subprocess.run(cmd, input="\n".join(src_lines) + "\n", capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    hyps = _hypotheses(r.stdout)
    assert hyps, r.stdout[-2000:]
    for texts in hyps.values():
        for t in texts:
            assert t in allowed
    if mode == "pre":
        assert set(hyps) == set(range(len(src_lines)))
    else:
        assert len(set(hyps) & set(range(8))) >= 6  # post: only where the translation exists


def test_fairseq_generate_with_trie_task(plugin_setup, tiny_model_dir):
    tmp, trie_path, allowed, src_lines, env = plugin_setup
    raw = tmp / "raw"
    raw.mkdir(exist_ok=True)
    (raw / "test.src").write_text("\n".join(src_lines) + "\n", encoding="utf-8")
    from triemine.models.model_dir import load_model_dir
    sp_t = load_model_dir(tiny_model_dir).target_spm
    (raw / "test.tgt").write_text("\n".join(" ".join(sp_t.encode(t, out_type=str))
                                            for _, t in PAIRS) + "\n", encoding="utf-8")
    bin_dir = tmp / "bin"
    subprocess.run([_tool("fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt",
                    "--testpref", str(raw / "test"), "--destdir", str(bin_dir),
                    "--srcdict", str(tiny_model_dir / "dict.src.txt"),
                    "--tgtdict", str(tiny_model_dir / "dict.tgt.txt"), "--workers", "1"],
                   check=True, capture_output=True, env=env, timeout=300)
    r = subprocess.run([_tool("fairseq-generate"), str(bin_dir), "--path",
                        str(tiny_model_dir / "checkpoint.pt"), "--gen-subset", "test",
                        "--user-dir", user_dir(), "--task", "trie_translation",
                        "--trie", str(trie_path), "--trie-mode", "pre", "--beam", "4",
                        "--batch-size", "4", "--required-batch-size-multiple", "1"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    hyps = _hypotheses(r.stdout)
    assert set(hyps) == set(range(len(PAIRS)))
    assert all(t in allowed for texts in hyps.values() for t in texts)
    # the 8 sources whose translation is in the trie get it
    refs = {" ".join(sp_t.encode(t, out_type=str)) for _, t in PAIRS[:8]}
    assert sum(hyps[i][0] in refs for i in range(8)) >= 6


# ------------------------------------------------------------- the model directory's loader


def test_model_dir_loads_without_the_plugin_in_a_fresh_process(tiny_model_dir):
    """``triemine.decoding.load_model_dir`` registers the task and architecture itself (through
    the hook :mod:`triemine.decoding` registers, not through the --user-dir package); the
    loader of ``triemine.models`` alone loads the directory without importing decoding."""
    check = ("print(len(md.tgt_dict)); "
             "assert not any(m.startswith('triemine.plugin') for m in sys.modules), "
             "sorted(m for m in sys.modules if m.startswith('triemine.plugin'))")
    with_task = ("import sys; from triemine.decoding import load_model_dir; "
                 "md = load_model_dir(sys.argv[1]); "
                 "from fairseq.tasks import TASK_REGISTRY; "
                 "assert 'trie_translation' in TASK_REGISTRY; " + check)
    models_only = ("import sys; from triemine.models.model_dir import load_model_dir; "
                   "md = load_model_dir(sys.argv[1]); "
                   "assert 'triemine.decoding' not in sys.modules; " + check)
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    for code in (with_task, models_only):
        r = subprocess.run([sys.executable, "-c", code, str(tiny_model_dir)], capture_output=True,
                           text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert int(r.stdout.split()[-1]) > 4


def test_weights_digest_is_the_checkpoint_sha256_prefix(tiny_model, tiny_model_dir, tmp_path):
    from triemine.models.model_dir import WEIGHTS_DIGEST_CHARS, weights_digest
    from triemine.io.keys import file_sha256

    expected = file_sha256(tiny_model_dir / "checkpoint.pt")[:WEIGHTS_DIGEST_CHARS]
    assert WEIGHTS_DIGEST_CHARS == 16
    assert weights_digest(tiny_model_dir) == expected
    assert tiny_model.weights_digest == expected
    assert tiny_model.__dict__["weights_digest"] == expected  # computed once, then kept
    assert weights_digest(tmp_path) == "no-checkpoint"
