"""Exact sentence scores of the MT model: log P(y | x) by teacher forcing and the target priors
log P(y | empty source) (:mod:`triemine.scoring.forced`, :mod:`triemine.scoring.prior`)."""
