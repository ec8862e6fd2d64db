"""Training the book's models: data, the training loop, evaluation, and the store of
trained models.

* :mod:`~posenc_lib.training.data` (and :mod:`~posenc_lib.training.sotu`): the byte
  corpora and training windows;
* :mod:`~posenc_lib.training.train`: the configurations and the one training loop;
* :mod:`~posenc_lib.training.evaluate`: perplexity by evaluation length;
* :mod:`~posenc_lib.training.store`: trained models kept on disk, keyed by what determines
  them (:func:`~posenc_lib.training.store.train_cached`);
* :mod:`~posenc_lib.training.scales`: the ``SCALE`` knob's sizes (ci, book, gpu);
* :mod:`~posenc_lib.training.device`, :mod:`~posenc_lib.training.progress`: where to run,
  and progress bars for long runs.
"""
