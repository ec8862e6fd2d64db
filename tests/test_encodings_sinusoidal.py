"""sinusoidal_encoding against Vaswani et al. 2017 §3.5, evaluated in float64 by hand."""

import math

import pytest
import torch

from posenc_lib import sinusoidal_encoding, sinusoidal_frequencies


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


# sinusoidal_frequencies: the ω_i the table is built from (Vaswani et al. 2017, §3.5).


def test_frequencies_match_the_paper_and_the_table() -> None:
    d_model, base = 16, 500.0
    omegas = sinusoidal_frequencies(d_model, base)
    assert omegas.dtype == torch.float64 and omegas.shape == (d_model // 2,)
    expected = [base ** (-2 * i / d_model) for i in range(d_model // 2)]
    assert omegas.tolist() == pytest.approx(expected, rel=1e-15)
    table = sinusoidal_encoding(30, d_model, base).double()
    angles = torch.outer(torch.arange(30.0, dtype=torch.float64), omegas)  # [30, d/2]
    assert torch.allclose(table[:, 0::2], angles.sin(), atol=1e-6)


def test_concatenated_frequencies_reach_exactly_base() -> None:
    omegas = sinusoidal_frequencies(8, 10000.0, layout="concatenated")
    assert omegas[0] == 1.0 and omegas[-1].item() == pytest.approx(1e-4, rel=1e-12)


def test_frequencies_bad_arguments() -> None:
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_frequencies(7)
    with pytest.raises(ValueError, match="base"):
        sinusoidal_frequencies(8, base=-1.0)
    with pytest.raises(ValueError, match="layout"):
        sinusoidal_frequencies(8, layout="zigzag")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="d_model >= 4"):
        sinusoidal_frequencies(2, layout="concatenated")


# angle_dtype: what forming p·ω_i in a low precision does to the table.


def test_float64_angles_are_the_default() -> None:
    explicit = sinusoidal_encoding(100, 16, angle_dtype=torch.float64)
    assert torch.equal(explicit, sinusoidal_encoding(100, 16))


def test_bfloat16_angles_round_the_positions() -> None:
    # bfloat16 has 8 significant bits: 257 is stored as 256, so rows 256 and 257 agree
    pe = sinusoidal_encoding(300, 16, angle_dtype=torch.bfloat16)
    assert torch.equal(pe[256], pe[257])
    exact = sinusoidal_encoding(300, 16)
    assert not torch.equal(exact[256], exact[257])
    assert torch.equal(pe[:9, 0], exact[:9, 0])  # small positions and ω_0 = 1 are exact


def test_float32_angles_stay_close() -> None:
    ref = sinusoidal_encoding(10_001, 64)
    low = sinusoidal_encoding(10_001, 64, angle_dtype=torch.float32)
    error = (low - ref).abs().max().item()
    assert 1e-6 < error < 5e-3  # rounded, but far from the radians bfloat16 loses


def test_bad_angle_dtype() -> None:
    with pytest.raises(ValueError, match="angle_dtype"):
        sinusoidal_encoding(4, 8, angle_dtype=torch.int32)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((10.5, 8), TypeError, r"num_positions must be an integer >= 0, got num_positions=10.5"),
        ((-1, 8), ValueError, r"num_positions must be an integer >= 0, got num_positions=-1"),
        ((10, 8.0), TypeError, r"d_model must be an integer, got d_model=8.0"),
        ((10, 7), ValueError, r"d_model must be even"),
    ],
)
def test_bad_sizes_fail_in_words(args, error, message) -> None:
    with pytest.raises(error, match=message):
        sinusoidal_encoding(*args)


def test_a_block_of_rows_far_out_is_the_same_block_of_the_full_table() -> None:
    full = sinusoidal_encoding(1100, 16, dtype=torch.float64)
    block = sinusoidal_encoding(100, 16, start=1000, dtype=torch.float64)
    assert block.dtype == torch.float64 and torch.equal(block, full[1000:])
    assert torch.equal(sinusoidal_encoding(4, 16, start=3), sinusoidal_encoding(7, 16)[3:])
    with pytest.raises(ValueError, match="start"):
        sinusoidal_encoding(4, 16, start=-1)
    with pytest.raises(ValueError, match="dtype"):
        sinusoidal_encoding(4, 16, dtype=torch.float16)


def test_frequency_forms_agree_in_float64_and_the_power_form_overflows_float16() -> None:
    from posenc_lib import FREQUENCY_FORMS, frequency_form_errors

    for form in FREQUENCY_FORMS:
        errors = frequency_form_errors(16, 10_000.0, torch.float64, form, spans=(100,))
        assert set(errors) == {"ω_i", 100}
        assert errors["ω_i"] < 1e-14 and errors[100] < 1e-11, form
    power, exp_log, _ = FREQUENCY_FORMS
    assert frequency_form_errors(16, 500_000.0, torch.float16, power)["ω_i"] == 1.0
    assert frequency_form_errors(16, 500_000.0, torch.float16, exp_log)["ω_i"] < 1e-2
    f32 = frequency_form_errors(16, 10_000.0, torch.float32, power, spans=(65_536,))
    assert 1e-4 < f32[65_536] < 1e-1  # the product p·ω_i rounded in float32
    with pytest.raises(ValueError, match="form"):
        frequency_form_errors(16, 10_000.0, torch.float32, "pow")
