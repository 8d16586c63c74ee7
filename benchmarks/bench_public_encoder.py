"""The public encoder's recipe, chosen on public data: each setting of a small declared grid (epochs × learning
rate, top 2 layers) fine-tunes MiniLM on the public corpus and is scored by the weighted F1 of its own softmax
layer on the proxy's validation part (public reports the encoder never trains on). Prints the wall time of each
fine-tune and the table; reads no private report and no key (docs/encoder.md).

    python benchmarks/bench_public_encoder.py [--epochs 1 3] [--lr 1e-4 3e-4]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    import torch

    from dprelease.core.backends import public_encoder as pe
    from dprelease.core.config import load_params
    from dprelease.core.data.public_corpus import corpus
    from dprelease.core.data.stages import period_split, proxy_splits, public_design

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--epochs", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--lr", type=float, nargs="+", default=[1e-4, 3e-4])
    args = ap.parse_args(argv)
    params = load_params(args.params)
    texts, labels, meta = corpus(params, ROOT)
    _, public = period_split(params, ROOT)
    design = public_design(params, public)
    val = proxy_splits(public, design, params)["proxy_validation"]
    index = {c: i for i, c in enumerate(design["codes"])}
    vt, vl = val["text"].tolist(), [index[c] for c in val["label"]]
    print(f"corpus: {meta['what']}; scored on proxy_validation ({len(vt)} reports); {torch.get_num_threads()} threads")
    print("| epochs | lr | fine-tune s | proxy_validation weighted F1 (its softmax layer) |\n|---|---|---|---|")
    for epochs in args.epochs:
        for lr in args.lr:
            recipe = pe.Recipe(epochs=epochs, lr=lr, seed=params.seed)
            start = time.perf_counter()
            layers, head = pe.tune(texts, labels, n_classes=meta["classes"], recipe=recipe, with_head=True)
            seconds = time.perf_counter() - start
            print(f"| {epochs} | {lr:g} | {seconds:.0f} | {pe.head_f1(layers, head, vt, vl):.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
