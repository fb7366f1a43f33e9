"""Exact sentence scores of the MT model: log P(y | x) by teacher forcing and the target priors
log P(y | empty source) (:mod:`triemine.scoring.forced`, :mod:`triemine.scoring.prior`)."""


def forced_scoring():
    """:mod:`triemine.scoring.forced`, imported on first use: it loads torch and fairseq
    (seconds), which a caller that only plans work or names files need not pay for."""
    from triemine.scoring import forced

    return forced
