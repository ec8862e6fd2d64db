"""Text corpora as byte tokens (vocabulary 256: no tokenizer to download).

The Austen corpus ships inside the package (``posenc_lib/corpora/austen/*.txt.gz``, public domain;
see ``PROVENANCE.md`` there). Whole books are held out, so long test documents exist.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from importlib import resources

import torch
from torch import Tensor

AUSTEN_SPLITS: dict[str, tuple[str, ...]] = {
    "train": ("emma", "mansfieldpark", "prideprejudice", "sensesensibility"),
    "validation": ("northangerabbey",),
    "test": ("persuasion",),
}
"""Which Austen novels form each split (whole books, none shared)."""

DOCUMENT_SEPARATOR = b"\n\n\n"


def read_austen_book(name: str) -> bytes:
    """The raw bytes (UTF-8) of one Austen novel, e.g. ``"persuasion"``.

    Raises:
        ValueError: for an unknown book name (the message lists the known ones).
    """
    books = sorted(b for split in AUSTEN_SPLITS.values() for b in split)
    if name not in books:
        raise ValueError(f"unknown book {name!r}; known books: {books}")
    path = resources.files("posenc_lib").joinpath("corpora", "austen", f"{name}.txt.gz")
    return gzip.decompress(path.read_bytes())


def bytes_to_tokens(text: bytes) -> Tensor:
    """Bytes → token ids ``[len(text)]``, dtype uint8 (each byte is a token, 0 … 255)."""
    return torch.frombuffer(bytearray(text), dtype=torch.uint8).clone()


def tokens_to_text(tokens: Tensor) -> str:
    """Token ids → text (UTF-8, undecodable bytes replaced)."""
    return bytes(tokens.to(torch.uint8).tolist()).decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Corpus:
    """Token streams ``[N]`` (uint8) for each split, and where they came from."""

    name: str
    train: Tensor
    validation: Tensor
    test: Tensor

    def split(self, name: str) -> Tensor:
        if name not in ("train", "validation", "test"):
            raise ValueError(f"split must be 'train', 'validation' or 'test', got {name!r}")
        return getattr(self, name)


def load_austen() -> Corpus:
    """The six novels: four to train on, Northanger Abbey to validate, Persuasion to test."""
    streams = {
        split: bytes_to_tokens(DOCUMENT_SEPARATOR.join(read_austen_book(b) for b in books))
        for split, books in AUSTEN_SPLITS.items()
    }
    return Corpus("austen", **streams)


CORPORA = {"austen": load_austen}


def load_corpus(name: str = "austen") -> Corpus:
    """Load a corpus by name (``"austen"``; more are registered in ``CORPORA``).

    Raises:
        ValueError: for an unknown name.
    """
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known: {sorted(CORPORA)}")
    return CORPORA[name]()


def sample_batch(tokens: Tensor, batch_size: int, seq_len: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Random training windows: inputs and next-byte targets, both ``[batch_size, seq_len]`` int64.

    Raises:
        ValueError: if the stream is shorter than seq_len + 1.
    """
    if tokens.numel() < seq_len + 1:
        raise ValueError(f"token stream of {tokens.numel()} is too short for seq_len={seq_len}")
    starts = torch.randint(0, tokens.numel() - seq_len, (batch_size,), generator=generator)
    offsets = torch.arange(seq_len + 1)
    windows = tokens[starts[:, None] + offsets[None, :]].long()  # (B, T+1)
    return windows[:, :-1], windows[:, 1:]
