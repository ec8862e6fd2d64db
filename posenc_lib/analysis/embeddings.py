"""The size of a model's token vectors, next to the position vectors added to them."""

from __future__ import annotations

from posenc_lib.model.transformer import TransformerLM


def token_vector_norm(model: TransformerLM) -> float:
    """Mean L2 norm of the token vectors as the first layer reads them.

    That is the rows of the token embedding, times the model's embedding multiplier
    (√d_model where ``scale_token_embedding`` is set, as in Vaswani et al. 2017), averaged
    over the whole vocabulary. Compare it with a sinusoidal position vector's norm,
    √(d_model / 2), to see which of the two dominates their sum.

    Args:
        model: a :class:`~posenc_lib.model.transformer.TransformerLM`.

    Returns:
        The mean norm, a Python float (the embedding's units; no gradient).

    Raises:
        ValueError: if ``model`` has no ``token_embedding``.
    """
    embedding = getattr(model, "token_embedding", None)
    if embedding is None:
        raise ValueError(f"model must have a token_embedding, got {type(model).__name__}")
    vectors = embedding.weight.detach()  # [vocab, d_model]
    if model.embedding_multiplier is not None:
        vectors = vectors * model.embedding_multiplier
    return vectors.norm(dim=1).mean().item()
