"""posenc_book: the presentation layer of *Positional Encodings, Executed*, without torch.

The website is built without PyTorch (``requirements-book.txt``): the book's Sphinx
extension (``book/_ext/posenc_sphinx.py``) draws from stored results with this package
alone. The chapters use it through :mod:`posenc_lib`, which re-exports its public names.

* :mod:`~posenc_book.plotting`: the book's figure style, scheme colours and labels;
* :mod:`~posenc_book.tables`: DataFrames as the book's HTML tables;
* :mod:`~posenc_book.interactive`: figures a reader moves (frames and a slider);
* :mod:`~posenc_book.checks`: a checked agreement shown as its bound (``< 1e-6``);
* :mod:`~posenc_book.stored`: stored results of larger runs (``results/NAME``).
* :mod:`~posenc_book.ledger`: the claims ledger's verdicts, as a table and a figure.
"""
