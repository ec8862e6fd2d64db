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

Where the code lives (each folder's ``__init__`` says more):

* ``encodings/``: one module per positional encoding, RoPE's context extensions, and
  RoPE's cache-blocked kernel (``rope_kernel``: the model's path, measured in the cost
  chapter);
* ``symbolic/``: the SymPy derivations of sinusoidal, RoPE and ALiBi identities;
* ``model/``: attention and the small Transformer the chapters train;
* ``training/``: corpora, the training loop, evaluation, the store of trained models;
* ``analysis/``: looking inside trained models (attention maps, interventions, probes);
* ``tasks/``: passkey retrieval, multi-key recall and the seeded train-short/test-long sweep;
* ``pretrained/``: a pretrained checkpoint (SmolLM2): loading, check-up, KV cache,
  streaming, long-context and passkey runs;
* ``measure.py``: timing, memory traffic, stored benchmark runs and another way to write
  ALiBi, for the cost chapter; ``players.py``: the chapters' interactive figures; ``records.py``:
  writing results files.

The book's presentation (figure style, tables, stored results, checked bounds) is the
separate, torch-free package :mod:`posenc_book`, so that the website builds without torch;
its public names are re-exported here. Everything below is the public API: the chapters
import from here.
"""

from posenc_book.checks import (
    assert_above,
    assert_below,
    decade_bounds,
)
from posenc_lib.encodings import (
    alibi_bias,
    alibi_bias_from_mask,
    alibi_slopes,
    apply_rope,
    interleaved_to_half_permutation,
    LearnedPositionalEmbedding,
    normalize_rope_scaling,
    positions_from_mask,
    rope_cos_sin,
    rope_inverse_frequencies,
    rope_scaled_frequencies,
    ROPE_TYPES,
    RotaryEmbedding,
    rotate_pairs,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    t5_relative_position_bucket,
    T5RelativePositionBias,
)
from posenc_lib.encodings.rope import rope_complex, rope_rotate_half_naive
from posenc_lib.encodings.t5_bias import t5_bucket_pair_counts, t5_bucket_starts
from posenc_lib.encodings.rope_decay import (
    decay_by_parts_checks,
    decay_curves,
    decay_table,
    rope_pairs_as_complex,
    rope_phases,
)
from posenc_lib.encodings.rope_kernel import apply_rope_blocked, rotate_pairs_blocked
from posenc_lib.encodings.rope_scaling import (
    critical_pair_index,
    dynamic_ntk_base,
    dynamic_stretch,
    last_unseen_distances,
    method_scaling,
    normalize_rope_parameters,
    ntk_full_turn_stretch,
    ntk_turn_margin,
    pair_stretch,
    STRETCH_METHODS,
    stretch_scaling,
    unseen_distance_share,
    yarn_part_scaling,
    YARN_PARTS,
)
from posenc_lib.encodings.logit_scaling import (
    normalize_logit_scaling,
    query_scale,
    softmax_scale_multiplier,
)
from posenc_lib.encodings.mrope import apply_mrope, mrope_pair_axes
from posenc_lib.encodings.rope_partial import (
    dimension_frequencies,
    neox_rotary_dim,
    p_rope_kept_pairs,
)
from posenc_lib.encodings.learned import DEFAULT_INIT_STD
from posenc_lib.model.transformer import (
    every_kth_layer,
    ModelConfig,
    SCHEMES,
    TransformerLM,
    with_rope_scaling,
)
from posenc_lib.model.attention import (
    attend,
    CAUSAL_BLOCK,
    causal_mask,
    load_interleaved_as_half,
    score_mask,
    SelfAttention,
)
from posenc_lib.model.alibi_attention import (
    alibi_attention,
    alibi_attention_flex,
    ALIBI_IMPLEMENTATIONS,
)
from posenc_lib.training.data import (
    bytes_to_tokens,
    Corpus,
    load_corpus,
    read_austen_book,
    sample_batch,
    tokens_to_text,
)
from posenc_lib.training.sotu import load_sotu
from posenc_lib.training.device import device_name, pick_device, start_chapter
from posenc_lib.training.evaluate import (
    EvalResult,
    evaluate_perplexity,
    HeldOutPerplexity,
    per_position_nll,
    swap_cost,
)
from posenc_lib.training.store import fine_tune_cached, train_cached
from posenc_lib.training.scales import describe_scale, get_scale, Scale, SCALES
from posenc_lib.training.train import (
    fine_tune,
    FineTuneConfig,
    smoothed_losses,
    stretched_fine_tune,
    train,
    TrainConfig,
    TrainRecord,
    weight_decay_factor,
)
from posenc_lib.analysis.attention_maps import (
    alibi_bias_attention,
    alibi_padding_error,
    attention_by_distance,
    attention_entropy,
    attention_input,
    attention_mass_beyond,
    attention_probabilities,
    effective_share,
    excess_over_range,
    far_weight_follows_score,
    head_table,
    last_queries_attention,
    left_padding_gaps,
    mean_attention_distance,
    rope_mean_pair_prediction,
    rope_pair_dims,
    rope_score_by_pair,
)
from posenc_lib.analysis.embeddings import token_vector_norm
from posenc_lib.analysis.equivariance import (
    averaging_attention,
    permutation_gap,
    permute_residual_stream,
    rotation_normal_form,
)
from posenc_lib.analysis.interventions import (
    clamped_rope_distances,
    long_window_conditions,
    shifted_positions,
    sliding_window,
)
from posenc_lib.analysis.learned_table import (
    cosine_matrix,
    distance_to_trained_rows,
    filled_learned_rows,
    fitted_scale,
    initial_position_table,
    LEARNED_FILLS,
    learned_position_table,
    main_direction,
    mean_by_offset,
    neighbour_distances,
    off_diagonal,
    offset_curve_shape,
    offset_r2,
    offset_structure,
    pair_angles,
    perplexity_with_rows,
    sinusoidal_angle_error,
    sinusoidal_offset_curve,
    sinusoidal_offset_distance,
    table_movement,
    TrainedRowDistance,
    with_learned_rows,
)
from posenc_lib.analysis.ngram import ngram_cross_entropy
from posenc_lib.analysis.probes import hidden_states, quartiles_by_range, RidgeProbe
from posenc_lib.analysis.t5_buckets import removed_t5_bucket, t5_bucket_weight
from posenc_lib.tasks.recall import (
    make_recall_window,
    passkey_recall_config,
    recall_accuracy,
    recall_loss,
    recall_training_batch,
    RecallConfig,
    RecallTemplate,
    sample_recall_windows,
)
from posenc_lib.tasks.retrieval import (
    byte_encode,
    make_passkey,
    MARKED_TEMPLATE,
    passkey_accuracy,
    PasskeyTemplate,
)
from posenc_lib.tasks.sweep import (
    level_spread,
    load_results,
    per_byte,
    plan_sweep,
    press_table,
    protocol_gap,
    protocol_tables,
    PROTOCOLS,
    ratio_spread,
    ratio_spread_table,
    relative_gain,
    results_frame,
    run_sweep,
    seed_table,
    seed_values,
    shard_runs,
    summary_table,
)
from posenc_lib.pretrained.loading import (
    load_pretrained,
    model_file,
    PosencRopeAttention,
    SMOLLM2,
    text_tokens,
    token_nll,
    use_own_rope,
    use_posenc_rope,
)
from posenc_lib.pretrained.checkup import (
    critical_pair,
    load_model,
    logits_reproduced,
    pairing_losses,
    positional_pair_shares,
    probe_layout,
    rope_settings,
    tiny_llama,
)
from posenc_lib.pretrained.kv_cache import (
    cached_decode_logits,
    kv_cache_bytes_per_token,
    recomputed_logits,
    rerotate_keys,
    rerotation_error,
)
from posenc_lib.pretrained.long_context import (
    block_perplexity,
    float32_angle_rounding,
    load_long_context_results,
    long_context_blocks,
    read_long_context_runs,
    run_provenance_table,
    run_stretch,
    transformers_dynamic_stretch,
)
from posenc_lib.pretrained.passkey import passkey_table, with_identical_rows
from posenc_lib.pretrained.streaming import (
    block_means,
    compare_streaming,
    streaming_forms_gap,
    STREAMING_LABELS,
    streaming_logits,
    STREAMING_MODES,
    streaming_nll,
    streaming_table,
    StreamingConfig,
)
from posenc_lib.measure import (
    alibi_attention_folded_keys,
    AttentionVariant,
    attention_bias_bytes,
    benchmark_rows,
    compare,
    load_stored_benchmark,
    memory_traffic,
    per_run,
    rope_angle_errors,
    rope_bytes,
    rope_error_in_eps,
    RopeVariant,
    run_provenance,
    run_time,
    alibi_folding_errors,
    scores_computed,
    sdpa_path,
    spread,
    spread_table,
    stored_benchmark_runs,
    traffic_table,
    with_cpu_time_fractions,
)
from posenc_lib.players import (
    attention_by_length_player,
    context_extension_player,
    rope_rotation_player,
)
from posenc_book.plotting import (
    binned_means,
    legend_below,
    log_axes,
    log_bins,
    mark_train_length,
    mark_vertical,
    plain_log_ticks,
    plot_angle_errors,
    plot_condition_bars,
    plot_decay_curves,
    plot_extension_panels,
    plot_frequency_ratios,
    plot_gap_bars,
    plot_head_curves,
    plot_heat_map_grid,
    plot_long_context_runs,
    plot_loss_by_context,
    plot_loss_by_position,
    plot_loss_curves,
    plot_per_run,
    plot_perplexity_vs_length,
    plot_position_readout,
    plot_ratio_marks,
    plot_rope_pair_terms,
    plot_share_maps,
    plot_sweep_protocols,
    plot_table_rows,
    plot_time_by_length,
    plot_weight_by_distance,
    show_figure,
    use_book_style,
)
from posenc_book.schemes import method_label, METHOD_STYLE, scheme_label, SCHEME_STYLE
from posenc_book.stored import (
    budget_runs_frame,
    end_of_window_loss,
    evaluation_nll,
    kept_seeds,
    load_passkey_runs,
    load_stored_results,
    mean_and_half_range,
    nll_by_seed,
    passkey_cells,
    passkey_run_shares,
    pooled_passkey_accuracy,
    provenance_label,
    seed_gaps,
    seed_mean,
    stored_results_dir,
    stretched_passkey_share,
    token_start_label,
)
from posenc_lib.training import sotu as _sotu  # noqa: F401  registers "sotu" in CORPORA
from posenc_book.tables import (
    context_groups,
    Link,
    loss_by_context,
    mean_spread_table,
    value_span,
)
from posenc_book.cited import (
    HAVIV2022_PERPLEXITY,
    haviv_perplexities,
    press_2022_speeds,
    press_ratios,
    WT103_BYTES,
    WT103_BYTES_PER_TOKEN,
    WT103_TOKENS,
)
from posenc_lib.analysis.context_extension import (
    check_stretched_wavelengths,
    check_untuned_extension,
    last_layer_attention,
    stretched_perplexities,
)
from posenc_book.ledger import (
    frequency_form_table,
    Ledger,
    seeds_note,
    table_verdict_kinds,
    VERDICT_KINDS,
)
from posenc_lib.encodings.sinusoidal import FREQUENCY_FORMS, frequency_form_errors

from posenc_lib.records import package_versions, require_version

__version__ = "0.1.0"

__all__ = [
    "alibi_attention",
    "alibi_attention_flex",
    "alibi_attention_folded_keys",
    "alibi_bias",
    "alibi_bias_attention",
    "alibi_bias_from_mask",
    "alibi_folding_errors",
    "ALIBI_IMPLEMENTATIONS",
    "alibi_padding_error",
    "alibi_slopes",
    "apply_mrope",
    "apply_rope",
    "apply_rope_blocked",
    "assert_above",
    "assert_below",
    "attend",
    "attention_bias_bytes",
    "attention_by_distance",
    "attention_by_length_player",
    "attention_entropy",
    "attention_input",
    "attention_mass_beyond",
    "attention_probabilities",
    "AttentionVariant",
    "averaging_attention",
    "benchmark_rows",
    "binned_means",
    "block_means",
    "block_perplexity",
    "budget_runs_frame",
    "byte_encode",
    "bytes_to_tokens",
    "cached_decode_logits",
    "CAUSAL_BLOCK",
    "causal_mask",
    "check_stretched_wavelengths",
    "check_untuned_extension",
    "clamped_rope_distances",
    "compare",
    "compare_streaming",
    "context_extension_player",
    "context_groups",
    "Corpus",
    "cosine_matrix",
    "critical_pair",
    "critical_pair_index",
    "decade_bounds",
    "decay_by_parts_checks",
    "decay_curves",
    "decay_table",
    "DEFAULT_INIT_STD",
    "describe_scale",
    "device_name",
    "dimension_frequencies",
    "distance_to_trained_rows",
    "dynamic_ntk_base",
    "dynamic_stretch",
    "effective_share",
    "end_of_window_loss",
    "EvalResult",
    "evaluate_perplexity",
    "evaluation_nll",
    "every_kth_layer",
    "excess_over_range",
    "far_weight_follows_score",
    "filled_learned_rows",
    "fine_tune",
    "fine_tune_cached",
    "FineTuneConfig",
    "fitted_scale",
    "float32_angle_rounding",
    "frequency_form_errors",
    "frequency_form_table",
    "FREQUENCY_FORMS",
    "get_scale",
    "HAVIV2022_PERPLEXITY",
    "haviv_perplexities",
    "head_table",
    "HeldOutPerplexity",
    "hidden_states",
    "initial_position_table",
    "interleaved_to_half_permutation",
    "kept_seeds",
    "kv_cache_bytes_per_token",
    "last_layer_attention",
    "last_queries_attention",
    "last_unseen_distances",
    "LEARNED_FILLS",
    "learned_position_table",
    "LearnedPositionalEmbedding",
    "Ledger",
    "left_padding_gaps",
    "legend_below",
    "level_spread",
    "Link",
    "load_corpus",
    "load_interleaved_as_half",
    "load_long_context_results",
    "load_model",
    "load_passkey_runs",
    "load_pretrained",
    "load_results",
    "load_sotu",
    "load_stored_benchmark",
    "load_stored_results",
    "log_axes",
    "log_bins",
    "logits_reproduced",
    "long_context_blocks",
    "long_window_conditions",
    "loss_by_context",
    "main_direction",
    "make_passkey",
    "make_recall_window",
    "mark_train_length",
    "mark_vertical",
    "MARKED_TEMPLATE",
    "mean_and_half_range",
    "mean_attention_distance",
    "mean_by_offset",
    "mean_spread_table",
    "memory_traffic",
    "method_label",
    "method_scaling",
    "METHOD_STYLE",
    "model_file",
    "ModelConfig",
    "mrope_pair_axes",
    "neighbour_distances",
    "neox_rotary_dim",
    "ngram_cross_entropy",
    "nll_by_seed",
    "normalize_logit_scaling",
    "normalize_rope_parameters",
    "normalize_rope_scaling",
    "ntk_full_turn_stretch",
    "ntk_turn_margin",
    "off_diagonal",
    "offset_curve_shape",
    "offset_r2",
    "offset_structure",
    "p_rope_kept_pairs",
    "package_versions",
    "pair_angles",
    "pair_stretch",
    "pairing_losses",
    "passkey_accuracy",
    "passkey_cells",
    "passkey_recall_config",
    "passkey_run_shares",
    "passkey_table",
    "PasskeyTemplate",
    "per_byte",
    "per_position_nll",
    "per_run",
    "permutation_gap",
    "permute_residual_stream",
    "perplexity_with_rows",
    "pick_device",
    "plain_log_ticks",
    "plan_sweep",
    "plot_angle_errors",
    "plot_condition_bars",
    "plot_decay_curves",
    "plot_extension_panels",
    "plot_frequency_ratios",
    "plot_gap_bars",
    "plot_head_curves",
    "plot_heat_map_grid",
    "plot_long_context_runs",
    "plot_loss_by_context",
    "plot_loss_by_position",
    "plot_loss_curves",
    "plot_per_run",
    "plot_perplexity_vs_length",
    "plot_position_readout",
    "plot_ratio_marks",
    "plot_rope_pair_terms",
    "plot_share_maps",
    "plot_sweep_protocols",
    "plot_table_rows",
    "plot_time_by_length",
    "plot_weight_by_distance",
    "pooled_passkey_accuracy",
    "PosencRopeAttention",
    "positional_pair_shares",
    "positions_from_mask",
    "press_2022_speeds",
    "press_ratios",
    "press_table",
    "probe_layout",
    "protocol_gap",
    "protocol_tables",
    "PROTOCOLS",
    "provenance_label",
    "quartiles_by_range",
    "query_scale",
    "ratio_spread",
    "ratio_spread_table",
    "read_austen_book",
    "read_long_context_runs",
    "recall_accuracy",
    "recall_loss",
    "recall_training_batch",
    "RecallConfig",
    "RecallTemplate",
    "recomputed_logits",
    "relative_gain",
    "removed_t5_bucket",
    "require_version",
    "rerotate_keys",
    "rerotation_error",
    "results_frame",
    "RidgeProbe",
    "rope_angle_errors",
    "rope_bytes",
    "rope_complex",
    "rope_cos_sin",
    "rope_error_in_eps",
    "rope_inverse_frequencies",
    "rope_mean_pair_prediction",
    "rope_pair_dims",
    "rope_pairs_as_complex",
    "rope_phases",
    "rope_rotate_half_naive",
    "rope_rotation_player",
    "rope_scaled_frequencies",
    "rope_score_by_pair",
    "rope_settings",
    "ROPE_TYPES",
    "RopeVariant",
    "RotaryEmbedding",
    "rotate_pairs",
    "rotate_pairs_blocked",
    "rotation_normal_form",
    "run_provenance",
    "run_provenance_table",
    "run_stretch",
    "run_sweep",
    "run_time",
    "sample_batch",
    "sample_recall_windows",
    "Scale",
    "SCALES",
    "scheme_label",
    "SCHEME_STYLE",
    "SCHEMES",
    "score_mask",
    "scores_computed",
    "sdpa_path",
    "seed_gaps",
    "seed_mean",
    "seed_table",
    "seed_values",
    "seeds_note",
    "SelfAttention",
    "shard_runs",
    "shifted_positions",
    "show_figure",
    "sinusoidal_angle_error",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_offset_curve",
    "sinusoidal_offset_distance",
    "sliding_window",
    "SMOLLM2",
    "smoothed_losses",
    "softmax_scale_multiplier",
    "spread",
    "spread_table",
    "start_chapter",
    "stored_benchmark_runs",
    "stored_results_dir",
    "streaming_forms_gap",
    "STREAMING_LABELS",
    "streaming_logits",
    "STREAMING_MODES",
    "streaming_nll",
    "streaming_table",
    "StreamingConfig",
    "STRETCH_METHODS",
    "stretch_scaling",
    "stretched_fine_tune",
    "stretched_passkey_share",
    "stretched_perplexities",
    "summary_table",
    "swap_cost",
    "t5_bucket_pair_counts",
    "t5_bucket_starts",
    "t5_bucket_weight",
    "t5_relative_position_bucket",
    "T5RelativePositionBias",
    "table_movement",
    "table_verdict_kinds",
    "text_tokens",
    "tiny_llama",
    "token_nll",
    "token_start_label",
    "token_vector_norm",
    "tokens_to_text",
    "traffic_table",
    "train",
    "train_cached",
    "TrainConfig",
    "TrainedRowDistance",
    "TrainRecord",
    "TransformerLM",
    "transformers_dynamic_stretch",
    "unseen_distance_share",
    "use_book_style",
    "use_own_rope",
    "use_posenc_rope",
    "value_span",
    "VERDICT_KINDS",
    "weight_decay_factor",
    "with_cpu_time_fractions",
    "with_identical_rows",
    "with_learned_rows",
    "with_rope_scaling",
    "WT103_BYTES",
    "WT103_BYTES_PER_TOKEN",
    "WT103_TOKENS",
    "yarn_part_scaling",
    "YARN_PARTS",
]
