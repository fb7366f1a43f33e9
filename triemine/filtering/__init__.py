"""Filtering of mined pairs: the registry of scores, filters and selection rules
(:mod:`triemine.filtering.registry`) and the Bicleaner scorer
(:mod:`triemine.filtering.bicleaner`)."""
