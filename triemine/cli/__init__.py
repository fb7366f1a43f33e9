"""Command-line layer only: argument parsing, progress, error reporting.

Each console script in setup.cfg maps to one ``*_main`` function here: ``_NAME_parser()`` builds
its flags, ``_NAME(parser, args)`` checks them and calls the work, which lives in the
subpackages so that it can be used from Python without the CLI. Errors derived from
``TrieMineError`` are printed as ``prog: error: file:line: problem`` with exit status 2.

Modules: one per console script (``build``, ``mine``, ``user_dir``, ``import_model``,
``filter``, ``evaluate``, ``prepare``, ``score``, ``train_judge``, ``review``), ``arguments``
(argument helpers, and running a command's work with its errors reported). Every ``*_main``
is reached here (imported on first use): the entry points name ``triemine.cli:NAME_main``.
"""

_COMMANDS = {
    "eval_main": "triemine.cli.evaluate",
    "filter_main": "triemine.cli.filter",
    "import_main": "triemine.cli.import_model",
    "mine_main": "triemine.cli.mine",
    "prepare_main": "triemine.cli.prepare",
    "review_main": "triemine.cli.review",
    "score_main": "triemine.cli.score",
    "train_judge_main": "triemine.cli.train_judge",
    "trie_build_main": "triemine.cli.build",
    "user_dir_main": "triemine.cli.user_dir",
}

__all__ = sorted(_COMMANDS)


def __getattr__(name):
    if name in _COMMANDS:
        import importlib
        return getattr(importlib.import_module(_COMMANDS[name]), name)
    raise AttributeError(name)
