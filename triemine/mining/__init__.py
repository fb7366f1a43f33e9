"""The mining job: candidate generators (trie search, encoder kNN, translation retrieval), exact MT
scores, a fixed combined score, written as one mining TSV.  See :mod:`triemine.mining.run`."""
