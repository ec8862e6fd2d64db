"""posenc_lib: the shared library of *Positional Encodings, Executed*.

Every encoding, attention, a small byte-level language model, data, training and evaluation,
implemented once and imported by every chapter.

Notation used for tensor shapes (as in the docstrings and the comments at each reshape):

* ``batch`` (B): sequences in a batch
* ``heads`` (H): attention heads
* ``seq`` (T): positions (query length); ``S`` key length where it differs
* ``head_dim`` (D): width of one head; ``d_model`` (C) = heads · head_dim
* ``vocab`` (V): 256 byte values
"""

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
    rope_inverse_frequencies,
    rope_scaled_frequencies,
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
    "rope_inverse_frequencies",
    "rope_scaled_frequencies",
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
