"""triemine.io: reading and writing corpora and files, below every other subpackage.

Modules: ``corpus`` (a corpus's sentences and ids), ``textfile`` (text and JSON files read with
their problems named), ``compression`` (gz/xz/zst input and output), ``lineindex`` (line offsets
of large corpora), ``tsv`` (mining TSVs and their ``.meta.json`` sidecars), ``outfile`` (atomic
outputs, output locks, no output that is an input), ``checksum`` (sealed files: arrays and
JSON that carry their checksum), ``paths`` (where the shared data and the cache are:
``TRIEMINE_SHARED``, ``TRIEMINE_CACHE``), ``keys`` (files' content digests and the version of
the keys that outputs, manifests and caches record). They import only
each other and :mod:`triemine.errors`.

The wing's front door: the package's other modules import the names below from
``triemine.io``, never from its modules (``scripts/check_layout.py`` checks it), so the files
inside the wing can be split or joined without touching their users.
"""

from triemine.io.checksum import (TRAILER, cached_npy, crc32_range, discard, dumps_sealed,
                                  json_crc32, load_npy, npy_writer, read_sealed, verify_npy,
                                  write_npy)
from triemine.io.compression import (BLOCK, SUFFIXES, check_uncompressed, codec_of_name,
                                     decompressed, output_file, plain_copy, sniff, write_output)
from triemine.io.corpus import (Corpus, SHOWN, decode_lines, open_corpus, open_pair, read_corpus,
                                sentences, skipped_counts, tsv_votes)
from triemine.io.keys import (KEY_VERSION, file_sha256, input_digest, input_digests, older_key,
                              remember_sha256)
from triemine.io.outfile import (atomic_open, atomic_write, check_distinct, npy_header, output_lock,
                                 output_locks, write_text)
from triemine.io.paths import (BUCC_ZH_EN, DEVSET_ZH_EN, OPUS_MT_ZH_EN_CT2, PARALLEL_DE_EN,
                               PARALLEL_ZH_EN, cache_root, repo_root, shared_path)
from triemine.io.textfile import open_binary, read_bytes, read_json, read_text
from triemine.io.tsv import (DECIMALS, META_SUFFIX, Mined, clean_cell, column_order, count_rows,
                             format_rows, mined_blocks, prepare_resume, read_meta, read_mined,
                             record_bitext, write_meta, write_mined, write_progress,
                             write_row_blocks)

__all__ = ["atomic_open", "atomic_write", "BLOCK", "BUCC_ZH_EN", "cache_root", "cached_npy",
           "check_distinct", "check_uncompressed", "clean_cell", "codec_of_name", "column_order",
           "Corpus", "count_rows", "crc32_range", "decode_lines", "decompressed", "DECIMALS",
           "DEVSET_ZH_EN", "discard", "dumps_sealed", "file_sha256", "format_rows", "input_digest",
           "input_digests", "json_crc32", "KEY_VERSION", "load_npy", "META_SUFFIX", "Mined",
           "mined_blocks", "npy_header", "npy_writer", "older_key", "open_binary", "open_corpus",
           "open_pair", "OPUS_MT_ZH_EN_CT2", "output_file", "output_lock", "output_locks",
           "PARALLEL_DE_EN",
           "PARALLEL_ZH_EN",
           "plain_copy", "prepare_resume", "read_bytes", "read_corpus", "read_json", "read_meta",
           "read_mined", "read_sealed", "read_text", "record_bitext", "remember_sha256",
           "repo_root", "sentences", "shared_path", "SHOWN", "skipped_counts", "sniff", "SUFFIXES",
           "TRAILER", "tsv_votes", "verify_npy", "write_meta", "write_mined", "write_npy",
           "write_output", "write_progress", "write_row_blocks", "write_text"]
