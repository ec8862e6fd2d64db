"""The Forgetting Transformer's gate (posenc_lib.encodings.forget_gate) and its place in the model."""

import pytest
import torch

from posenc_lib import ModelConfig, TransformerLM
from posenc_lib.encodings import alibi_bias, alibi_slopes
from posenc_lib.encodings.forget_gate import ForgetGate, forget_gate_bias, gate_bias_for_slopes
from posenc_lib.training.train import TrainConfig


def test_bias_is_the_sum_of_the_log_gates_between_key_and_query() -> None:
    torch.manual_seed(0)
    log_f = torch.nn.functional.logsigmoid(torch.randn(2, 3, 7))
    bias = forget_gate_bias(log_f)
    for i in range(7):
        for j in range(i + 1):
            expected = log_f[..., j + 1:i + 1].sum(-1)
            torch.testing.assert_close(bias[..., i, j], expected, atol=1e-5, rtol=0)


def test_a_constant_gate_is_alibi() -> None:
    slopes = alibi_slopes(4)
    b = gate_bias_for_slopes(slopes)
    torch.testing.assert_close(torch.nn.functional.logsigmoid(b.double()), -slopes.double(),
                               atol=1e-6, rtol=0)
    log_f = torch.nn.functional.logsigmoid(b)[None, :, None].expand(1, 4, 9)
    causal = torch.ones(9, 9, dtype=torch.bool).tril()
    got = forget_gate_bias(log_f)[0].masked_fill(~causal, 0)
    want = alibi_bias(4, 9, 9).masked_fill(~causal, 0)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def test_fox_with_zero_weights_and_alibi_biases_is_the_alibi_model() -> None:
    torch.manual_seed(0)
    alibi = TransformerLM(ModelConfig(position="alibi", d_model=32, num_heads=4)).eval()
    fox = TransformerLM(ModelConfig(position="none", d_model=32, num_heads=4, forget_gate=True)).eval()
    state = dict(alibi.state_dict())
    for i, block in enumerate(fox.blocks):
        gate = block.attn.forget_gate.proj
        state[f"blocks.{i}.attn.forget_gate.proj.weight"] = torch.zeros_like(gate.weight)
        state[f"blocks.{i}.attn.forget_gate.proj.bias"] = gate_bias_for_slopes(alibi_slopes(4))
    fox.load_state_dict(state)
    tokens = torch.randint(0, 256, (2, 40))
    with torch.no_grad():
        torch.testing.assert_close(fox(tokens), alibi(tokens), atol=1e-4, rtol=1e-4)
        x = alibi.blocks[0].norm1(alibi.token_embedding(tokens))
        torch.testing.assert_close(fox.blocks[0].attn.probabilities(x),
                                   alibi.blocks[0].attn.probabilities(x, alibi.attention_bias(40, x.device)),
                                   atol=1e-5, rtol=1e-4)


def test_the_gate_depends_on_the_data_and_keeps_causality() -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(position="none", d_model=32, num_heads=4, forget_gate=True)).eval()
    tokens = torch.randint(0, 256, (1, 30))
    changed = tokens.clone()
    changed[0, 20:] = (changed[0, 20:] + 1) % 256
    with torch.no_grad():
        a, b = model(tokens), model(changed)
        gates = model.blocks[0].attn.forget_gate(model.blocks[0].norm1(model.token_embedding(tokens)))
    torch.testing.assert_close(a[:, :20], b[:, :20])  # the past does not see the future
    assert gates.shape == (1, 4, 30) and bool((gates < 0).all())
    assert float(gates.std()) > 0  # one value per token: data-dependent


def test_long_input_runs_block_by_block_like_one_pass() -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(position="none", d_model=32, num_heads=4, forget_gate=True)).eval()
    tokens = torch.randint(0, 256, (1, 700))  # past CAUSAL_BLOCK: attend splits the queries
    with torch.no_grad():
        long = model(tokens)
        short = model(tokens[:, :300])
    torch.testing.assert_close(long[:, :300], short, atol=1e-4, rtol=1e-4)


def test_config_key_unchanged_without_the_gate() -> None:
    plain = ModelConfig(position="none")
    assert "forget_gate" not in plain.to_dict()
    assert ModelConfig(position="none", forget_gate=True).to_dict()["forget_gate"] is True
    config = TrainConfig(model=ModelConfig(position="none", forget_gate=True))
    assert TrainConfig.from_dict(config.to_dict()) == config
    assert "forget_gate" not in TrainConfig(model=plain).to_dict()["model"]


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="forget_gate"):
        ModelConfig(forget_gate=1)
    with pytest.raises(ValueError, match="log_forget"):
        forget_gate_bias(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="slopes"):
        gate_bias_for_slopes(torch.tensor([0.5, 0.0]))
    with pytest.raises(ValueError, match="num_heads"):
        ForgetGate(8, 0)
    plain = TransformerLM(ModelConfig(position="none", d_model=32))
    assert plain.blocks[0].attn.forget_gate is None


def test_alibi_init_starts_as_the_alibi_model() -> None:
    torch.manual_seed(0)
    fox = TransformerLM(ModelConfig(position="none", d_model=32, num_heads=4, forget_gate=True,
                                    forget_gate_init="alibi")).eval()
    alibi = TransformerLM(ModelConfig(position="alibi", d_model=32, num_heads=4)).eval()
    alibi.load_state_dict({k: v for k, v in fox.state_dict().items() if "forget_gate" not in k})
    tokens = torch.randint(0, 256, (2, 40))
    with torch.no_grad():
        torch.testing.assert_close(fox(tokens), alibi(tokens), atol=1e-4, rtol=1e-4)
    assert "forget_gate_init" not in ModelConfig(position="none", forget_gate=True).to_dict()
    with pytest.raises(ValueError, match="forget_gate_init"):
        ModelConfig(forget_gate_init="zeros", forget_gate=True)
    with pytest.raises(ValueError, match="forget_gate=True"):
        ModelConfig(forget_gate_init="alibi")
