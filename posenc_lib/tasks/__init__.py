"""Experiments built on the model: the passkey retrieval task and its training mixture
(:mod:`~posenc_lib.tasks.retrieval`), multi-key recall with near-miss distractors and variable
tracking (:mod:`~posenc_lib.tasks.recall`), and the seeded train-short/test-long sweep
(:mod:`~posenc_lib.tasks.sweep`)."""
