"""The rows the exact pass adds for the judge (light: no torch), read by the scorer, the sharded
scoring stage and the given pairs' features."""
# what the exact pass adds for the judge (``coverage``), one row a pair each: the share of the
# source's pieces the target leaves uncovered (:func:`triemine.scoring.forced.uncovered_share`),
# the log-probability of the target's EOS and the least log-probability of its other tokens
# (:func:`triemine.scoring.forced.token_extremes`)
JUDGE_ROWS = ("uncovered", "eos_lp", "tok_min_lp")
