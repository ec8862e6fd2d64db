"""Named experiment sizes: one knob (``SCALE``) takes a chapter from a laptop CPU to a GPU.

``ci`` runs on 2 CPU cores in about 15 s per model (what the notebooks run live and CI checks);
``book`` is a larger CPU run on the larger ``sotu`` corpus; ``gpu`` is sized for one modern GPU
with bf16 autocast.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from posenc_lib.model.transformer import ModelConfig
from posenc_lib.training.train import TrainConfig


@dataclass(frozen=True)
class Scale:
    """Model size, training budget and evaluation grid of one experiment size.

    Attributes:
        name: ``"ci"``, ``"book"`` or ``"gpu"``.
        d_model, num_layers, num_heads: model size.
        seq_len: L_train (bytes).
        batch_size, steps, lr, warmup_steps: training budget.
        eval_lengths: evaluation lengths L, from L_train up.
        eval_tokens: how many test bytes each evaluation scores (the same span for every L).
        seeds: training seeds for sweeps (chapters that need one model use the first).
        autocast_dtype: ``"float32"`` or ``"bfloat16"``.
        model_extra: further :class:`ModelConfig` fields.
        corpus: the corpus to train and test on (a name in ``posenc_lib.training.data.CORPORA``).
        sliding_divisor: sliding-window evaluation at length L uses stride S = L / sliding_divisor,
            so every scored token after the first window sees at least L − S tokens of
            context (the first window scores all of its tokens).
        sweep_eval_tokens: test bytes each evaluation of a sweep scores (default ``eval_tokens``);
            smaller keeps 18 models × 5 lengths × 2 protocols affordable on a CPU.
    """

    name: str
    d_model: int
    num_layers: int
    num_heads: int
    seq_len: int
    batch_size: int
    steps: int
    lr: float
    warmup_steps: int
    eval_lengths: tuple[int, ...]
    eval_tokens: int
    seeds: tuple[int, ...] = (0, 1, 2)
    autocast_dtype: str = "float32"
    model_extra: dict = field(default_factory=dict)
    corpus: str = "austen"
    sliding_divisor: int = 2
    sweep_eval_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.sliding_divisor < 1:
            raise ValueError(f"sliding_divisor must be >= 1, got sliding_divisor={self.sliding_divisor}")

    def train_config(self, scheme: str, seed: int | None = None, **model_overrides) -> TrainConfig:
        """The :class:`TrainConfig` for one scheme and seed at this scale (learned table = L_train)."""
        model = ModelConfig(
            position=scheme,  # type: ignore[arg-type]
            d_model=self.d_model,
            num_layers=self.num_layers,
            num_heads=self.num_heads,
            max_positions=self.seq_len,
            **{**self.model_extra, **model_overrides},
        )
        return TrainConfig(
            model=model,
            seq_len=self.seq_len,
            batch_size=self.batch_size,
            steps=self.steps,
            lr=self.lr,
            warmup_steps=self.warmup_steps,
            seed=self.seeds[0] if seed is None else seed,
            autocast_dtype=self.autocast_dtype,
            corpus=self.corpus,
        )


SCALES: dict[str, Scale] = {
    "ci": Scale("ci", d_model=64, num_layers=2, num_heads=4, seq_len=128, batch_size=32, steps=300, lr=5e-3,
                warmup_steps=30, eval_lengths=(128, 256, 512, 1024, 2048), eval_tokens=65536, sweep_eval_tokens=16384),
    # book: the whole sweep (6 schemes × 3 seeds) in about 30 min of 2 CPU cores, on the larger corpus.
    "book": Scale("book", d_model=96, num_layers=2, num_heads=4, seq_len=128, batch_size=32, steps=400, lr=4e-3,
                  warmup_steps=40, eval_lengths=(128, 256, 512, 1024, 2048), eval_tokens=131072, corpus="sotu",
                  sweep_eval_tokens=32768),
    # gpu: ~4.8 M parameters, L_train 512, bf16 autocast; sized for 6 schemes × 3 seeds in about
    # 10 min on one modern GPU (an estimate: no GPU run has been made yet).
    "gpu": Scale("gpu", d_model=256, num_layers=6, num_heads=8, seq_len=512, batch_size=64, steps=1200, lr=2e-3,
                 warmup_steps=100, eval_lengths=(512, 1024, 2048, 4096, 8192), eval_tokens=262144,
                 autocast_dtype="bfloat16", corpus="sotu"),
}
"""The named sizes. Changing ``ci`` changes what the notebooks print: re-execute them."""


def get_scale(name: str) -> Scale:
    """Look up a scale by name.

    Raises:
        ValueError: for an unknown name (the message lists the known ones).
    """
    if name not in SCALES:
        raise ValueError(f"unknown scale {name!r}; known: {sorted(SCALES)}")
    return SCALES[name]


SCALE_FIELDS: dict[str, str] = {
    "width d_model": "d_model", "layers": "num_layers", "heads H": "num_heads",
    "L_train (bytes)": "seq_len", "batch (windows)": "batch_size",
    "training steps": "steps", "warm-up steps": "warmup_steps",
    "peak learning rate": "lr", "corpus": "corpus",
}
"""Display name → :class:`Scale` field, for :func:`describe_scale`."""


def describe_scale(name: str) -> dict:
    """A scale's settings as one table column: the fields of :data:`SCALE_FIELDS` under
    their display names, then the test bytes per evaluation (``sweep_eval_tokens``, else
    ``eval_tokens``), the parameters of its RoPE model and the bytes of its corpus's
    training split.

    Builds a RoPE model and loads the corpus (no training).

    Raises:
        ValueError: for an unknown scale name.
    """
    from posenc_lib.model.transformer import TransformerLM
    from posenc_lib.training.data import load_corpus

    s = get_scale(name)
    row = {label: getattr(s, field) for label, field in SCALE_FIELDS.items()}
    row["test bytes per evaluation"] = s.sweep_eval_tokens or s.eval_tokens
    row["parameters (RoPE model)"] = TransformerLM(s.train_config("rope").model).num_parameters()
    row["training split (bytes)"] = load_corpus(s.corpus).train.numel()
    return row
