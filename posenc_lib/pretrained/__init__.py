"""Pretrained checkpoints (the book's SmolLM2): loading them
(:mod:`~posenc_lib.pretrained.loading`), their RoPE settings and a positional check-up
(:mod:`~posenc_lib.pretrained.checkup`), perplexity over long documents
(:mod:`~posenc_lib.pretrained.long_context`), passkey runs
(:mod:`~posenc_lib.pretrained.passkey`), RoPE in a KV cache
(:mod:`~posenc_lib.pretrained.kv_cache`) and streaming with attention sinks
(:mod:`~posenc_lib.pretrained.streaming`)."""
