"""Scripts that make the stored runs under ``results/`` and the command lines of the library's
long jobs (sweep, check-up, long context, streaming); ``README.md`` here lists them. Run each as
``python tools/runs/NAME.py`` from the repository root; tests import them as ``tools.runs.NAME``."""
