"""Test fixtures that ship with the package: the tiny fairseq model (:mod:`.tiny_model`), the
tiny Hugging Face Marian directory (:mod:`.tiny_hf_marian`) and a local multi-node Ray cluster
(:mod:`.ray_cluster`).

Imported by the tests, the benchmarks and the scripts that build example models, never by the
package's own modules (``scripts/check_layout.py`` refuses such an import). The workers' fault
hook (``TRIEMINE_TEST_FAULTS``) stays in :mod:`triemine.distributed.worker`: it runs inside the
production worker, which may not import this folder."""
