"""analysis.equivariance: permutation_gap, Attn(PX) against P Attn(X)."""

import pytest
import torch

from posenc_lib import SelfAttention, permutation_gap, sinusoidal_encoding


def test_attention_without_positions_commutes_with_a_reordering() -> None:
    torch.manual_seed(0)
    layer = SelfAttention(16, 2, causal=False).eval()
    x = torch.randn(1, 9, 16)
    perm = torch.randperm(9)
    assert permutation_gap(layer, x, perm) < 1e-5
    assert permutation_gap(layer, x, torch.arange(9)) == 0.0  # the identity: no change
    # a causal mask, or positions added after the reordering, break it
    causal = SelfAttention(16, 2, causal=True).eval()
    causal.load_state_dict(layer.state_dict())
    assert permutation_gap(causal, x, perm) > 1e-2
    assert permutation_gap(layer, x, perm, positions=sinusoidal_encoding(9, 16)) > 1e-2


def test_at_compares_one_position_only() -> None:
    torch.manual_seed(0)
    causal = SelfAttention(16, 2, causal=True).eval()
    x = torch.randn(1, 9, 16)
    prefix = torch.cat([torch.randperm(8), torch.tensor([8])])  # the last one stays
    assert permutation_gap(causal, x, prefix, at=-1) < 1e-5  # the last query sees a set
    assert permutation_gap(causal, x, prefix) > 1e-2  # earlier queries do not
    with torch.no_grad():
        expected = (causal(x)[:, -1] - causal(x[:, prefix])[:, -1]).abs().max().item()
    assert permutation_gap(causal, x, prefix, at=-1) == expected


def test_token_ids_and_bad_permutations() -> None:
    embed = torch.nn.Embedding(10, 4)
    ids = torch.tensor([[1, 2, 3, 4]])
    assert permutation_gap(embed, ids, torch.tensor([3, 2, 1, 0])) == 0.0
    for bad in (torch.tensor([0, 1, 1, 2]), torch.tensor([0, 1, 2]), torch.tensor([[0, 1, 2, 3]])):
        with pytest.raises(ValueError, match="perm"):
            permutation_gap(embed, ids, bad)
    with pytest.raises(ValueError, match="x must be"):
        permutation_gap(embed, torch.tensor([1, 2]), torch.tensor([1, 0]))


def test_averaging_attention_outputs_the_running_mean_of_the_values() -> None:
    from posenc_lib import averaging_attention

    torch.manual_seed(0)
    layer = averaging_attention(8)
    x = torch.randn(2, 5, 8)
    values = x @ layer.qkv.weight[16:].T  # v_s = W_v x_s
    running_mean = values.cumsum(dim=1) / torch.arange(1, 6)[None, :, None]
    with torch.no_grad():
        assert torch.allclose(layer(x), running_mean, atol=1e-6)
    assert not layer.training
    for bad in (0, 2.0):
        with pytest.raises(ValueError, match="d_model"):
            averaging_attention(bad)


def test_rotation_normal_form_turns_g_into_ropes_block_rotation() -> None:
    import math

    from posenc_lib import rotation_normal_form

    angles = torch.tensor([0.3, 1.1], dtype=torch.float64)
    blocks = torch.zeros(4, 4, dtype=torch.float64)
    for i, a in enumerate(angles):
        c, s = math.cos(a), math.sin(a)
        blocks[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, -s], [s, c]])
    basis, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64,
                                           generator=torch.Generator().manual_seed(0)))
    G = basis @ blocks @ basis.T
    Q, found = rotation_normal_form(G)
    assert sorted(found) == pytest.approx(angles.tolist())
    assert torch.allclose(Q.T @ Q, torch.eye(4, dtype=torch.float64), atol=1e-10)
    R = Q.T @ G @ Q  # block-diagonal rotations by the found angles
    for i, a in enumerate(found):
        assert abs(R[2 * i, 2 * i] - math.cos(a)) < 1e-6
        assert abs(R[2 * i + 1, 2 * i] - math.sin(a)) < 1e-6
    with pytest.raises(ValueError, match="real eigenvalue"):
        rotation_normal_form(torch.eye(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="d even"):
        rotation_normal_form(torch.eye(3, dtype=torch.float64))


def test_a_model_with_its_residual_stream_permuted_computes_the_same_logits() -> None:
    from posenc_lib import ModelConfig, TransformerLM, permute_residual_stream

    torch.manual_seed(0)
    config = ModelConfig(position="sinusoidal", d_model=16, num_layers=2, num_heads=2,
                         max_positions=12, vocab_size=20)
    model = TransformerLM(config).eval()
    perm = torch.randperm(16)
    twin = TransformerLM(config).eval()
    twin.load_state_dict(permute_residual_stream(model.state_dict(), perm))
    twin.use_sinusoidal_table(sinusoidal_encoding(12, 16)[:, perm])
    tokens = torch.randint(0, 20, (2, 12))
    with torch.no_grad():
        assert (twin(tokens) - model(tokens)).abs().max() < 1e-5
        model.use_sinusoidal_table(sinusoidal_encoding(12, 16)[:, perm])  # unpermuted
        assert (twin(tokens) - model(tokens)).abs().max() > 1e-2  # weights: differ
    with pytest.raises(ValueError, match="perm must be a permutation"):
        permute_residual_stream(model.state_dict(), torch.tensor([0, 0] + list(range(2, 16))))
