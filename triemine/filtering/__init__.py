"""Filtering of mined pairs: per-word cross-entropy, Bicleaner, and unions of selections."""
from triemine.filtering.ce import CE_COLUMN, select_ce, tune_ce  # noqa: F401
from triemine.filtering.union import (BICLEANER_COLUMN, select_bicleaner,  # noqa: F401
                                      select_ce_or_bicleaner, union_directions)
