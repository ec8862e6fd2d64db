"""The second corpus: U.S. State of the Union addresses 1790–2026 (about 12 MB, public domain).

Vendored compressed in ``posenc_lib/corpora/sotu`` (source, licence and split in
``PROVENANCE.md`` there). Importing this module registers it as ``"sotu"`` in
:data:`posenc_lib.training.data.CORPORA`, so ``load_corpus("sotu")`` and ``TrainConfig(corpus="sotu")`` work.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from importlib import resources

from posenc_lib.training.data import CORPORA, Corpus, bytes_to_tokens


def load_sotu() -> Corpus:
    """The State of the Union addresses (1790–2026), split by whole addresses.

    In date order, every tenth address (the 10th, 20th, …) is test and every tenth from the 5th
    is validation; the rest (200 of 249) train. Source, licence and split:
    ``posenc_lib/corpora/sotu/PROVENANCE.md``.

    Raises:
        ValueError: if a split's SHA-256 differs from the one in ``manifest.json`` (a damaged file).
    """
    root = resources.files("posenc_lib").joinpath("corpora", "sotu")
    manifest = json.loads(root.joinpath("manifest.json").read_text())
    streams = {}
    for split in ("train", "validation", "test"):
        data = gzip.decompress(root.joinpath(f"{split}.txt.gz").read_bytes())
        digest = hashlib.sha256(data).hexdigest()
        if digest != manifest[split]["sha256"]:
            raise ValueError(f"sotu {split} split has sha256 {digest}, expected {manifest[split]['sha256']}")
        streams[split] = bytes_to_tokens(data)
    return Corpus("sotu", **streams)


CORPORA["sotu"] = load_sotu
