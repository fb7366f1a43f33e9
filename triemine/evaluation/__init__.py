"""triemine.evaluation: how good a run's pairs are.

Against gold: ``bucc`` (BUCC files), ``metrics`` (P/R/F1), ``pipeline`` (trie-mine-eval:
candidates, filters, thresholds, folds), ``splits`` and ``slices`` (the shared sets), ``report``
(plots and the HTML report). Without gold: ``quality`` (the stratified precision a reader
measures and its interval; what ``prob`` promises is :mod:`triemine.judging.quality`),
``review`` (trie-mine-review's sheet: the pairs drawn and its fingerprint), ``review_page`` (the
sheet as one HTML page), ``review_answers`` (the exported answers read back, their precision,
the gold file)."""
