"""fairseq imported without touching the program's logging: importing this module imports
fairseq (every model and task module it registers), during which some of fairseq's modules call
``logging.basicConfig`` (one at ``DEBUG``) and log at ``INFO`` ("Please install tensorboardX").
Where the program had configured no logging, the root logger is left as it was (no handler, its
level), so ``triemine.mine`` prints nothing of fairseq's on stderr; a program's own logging
set-up (``trie-mine``'s) is left alone.  The modules that import fairseq at their top import this
one first."""
from __future__ import annotations

import logging


def _quiet_import() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    fairseq_logger = logging.getLogger("fairseq")
    fairseq_level = fairseq_logger.level
    placeholder = logging.NullHandler()
    if not handlers:  # basicConfig configures nothing where the root has a handler
        root.addHandler(placeholder)
    fairseq_logger.setLevel(logging.WARNING)  # its import-time INFO lines
    try:
        import fairseq  # noqa: F401  (imports its models and tasks)
    finally:
        fairseq_logger.setLevel(fairseq_level)
        for h in list(root.handlers):
            if h not in handlers:
                root.removeHandler(h)
        root.setLevel(level)


_quiet_import()
