"""Preparing raw (web) text for mining: clean and filter each line, keep every line in place.

``trie-mine-prepare`` (:func:`triemine.cli.prepare_main`) and :func:`prepare` read a corpus
(plain text or BUCC ``id<TAB>text``; plain, gzip, xz or zstd) a batch of lines at a time, run the
named filters of :data:`FILTERS` (``markup``, ``length``, ``script``, ``boilerplate``, ``lang``)
and write the same number of lines, a dropped one empty (its TSV id kept), with a report of what
each filter dropped.  The mining job skips empty lines, so its line numbers and ids are the raw
corpus's.  See docs/prepare.md.
"""
from triemine.prepare.filters import FILTERS, LineFilter, clean
from triemine.prepare.run import PrepareOptions, prepare
from triemine.prepare.textio import open_output, read_batches

__all__ = ["FILTERS", "LineFilter", "PrepareOptions", "clean", "open_output", "prepare",
           "read_batches"]
