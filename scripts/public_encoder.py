"""Reproduce the shipped public encoder: MiniLM's top layers fine-tuned on the public period (docs/encoder.md).

    python scripts/public_encoder.py                      # into src/dprelease/core/resources/public_encoder/
    python scripts/public_encoder.py --out OTHER_FOLDER    # elsewhere (then compare with the shipped one)
    python scripts/public_encoder.py --evaluate           # also: a linear probe on the proxy's validation part,
                                                          # wheel encoder vs tuned (public figures only)
    python scripts/public_encoder.py --features-only      # only the shipped table of the public period's embeddings

Reads the params file's data and proxy sections (public inputs only: no key, no private report).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def probe(params, *, tuned: bool) -> float:
    """Weighted F1 on proxy_validation of a logistic regression fit on the corpus's embeddings (public only)."""
    import numpy as np
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score

    from dprelease.core.backends import minilm
    from dprelease.core.backends.head import embed
    from dprelease.core.data.public_corpus import corpus

    minilm.load.cache_clear()
    texts, labels, _ = corpus(params, ROOT)
    val_texts, val_labels, _ = corpus(params, ROOT, parts=("proxy_validation",))
    enc = "public_tuned" if tuned else "pretrained"
    x = embed(texts, torch.device("cpu"), encoder=enc, progress=True).numpy() * 384**0.5
    xv = embed(val_texts, torch.device("cpu"), encoder=enc, progress=True).numpy() * 384**0.5
    clf = LogisticRegression(C=1.0, max_iter=2000).fit(x, np.array(labels))
    return float(f1_score(val_labels, clf.predict(xv), average="weighted"))


def write_table(params) -> None:
    """The shipped table of the public period's embeddings, by the shipped layers."""
    from dprelease.core.backends import public_encoder
    from dprelease.core.data.stages import period_split

    _, public = period_split(params, ROOT)
    start = time.perf_counter()
    rows = public_encoder.write_features(public["text"].tolist(), max_length=params.features.max_length)
    print(f"public features: {rows} narratives in {time.perf_counter() - start:.1f} s")


def main(argv: list[str] | None = None) -> int:
    from dprelease.core.backends import public_encoder
    from dprelease.core.config import load_params
    from dprelease.core.data.public_corpus import corpus
    from dprelease.core.encoder_recipe import RECIPE, RESOURCE

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default=str(ROOT / "params.yaml"), help="the params file (data, proxy, seed)")
    ap.add_argument("--out", type=Path, default=RESOURCE, help="where to write (default: the shipped folder)")
    ap.add_argument("--evaluate", action="store_true", help="linear probe on proxy_validation, wheel vs tuned")
    ap.add_argument("--features-only", action="store_true", help="only re-embed the public period (the table)")
    args = ap.parse_args(argv)
    params = load_params(args.params)
    if args.features_only:
        write_table(params)
        return 0
    texts, labels, meta = corpus(params, ROOT)
    print(f"corpus: {meta['what']}", file=sys.stderr)
    start = time.perf_counter()
    written = public_encoder.run(
        texts,
        labels,
        n_classes=meta["classes"],
        corpus=meta,
        folder=args.out,
        recipe=public_encoder.Recipe(seed=params.seed),
    )
    print(
        f"fine-tune: {written['wall_seconds']} s on {written['threads']} threads "
        f"({time.perf_counter() - start:.1f} s with the slice check)"
    )
    if args.out.resolve() == RESOURCE.resolve():  # the shipped layers changed: so does the table they embed
        from dprelease.core.encoder_recipe import recipe

        recipe.cache_clear()
        write_table(params)
    if args.evaluate:
        if args.out.resolve() != RESOURCE.resolve():
            print("--evaluate reads the shipped encoder: run it with the default --out", file=sys.stderr)
            return 2
        from dprelease.core.encoder_recipe import recipe

        recipe.cache_clear()
        figures = {"pretrained": probe(params, tuned=False), "public_tuned": probe(params, tuned=True)}
        written["proxy_probe_weighted_f1"] = {k: round(v, 4) for k, v in figures.items()}
        (args.out / RECIPE.name).write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
        print(f"linear probe on proxy_validation, weighted F1: {figures}")
    print(json.dumps(written, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
