"""posenc_lib: the shared library of *Positional Encodings, Executed*.

Every encoding, attention, a small byte-level language model, data, training and evaluation,
implemented once and imported by every chapter.

Quickstart (each example is run by ``tests/test_quickstart.py``). RoPE on your own queries
and keys ``[batch, heads, seq, head_dim]``; the scores depend on the distance only, so
shifting every position by 10 changes them by float32 rounding alone:

>>> import torch
>>> from posenc_lib import alibi_bias, alibi_slopes, apply_rope, rope_cos_sin
>>> _ = torch.manual_seed(0)
>>> q, k = torch.randn(1, 4, 6, 8), torch.randn(1, 4, 6, 8)
>>> def scores(p):
...     return apply_rope(q, p) @ apply_rope(k, p).transpose(-1, -2)
>>> scores(torch.arange(6)).shape
torch.Size([1, 4, 6, 6])
>>> bool(torch.allclose(scores(torch.arange(6)), scores(torch.arange(10, 16)), atol=1e-5))
True

ALiBi's slopes m_h for 8 heads, and the bias −m_h·(i − j) it adds to the scores (here
of the last of 4 positions, in heads 1 and 2):

>>> alibi_slopes(8)[:3]
tensor([0.5000, 0.2500, 0.1250])
>>> alibi_bias(8, 1, 4)[:2, 0]
tensor([[-1.5000, -1.0000, -0.5000, -0.0000],
        [-0.7500, -0.5000, -0.2500, -0.0000]])

A YaRN cos/sin table, from the ``rope_scaling`` dictionary a Hugging Face config holds
(``torch.cat([cos, cos], -1)`` is Hugging Face's ``[seq, head_dim]`` layout); YaRN's
attention factor 0.1·ln(factor) + 1 multiplies the table:

>>> yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
>>> cos, sin = rope_cos_sin(torch.arange(8192), 64, 10000.0, rope_scaling=yarn)
>>> cos.shape, round(float(cos[0, 0]), 4)
(torch.Size([8192, 32]), 1.1386)

Notation used for tensor shapes (as in the docstrings and the comments at each reshape):

* ``batch`` (B): sequences in a batch
* ``heads`` (H): attention heads
* ``seq`` (T): positions (query length); ``S`` key length where it differs
* ``head_dim`` (D): width of one head; ``d_model`` (C) = heads · head_dim
* ``vocab`` (V): 256 byte values

Without torch (the website's build, ``requirements-book.txt``) only the modules that need
no torch import: :mod:`posenc_lib.stored` (reading stored results) and
:mod:`posenc_lib.plotting`; every name below then raises an error that says to install
torch.
"""

try:
    import torch as _torch
except ModuleNotFoundError as _missing:
    if _missing.name != "torch":
        raise
    _torch = None

if _torch is None:
    # The website's build has no torch: its Sphinx extension imports posenc_lib.stored and
    # posenc_lib.plotting only. Anything else says what is missing.
    def __getattr__(name: str):
        if name in __all__:
            raise ModuleNotFoundError(
                f"posenc_lib.{name} needs PyTorch, which is not installed: "
                "pip install 'torch>=2.5' (without torch only posenc_lib.stored and "
                "posenc_lib.plotting work)", name="torch")
        raise AttributeError(f"module 'posenc_lib' has no attribute {name!r}")
else:
    from posenc_lib.alibi_attention import alibi_attention
    from posenc_lib.attention import SelfAttention, attend, causal_mask, score_mask
    from posenc_lib.attention_maps import attention_probabilities, mean_attention_distance
    from posenc_lib.cache import fine_tune_cached, train_cached
    from posenc_lib.data import Corpus, bytes_to_tokens, load_corpus, sample_batch, tokens_to_text
    from posenc_lib.device import device_name, pick_device
    from posenc_lib.encodings import (
        ROPE_TYPES,
        LearnedPositionalEmbedding,
        RotaryEmbedding,
        T5RelativePositionBias,
        alibi_bias,
        alibi_bias_from_mask,
        alibi_slopes,
        apply_rope,
        interleaved_to_half_permutation,
        normalize_rope_scaling,
        positions_from_mask,
        rope_cos_sin,
        rope_inverse_frequencies,
        rope_scaled_frequencies,
        rotate_pairs,
        sinusoidal_encoding,
        sinusoidal_frequencies,
        t5_relative_position_bucket,
    )
    from posenc_lib.evaluate import EvalResult, evaluate_perplexity
    from posenc_lib.model import (
        SCHEMES,
        ModelConfig,
        TransformerLM,
        every_kth_layer,
        with_rope_scaling,
    )
    from posenc_lib.scales import SCALES, Scale, get_scale
    from posenc_lib.sotu import load_sotu  # also registers "sotu" in posenc_lib.data.CORPORA
    from posenc_lib.table_geometry import TrainedRowDistance, distance_to_trained_rows
    from posenc_lib.train import FineTuneConfig, TrainConfig, TrainRecord, fine_tune, train

__version__ = "0.1.0"

__all__ = [
    "ROPE_TYPES",
    "SCALES",
    "SCHEMES",
    "Scale",
    "SelfAttention",
    "Corpus",
    "EvalResult",
    "FineTuneConfig",
    "LearnedPositionalEmbedding",
    "ModelConfig",
    "RotaryEmbedding",
    "T5RelativePositionBias",
    "TrainConfig",
    "TrainRecord",
    "TrainedRowDistance",
    "TransformerLM",
    "alibi_attention",
    "alibi_bias",
    "alibi_bias_from_mask",
    "alibi_slopes",
    "apply_rope",
    "bytes_to_tokens",
    "attend",
    "attention_probabilities",
    "causal_mask",
    "device_name",
    "distance_to_trained_rows",
    "evaluate_perplexity",
    "every_kth_layer",
    "fine_tune",
    "fine_tune_cached",
    "get_scale",
    "interleaved_to_half_permutation",
    "load_corpus",
    "load_sotu",
    "mean_attention_distance",
    "normalize_rope_scaling",
    "pick_device",
    "positions_from_mask",
    "rope_cos_sin",
    "rope_inverse_frequencies",
    "rope_scaled_frequencies",
    "rotate_pairs",
    "sample_batch",
    "score_mask",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "t5_relative_position_bucket",
    "tokens_to_text",
    "train",
    "train_cached",
    "with_rope_scaling",
]
