"""Command-line entry points of the project, in one place (none of them is imported by the
library): the book's maintenance tools (``tools/*.py``), the benchmark suite
(``python -m tools.benchmarks``) and the scripts that make the stored runs under
``results/`` (``tools/runs/``)."""
