"""The recipe-search pilots of results/ci-retrieval/README.md's first table: train one mixture model (not
cached), then print its passkey accuracy at L_train (five depths, 32 windows each, test
filler, draw seed 0: as ci_retrieval.py --quick) and the accuracy of each answer byte over
64 windows at depth 0.5 (how close to retrieving it is when exact match is 0).

    PYTHONPATH=. POSENC_DEVICE=cpu OMP_NUM_THREADS=1 python \\
        tools/runs/ci_retrieval_search_pilot.py SCHEME FRACTION STEPS TEMPLATE WEIGHT REPEAT

TEMPLATE is ``text`` (PasskeyTemplate()) or ``marked`` (MARKED_TEMPLATE); WEIGHT is
answer_weight, REPEAT repeat_fraction.
"""

import dataclasses
import sys
import time

import torch

from posenc_lib import get_scale, load_corpus
from posenc_lib.tasks.retrieval import (
    MARKED_TEMPLATE,
    PasskeyMixConfig,
    PasskeyTemplate,
    byte_encode,
    passkey_accuracy,
    sample_passkeys,
    train_passkey_mix,
)

scheme, fraction, steps, template, weight, repeat = sys.argv[1:7]
seed = int(sys.argv[7]) if len(sys.argv) > 7 else 0
template = PasskeyTemplate() if template == "text" else MARKED_TEMPLATE
scale, test = get_scale("ci"), load_corpus("austen").test
base = dataclasses.replace(scale.train_config(scheme, seed), steps=int(steps))
config = PasskeyMixConfig(base, float(fraction), template=template,
                          answer_weight=float(weight), repeat_fraction=float(repeat))
start = time.time()
model, record = train_passkey_mix(config, "cpu", progress=False)
rows = passkey_accuracy(model, byte_encode, [128], [0.0, 0.25, 0.5, 0.75, 1.0], trials=32,
                        filler=test, template=template)
examples = sample_passkeys(byte_encode, 128, 0.5, 64, filler=test, template=template)
batch = torch.stack([e.tokens for e in examples])
answer = examples[0].answer_start
with torch.no_grad():
    logits = model(batch)
per_byte = (logits[:, answer - 1 : -1].argmax(-1) == batch[:, answer:]).float().mean(0)
print(sys.argv[1:], "time", round(time.time() - start),
      "loss", round(sum(record.losses[-20:]) / 20, 3),
      [r["accuracy"] for r in rows], "per byte", [round(x, 2) for x in per_byte.tolist()])
