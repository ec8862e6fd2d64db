"""The vendored Austen corpus: intact (checksums of shared/data/austen), split by whole books."""

import hashlib

import pytest
import torch

from posenc_lib import load_corpus, sample_batch
from posenc_lib.training.data import read_austen_book

# sha256 of the plain-text files in shared/data/austen (see posenc_lib/corpora/austen/PROVENANCE.md)
CHECKSUMS = {
    "emma": "7c67b5985c6d0de1efaeb5d342d52cb82c38083c40e2295129e30e87ee690ebe",
    "mansfieldpark": "98bc90519cdf4ef663ad7de2734bb529435ef24f7abbde6bb1a50898871dafe9",
    "northangerabbey": "51f91bbe0517db8e65cff009b097ce0a1836124c4e0532ac19e6c0cad982abed",
    "persuasion": "8061549557aebd2fd6e353d18d9197cb707029112bd52d4d8b174583a925848a",
    "prideprejudice": "dfc684d4f857fa938268f9ab9c5567b64bd0691251eca959644adeabe6287a4d",
    "sensesensibility": "105e1651fe93bed7130078578efd31e0c557d68667ba672ddc876f735b30fe09",
}


@pytest.mark.parametrize("book", sorted(CHECKSUMS))
def test_books_intact(book: str) -> None:
    assert hashlib.sha256(read_austen_book(book)).hexdigest() == CHECKSUMS[book]


def test_splits_hold_out_whole_books() -> None:
    corpus = load_corpus("austen")
    assert corpus.test.dtype == torch.uint8
    persuasion = read_austen_book("persuasion")
    assert bytes(corpus.test.tolist()) == persuasion
    assert persuasion[:2000] not in bytes(corpus.train.tolist())


def test_sample_batch_targets_are_next_bytes() -> None:
    tokens = torch.arange(100, dtype=torch.uint8)
    inputs, targets = sample_batch(tokens, 4, 10, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (4, 10) and inputs.dtype == torch.int64
    assert torch.equal(targets, inputs + 1)


def test_errors() -> None:
    with pytest.raises(ValueError, match="unknown corpus"):
        load_corpus("wikipedia")
    with pytest.raises(ValueError, match="unknown book"):
        read_austen_book("ulysses")
    with pytest.raises(ValueError, match="too short"):
        sample_batch(torch.zeros(5, dtype=torch.uint8), 1, 10, torch.Generator())


def test_sotu_holds_out_whole_addresses() -> None:
    import json
    from importlib import resources

    manifest = json.loads(resources.files("posenc_lib").joinpath("corpora", "sotu", "manifest.json").read_text())
    docs = {split: set(manifest[split]["documents"]) for split in ("train", "validation", "test")}
    assert sum(len(d) for d in docs.values()) == 249
    assert not (docs["train"] & docs["test"]) and not (docs["train"] & docs["validation"])
    assert not (docs["validation"] & docs["test"])
    corpus = load_corpus("sotu")  # verifies each split's sha256 against the manifest
    assert corpus.name == "sotu" and corpus.train.numel() == manifest["train"]["bytes"] == 10065105
    test_start = bytes(corpus.test[:2000].tolist())
    assert test_start not in bytes(corpus.train.tolist())


def test_sotu_checksum_is_verified(monkeypatch) -> None:
    import gzip

    from posenc_lib.training import sotu

    real = gzip.decompress
    monkeypatch.setattr(sotu.gzip, "decompress", lambda b: real(b) + b"tampered")
    with pytest.raises(ValueError, match="sha256"):
        sotu.load_sotu()
