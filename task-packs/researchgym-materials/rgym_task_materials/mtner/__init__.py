"""The downstream evaluation of ResearchGym's materials-tokenization task, written for rgym
(the repository's ``ner_datasets.py``, ``models.py`` and ``normalize_text.py`` are missing).

Modules: :mod:`.normalize` (MatSciBERT-style character normalisation), :mod:`.data`
(SOFC-Exp and MatScholar readers, folds), :mod:`.vocab` (the submitted ``vocab.txt``
and its WordPiece tokenizer), :mod:`.crf`, :mod:`.model` (BERT-CRF tagger),
:mod:`.train` (fine-tuning with fixed seeds and learning rates), :mod:`.metrics`
(conlleval chunk F1), :mod:`.profiles` and :mod:`.jobs` (what each profile runs
and how its predictions become scores).

The package uses relative imports only: the grader and the agent's workspace
carry copies of it under the name ``rgym_mtner``.  Importing it imports nothing
heavy; torch and transformers are imported by :mod:`.crf`, :mod:`.model` and
:mod:`.train`.
"""
