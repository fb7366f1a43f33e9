"""One judge for a pair of sentences, mined or given: its features, model, training and
calibration.

* :mod:`~triemine.judging.features`: the judge's features a pair's texts give
  (``len_ratio``, ``number_match``) and the feature lists the judge reads; the mining job
  (:mod:`triemine.mining.finish`) and the given-pairs path (:mod:`triemine.cleaning.judge`)
  compute them with the same functions;
* :mod:`~triemine.judging.numbers`: numbers of a Chinese source and an English target as
  values (``number_match``);
* :mod:`~triemine.judging.model`: :class:`~triemine.judging.model.Judge`, a logistic
  regression, a forest of boosted trees or their blend, whose logit is the column ``judge``
  and whose probability, shifted to a stated or estimated density, is ``prob``; a small JSON
  file (the shipped one is ``judge.json`` beside it, fingerprinted in the configuration
  record);
* :mod:`~triemine.judging.zsum`: the other judge kind, ``zsum``: a fixed
  :class:`~triemine.judging.combination.Combination` of standardised features (the column
  ``combined``; ``judge`` for given pairs), its Platt curve
  (:class:`~triemine.judging.calibration.Calibration`, the column ``prob``) and its tuned cut,
  one JSON file (``combined.json``, ``mt-only.json``; ``combined-pairs.json``, the ``combined``
  configuration's judge of given pairs);
* :mod:`~triemine.judging.shipped`: each configuration's one judge (its record names the file
  and fingerprint) and :func:`~triemine.judging.shipped.tsv_cut`, the one function deciding a
  mining TSV's selection, score column and default cut;
* :mod:`~triemine.judging.trees`: a forest as flat arrays, evaluated vectorised (the
  ``trees`` kind; read out of a scikit-learn model without importing it);
* :mod:`~triemine.judging.prior`: the prior shift of a probability (Saerens et al. 2002): to a
  stated share of translations, or to one estimated from a run's candidates by EM;
* :mod:`~triemine.judging.quality`: what the kept pairs' ``prob`` promises without gold (the
  expected true pairs, precision and recall).

This package imports neither the mining job, the filtering nor the cleaning package; they
import it.
"""
