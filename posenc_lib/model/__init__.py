"""The model: a small decoder-only Transformer over bytes, with every positional scheme.

* :mod:`~posenc_lib.model.transformer`: :class:`ModelConfig` and :class:`TransformerLM`,
  the model the chapters train;
* :mod:`~posenc_lib.model.attention`: causal self-attention, masks, and :func:`attend`
  (SDPA with an additive bias);
* :mod:`~posenc_lib.model.alibi_attention`: ALiBi computed three ways (explicit, SDPA,
  FlexAttention) and folded into the keys, for the chapters that compare them.
"""

from posenc_lib.model.transformer import (
    SCHEMES,
    ModelConfig,
    TransformerLM,
    every_kth_layer,
    with_rope_scaling,
)

__all__ = ["SCHEMES", "ModelConfig", "TransformerLM", "every_kth_layer", "with_rope_scaling"]
