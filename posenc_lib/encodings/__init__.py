"""Positional encodings, one module each. They are leaves: none imports the rest of posenc_lib
(``positions`` holds the one helper the relative encodings share)."""

from posenc_lib.encodings.alibi import alibi_bias, alibi_bias_from_mask, alibi_slopes
from posenc_lib.encodings.forget_gate import ForgetGate, forget_gate_bias, gate_bias_for_slopes
from posenc_lib.encodings.learned import LearnedPositionalEmbedding
from posenc_lib.encodings.positions import positions_from_mask, randomized_positions
from posenc_lib.encodings.rope import (
    RotaryEmbedding,
    apply_rope,
    interleaved_to_half_permutation,
    rope_cos_sin,
    rope_inverse_frequencies,
    rotate_pairs,
)
from posenc_lib.encodings.logit_scaling import LOGIT_SCALING_KINDS, normalize_logit_scaling
from posenc_lib.encodings.mrope import MROPE_LAYOUTS, apply_mrope, mrope_angles, mrope_pair_axes
from posenc_lib.encodings.rope_partial import PARTIAL_FORMS, dimension_frequencies
from posenc_lib.encodings.rope_scaling import (
    LAYER_TYPES,
    ROPE_TYPES,
    normalize_rope_parameters,
    normalize_rope_scaling,
    rope_scaled_frequencies,
)
from posenc_lib.encodings.sinusoidal import sinusoidal_encoding, sinusoidal_frequencies
from posenc_lib.encodings.sinusoidal import FREQUENCY_FORMS, frequency_form_errors
from posenc_lib.encodings.t5_bias import T5RelativePositionBias, t5_relative_position_bucket

__all__ = [
    "LAYER_TYPES",
    "LOGIT_SCALING_KINDS",
    "MROPE_LAYOUTS",
    "PARTIAL_FORMS",
    "ROPE_TYPES",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "T5RelativePositionBias",
    "alibi_bias",
    "alibi_bias_from_mask",
    "alibi_slopes",
    "apply_mrope",
    "apply_rope",
    "dimension_frequencies",
    "interleaved_to_half_permutation",
    "mrope_angles",
    "mrope_pair_axes",
    "normalize_logit_scaling",
    "normalize_rope_parameters",
    "normalize_rope_scaling",
    "positions_from_mask",
    "randomized_positions",
    "ForgetGate",
    "forget_gate_bias",
    "gate_bias_for_slopes",
    "rope_cos_sin",
    "rope_inverse_frequencies",
    "rope_scaled_frequencies",
    "rotate_pairs",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "t5_relative_position_bucket",
    "FREQUENCY_FORMS",
    "frequency_form_errors",
]
