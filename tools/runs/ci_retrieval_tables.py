"""Print the tables of results/ci-retrieval/README.md from the JSON runs in that folder.

    PYTHONPATH=. python tools/runs/ci_retrieval_tables.py [NAME_PART]

Only runs whose file name contains NAME_PART (default: every run) are read. Passkey
accuracy is pooled over seeds (correct / trials); copy gains are the mean over seeds.
"""

import json
import sys
from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parents[2] / "results" / "ci-retrieval"
part = sys.argv[1] if len(sys.argv) > 1 else ""
runs = [json.loads(p.read_text()) for p in sorted(OUT.glob("*.json"))
        if part in p.name and not p.name.startswith("rope-methods")]
pk, cp = [], []
for run in runs:
    recipe = run["recipe"]
    scheme, seed = recipe["base"]["model"]["position"], recipe["base"]["seed"]
    if recipe["base"]["model"].get("learned_init", "normal") != "normal":
        scheme += " (sinusoidal start)"
    for row in run["passkey"]:
        pk.append({"scheme": scheme, "seed": seed, "L": row["length"], "depth": row["depth"],
                   "correct": row["correct"], "trials": row["trials"]})
    for row in run["copy_gain"]:
        cp.append({"scheme": scheme, "seed": seed, "L": row["length"], "r": row["distance"],
                   "gain": row["gain"], "first": row["nll_first"],
                   "second": row["nll_second"], "vs_unseen": row["gain_vs_unseen"]})
pd.set_option("display.width", 120)
if pk:
    df = pd.DataFrame(pk).dropna()
    pooled = df.groupby(["scheme", "L"])[["correct", "trials"]].sum()
    print("passkey accuracy (all depths, seeds pooled)")
    print((pooled.correct / pooled.trials).unstack("L").round(3))
    pooled = df.groupby(["scheme", "depth"])[["correct", "trials"]].sum()
    print("passkey accuracy by depth (all L, seeds pooled)")
    print((pooled.correct / pooled.trials).unstack("depth").round(3))
    print("seeds:", sorted(df.seed.unique()))
if cp:
    df = pd.DataFrame(cp).dropna()
    for column in ("gain", "vs_unseen"):
        print(f"copy {column}, nats/byte, mean over seeds, by L (rows) and r (columns)")
        for scheme, group in df.groupby("scheme"):
            print(scheme)
            print(group.groupby(["L", "r"])[column].mean().unstack("r").round(3))
