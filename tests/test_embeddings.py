"""analysis.embeddings: the token vectors' norm as the first layer reads them."""

import math

import pytest
import torch

from posenc_lib import ModelConfig, TransformerLM, token_vector_norm


def test_norm_of_the_token_vectors_with_and_without_the_multiplier() -> None:
    torch.manual_seed(0)
    plain = TransformerLM(ModelConfig(position="sinusoidal", d_model=16, num_layers=1, num_heads=2,
                                      token_init_std=0.25))
    expected = plain.token_embedding.weight.detach().norm(dim=1).mean().item()
    assert token_vector_norm(plain) == expected
    assert token_vector_norm(plain) == pytest.approx(0.25 * math.sqrt(16), rel=0.1)  # std · √d
    torch.manual_seed(0)
    scaled = TransformerLM(ModelConfig(position="sinusoidal", d_model=16, num_layers=1, num_heads=2,
                                       token_init_std=0.25, scale_token_embedding=True))
    assert token_vector_norm(scaled) == pytest.approx(4 * expected, rel=1e-6)  # × √16
    with pytest.raises(ValueError, match="token_embedding"):
        token_vector_norm(torch.nn.Linear(2, 2))
