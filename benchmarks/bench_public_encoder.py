"""The public encoder's recipe, chosen on public data: each setting of a small declared grid (epochs × learning
rate, top 2 layers) fine-tunes MiniLM on the public corpus and is scored by the weighted F1 of its own softmax
layer on the proxy's validation part (public reports the encoder never trains on). Prints the wall time of each
fine-tune and the table; reads no private report and no key (docs/encoder.md).

    python benchmarks/bench_public_encoder.py [--epochs 1 3] [--lr 1e-4 3e-4]

The gain it buys: run the frontier's stages (`dprelease stage stratify|featurize|frontier_public|frontier_dpsgd`)
in two project folders with the same key, one with `features.encoder: pretrained`, one with `public_tuned`, then

    python benchmarks/bench_public_encoder.py --gain PRETRAINED_FOLDER TUNED_FOLDER

prints the public model and DP-SGD (from zero and warm-started) at each ε with both encoders (test weighted F1,
mean ± sd over the frontier's secret-seeded refits: the operator's internal figures).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


SERIES = {
    "public_model": "the public model (ε 0)",
    "dpsgd_linear_proxy_warm_rdp": "DP-SGD from the public model",
    "dpsgd_linear_proxy_prv": "DP-SGD from zero",
}


def _points(folder: Path) -> dict[tuple[str, float], list[float]]:
    import json

    out = {}
    for name in ("public_only", "dpsgd"):
        for p in json.loads((folder / "metrics" / "frontier" / f"{name}.json").read_text())["points"]:
            if p["mechanism"] in SERIES:
                out[(p["mechanism"], float(p["target_epsilon"] or p["epsilon"]))] = p["weighted_f1"]
    return out


def gain(before: Path, after: Path) -> int:
    """The table of the two frontiers, and the tuned encoder's gain at each point."""
    import statistics

    a, b = _points(before), _points(after)

    def fmt(v: list[float]) -> str:
        return f"{statistics.mean(v):.3f}" + (f" ± {statistics.stdev(v):.3f}" if len(v) > 1 else "")

    print("| series | ε | wheel encoder | public encoder | gain |\n|---|---|---|---|---|")
    for key in sorted(set(a) & set(b), key=lambda k: (list(SERIES).index(k[0]), k[1])):
        print(
            f"| {SERIES[key[0]]} | {key[1]:g} | {fmt(a[key])} | {fmt(b[key])} | "
            f"{statistics.mean(b[key]) - statistics.mean(a[key]):+.3f} |"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 4 and sys.argv[1] == "--gain":
        return gain(Path(sys.argv[2]), Path(sys.argv[3]))
    import torch

    from dprelease.core.backends import public_encoder as pe
    from dprelease.core.config import load_params
    from dprelease.core.data.public_corpus import corpus

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default=str(ROOT / "params.yaml"), help="the params file (data, proxy, seed)")
    ap.add_argument("--epochs", type=int, nargs="+", default=[1, 2], help="epochs of the grid")
    ap.add_argument("--lr", type=float, nargs="+", default=[1e-4, 3e-4], help="learning rates of the grid")
    args = ap.parse_args(argv)
    params = load_params(args.params)
    texts, labels, meta = corpus(params, ROOT)
    vt, vl, _ = corpus(params, ROOT, parts=("proxy_validation",))
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
