"""sinusoidal_encoding against Vaswani et al. 2017 §3.5, evaluated in float64 by hand."""

import math

import pytest
import torch

from posenc_lib import sinusoidal_encoding


def reference(p: int, d_model: int, base: float = 10000.0) -> list[float]:
    row = []
    for i in range(d_model // 2):
        angle = p / base ** (2 * i / d_model)
        row += [math.sin(angle), math.cos(angle)]
    return row


def test_shape_dtype() -> None:
    pe = sinusoidal_encoding(10, 16)
    assert pe.shape == (10, 16) and pe.dtype == torch.float32


@pytest.mark.parametrize("d_model,base", [(8, 10000.0), (32, 10000.0), (6, 100.0)])
def test_values_match_formula(d_model: int, base: float) -> None:
    pe = sinusoidal_encoding(50, d_model, base)
    for p in (0, 1, 7, 49):
        assert torch.allclose(pe[p].double(), torch.tensor(reference(p, d_model, base), dtype=torch.float64), atol=1e-6)


def test_accurate_at_large_positions() -> None:
    pe = sinusoidal_encoding(10_001, 64)
    ref = torch.tensor(reference(10_000, 64), dtype=torch.float64)
    assert (pe[10_000].double() - ref).abs().max() < 1e-6  # angles in float64, only sin/cos rounded


def test_position_zero_is_sin0_cos0() -> None:
    pe = sinusoidal_encoding(1, 8)
    assert pe[0].tolist() == [0.0, 1.0] * 4


@pytest.mark.parametrize("d_model", [7, 0, -2])
def test_bad_d_model(d_model: int) -> None:
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_encoding(4, d_model)


def test_bad_layout_and_base() -> None:
    with pytest.raises(ValueError, match="layout"):
        sinusoidal_encoding(4, 8, layout="zigzag")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="base"):
        sinusoidal_encoding(4, 8, base=0.0)


def test_concatenated_layout_formula() -> None:
    d_model, half = 8, 4
    pe = sinusoidal_encoding(20, d_model, layout="concatenated")
    for p in (0, 3, 19):
        freqs = [10000.0 ** (-i / (half - 1)) for i in range(half)]
        expected = [math.sin(p * f) for f in freqs] + [math.cos(p * f) for f in freqs]
        assert torch.allclose(pe[p].double(), torch.tensor(expected, dtype=torch.float64), atol=1e-6)


# Both layouts against production implementations (transformers==5.23.0, pinned in requirements.txt).


def test_interleaved_matches_transformers_xlm() -> None:
    from transformers.models.xlm.modeling_xlm import create_sinusoidal_embeddings

    out = create_sinusoidal_embeddings(64, 32, torch.empty(64, 32))
    assert torch.allclose(sinusoidal_encoding(64, 32, layout="interleaved"), out, atol=1e-6)


def test_concatenated_matches_transformers_fsmt() -> None:
    # FSMT is Hugging Face's port of fairseq: [sin | cos] with exponent −i/(d/2 − 1), as tensor2tensor.
    from transformers.models.fsmt.modeling_fsmt import SinusoidalPositionalEmbedding

    out = SinusoidalPositionalEmbedding.get_embedding(64, 32, padding_idx=None)
    # fairseq forms the angles in float32, so at p = 63 they differ from ours (float64) by ~1e-6.
    assert torch.allclose(sinusoidal_encoding(64, 32, layout="concatenated"), out, atol=1e-5)


@pytest.mark.parametrize("d_model,base", [(8, 10000.0), (64, 10000.0), (16, 500.0)])
def test_layouts_are_a_permutation_and_a_change_of_base(d_model: int, base: float) -> None:
    """[sin | cos] with base b^((h−1)/h) is the paper's table with its columns reordered (h = d/2)."""
    half = d_model // 2
    paper = sinusoidal_encoding(300, d_model, base)
    permutation = list(range(0, d_model, 2)) + list(range(1, d_model, 2))  # sines first, then cosines
    concatenated = sinusoidal_encoding(300, d_model, base ** ((half - 1) / half), layout="concatenated")
    assert torch.allclose(paper[:, permutation], concatenated, atol=2e-5)


def test_paper_frequencies_in_concatenated_order_match_transformers_marian() -> None:
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    marian = MarianSinusoidalPositionalEmbedding(50, 16).create_weight()
    paper = sinusoidal_encoding(50, 16)
    assert torch.allclose(paper[:, list(range(0, 16, 2)) + list(range(1, 16, 2))], marian, atol=1e-6)


def test_concatenated_too_narrow() -> None:
    with pytest.raises(ValueError, match="d_model >= 4"):
        sinusoidal_encoding(4, 2, layout="concatenated")
    assert sinusoidal_encoding(4, 2).shape == (4, 2)  # the paper's layout has no such limit
