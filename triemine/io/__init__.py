"""triemine.io: reading and writing corpora and files, below every other subpackage.

Modules: ``corpus`` (a corpus's sentences and ids), ``textfile`` (text and JSON files read with
their problems named), ``compression`` (gz/xz/zst input and output), ``lineindex`` (line offsets
of large corpora), ``tsv`` (mining TSVs and their ``.meta.json`` sidecars), ``outfile`` (atomic
outputs, output locks, no output that is an input), ``checksum`` (content digests, cached
arrays), ``paths`` (the shared data and the cache: ``TRIEMINE_SHARED``, ``TRIEMINE_CACHE``),
``keys`` (the version of the keys that outputs, manifests and caches record). They import only
each other and :mod:`triemine.errors`.
"""
