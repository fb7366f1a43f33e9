"""fairseq task ``trie_translation``: ``translation`` with trie-constrained beam search.

Use through the plugin::

    fairseq-generate DATA --user-dir $(trie-mine-user-dir) --task trie_translation \
        --path DIR/checkpoint.pt --trie targets.trie --trie-mode pre --beam 5

Options: ``--trie FILE`` (a :class:`triemine.trie.Trie` saved with ``Trie.save``),
``--trie-mode pre|post``, ``--trie-debug`` (verify cached trie nodes every step) and
``--trie-generator algorithm1|fairseq``: ``algorithm1`` (default) is
:class:`~triemine.decoding.generator.TrieSequenceGenerator` (shrinking beam, early stop, stops at
the trie depth); ``fairseq`` runs :class:`~triemine.decoding.search.TrieConstrainedBeamSearch`
inside fairseq's stock ``SequenceGenerator`` with ``max_len_b`` set to the trie depth minus one
(fairseq's ``max_len`` counts the tokens before EOS).

Registration is idempotent: fairseq's ``register_task`` returns the existing class when the name is
already registered, and this module is imported once whether it comes from Python or
``--user-dir``.
"""
# no "from __future__ import annotations": fairseq reads the dataclass field types

from dataclasses import dataclass, field
from typing import Optional

import triemine.models.fairseq_import  # noqa: F401  (before fairseq: logging)
from fairseq.sequence_generator import SequenceGenerator
from fairseq.tasks import TASK_REGISTRY, register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from triemine.decoding.generator import TrieSequenceGenerator
from triemine.decoding.search import TrieConstrainedBeamSearch
from triemine.errors import InputError
from triemine.models import marian  # noqa: F401  (registers the Marian architectures)
from triemine.trie import Trie
from triemine.trie.build import check_trie_dict

TASK_NAME = "trie_translation"


def load_trie_for_dict(path, tgt_dict):
    """Load a trie file and check it was built for ``tgt_dict`` (EOS id, size, fingerprint)."""
    trie = Trie.load(path)
    check_trie_dict(trie, tgt_dict, path)
    return trie


@dataclass
class TrieTranslationConfig(TranslationConfig):
    trie: Optional[str] = field(default=None, metadata={"help": "trie file (Trie.save format)"})
    trie_mode: str = field(default="pre", metadata={"help": "pre | post expansion"})
    trie_debug: bool = field(default=False, metadata={
        "help": "check every live hypothesis's cached trie node against a walk from the root"})
    trie_generator: str = field(default="algorithm1", metadata={
        "help": "algorithm1 (shrinking beam, early stop) | fairseq (stock SequenceGenerator)"})


if TASK_NAME in TASK_REGISTRY:  # imported twice under different module names: reuse
    TrieTranslationTask = TASK_REGISTRY[TASK_NAME]
else:
    @register_task(TASK_NAME, dataclass=TrieTranslationConfig)
    class TrieTranslationTask(TranslationTask):
        """``translation`` whose generator is constrained to the target sentences of a trie."""

        cfg: TrieTranslationConfig

        def __init__(self, cfg, src_dict, tgt_dict):
            super().__init__(cfg, src_dict, tgt_dict)
            self._trie = None

        @property
        def trie(self):
            if self._trie is None:
                if not self.cfg.trie:
                    raise InputError("--trie FILE is required by --task trie_translation")
                self._trie = load_trie_for_dict(self.cfg.trie, self.target_dictionary)
            return self._trie

        def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None,
                            prefix_allowed_tokens_fn=None):
            mode = self.cfg.trie_mode
            if mode not in ("pre", "post"):
                raise InputError(f"--trie-mode must be pre or post, got {mode!r}")
            search = TrieConstrainedBeamSearch(self.target_dictionary, self.trie, mode=mode,
                                               debug=bool(self.cfg.trie_debug))
            beam = getattr(args, "beam", 5)
            lenpen = getattr(args, "lenpen", 1.0)
            if self.cfg.trie_generator == "fairseq":
                return SequenceGenerator(
                    models, self.target_dictionary, beam_size=beam, max_len_a=0,
                    max_len_b=max(1, int(self.trie.depth) - 1), min_len=getattr(args, "min_len", 1),
                    normalize_scores=not getattr(args, "unnormalized", False), len_penalty=lenpen,
                    unk_penalty=getattr(args, "unkpen", 0.0), search_strategy=search)
            if self.cfg.trie_generator != "algorithm1":
                raise InputError("--trie-generator must be algorithm1 or fairseq")
            return TrieSequenceGenerator(models, self.target_dictionary, search=search,
                                         beam_size=beam, len_penalty=lenpen)
