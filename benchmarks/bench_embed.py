"""Embedding throughput before → after, the int8 encoder's agreement with float32, and `dprelease predict`'s wall time.

    python benchmarks/bench_embed.py [--n 500] [--repeats 3] [--release DIR --key KEY] [--runs 5] [--skip-int8]
    python benchmarks/bench_embed.py --predict-only [--src OTHER_CHECKOUT/src] [--release DIR --key KEY]
    python benchmarks/bench_embed.py --throughput-only [--n 500] [--repeats 5] [--batch-sizes 32,64] [--skip-int8]

On the bundled OSHA narratives (``data/osha_sir_2015_2016.csv.gz``, the pipeline's per-class sample: cap 200,
seed 0, split in halves) it prints, as the median of ``--repeats`` passes over the same ``--n`` narratives (the variants' passes in turn):

* narratives/s of the embedding as it was (``transformers``' ``AutoTokenizer`` + ``AutoModel``, batches of 64 by
  character length; and the older padded-to-128, input-order batching), and of
  :func:`dprelease.core.backends.head.embed` now (the plain-torch MiniLM, token-count-sorted batches padded to
  their own longest) at several batch sizes, float32 and int8 (torch dynamic quantization);
* the int8 encoder against float32 on the whole test half: the largest coordinate difference, the smallest
  cosine between the two vectors of a narrative, and the share of the test half on which a released head gives
  the same code from both (``--release``: that release's head; default: a head trained here, non-privately, on
  the float32 train half, with the pipeline's width);
* 5 narratives embedded on 1 and on 2 torch threads (median of 7; `embed` uses one below 64 narratives);
* the median wall time of ``--runs`` fresh ``dprelease predict`` processes on the 5 example narratives
  (``data/example_narratives.csv``), with ``--release``/``--key`` or a temporary signed release of the head above
  (``--predict-only``: of an untrained head, nothing else timed). ``--src DIR`` runs those processes on another
  checkout's ``src`` (``PYTHONPATH``), e.g. the commit before a change, for its "before" figure.

A benchmark that prints figures, not a test: nothing is asserted, nothing is written outside a temporary folder.
Figures and the command that produced them: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from dprelease.core import offline
from dprelease.core.backends import head as head_module
from dprelease.core.backends import minilm
from dprelease.core.backends.head import EMBED_BATCH, embed
from dprelease.core.threads import torch_threads

DATA = Path("data/osha_sir_2015_2016.csv.gz")
EXAMPLES = Path("data/example_narratives.csv")
CPU = torch.device("cpu")


def sample(seed: int = 0):
    from dprelease.core.data.records import read_records, split, stratified_sample

    return split(stratified_sample(read_records(DATA), cap=200, seed=seed), test_size=0.5, seed=seed)


def transformers_embed(texts: list[str], *, batch_size: int = 64, pad_to_max: bool = False) -> torch.Tensor:
    """The embedding before this change: ``transformers``' tokenizer and model, batches of ``batch_size`` sorted by
    character length padded to their longest (``pad_to_max``: every batch padded to 128, in input order)."""
    from dprelease.core.backends.encoder import load_encoder, load_tokenizer, mean_pool

    tok, enc = load_tokenizer(), load_encoder(CPU)
    order = list(range(len(texts))) if pad_to_max else sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = torch.empty(len(texts), enc.config.hidden_size)
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            batch = tok(
                [texts[i] for i in idx],
                padding="max_length" if pad_to_max else True,
                truncation=True,
                max_length=128,
                return_tensors="pt",
            )
            out[idx] = F.normalize(mean_pool(enc(**batch).last_hidden_state, batch["attention_mask"]), dim=-1)
    return out


def rates(variants: dict, texts: list[str], repeats: int) -> dict[str, tuple[float, torch.Tensor]]:
    """label → (median narratives/s, vectors): each variant warmed up on 8 texts, then the passes taken in turn
    (variant 1, 2, …, 1, 2, …) so that a machine whose load changes meanwhile weighs on every variant alike."""
    for fn in variants.values():
        fn(texts[:8])
    secs: dict[str, list[float]] = {label: [] for label in variants}
    out = {}
    for _ in range(repeats):
        for label, fn in variants.items():
            start = time.perf_counter()
            out[label] = fn(texts)
            secs[label].append(time.perf_counter() - start)
    return {label: (len(texts) / statistics.median(secs[label]), out[label]) for label in variants}


def train_head(x: torch.Tensor, y: torch.Tensor, n_classes: int, *, hidden: int = 256, epochs: int = 300):
    """A non-private stand-in for the released head (same architecture), full-batch Adam on float32 embeddings."""
    from dprelease.core.backends.head import Head

    head = Head(x.shape[1], n_classes, hidden, 0.0, seed=0)
    opt = torch.optim.Adam(head.parameters(), lr=3e-3, weight_decay=1e-4)
    for _ in range(epochs):
        opt.zero_grad()
        F.cross_entropy(head(x), y).backward()
        opt.step()
    return head.eval()


def release_head(folder: Path):
    from dprelease.core.backends.head import load_release_head
    from dprelease.core.release.classifier import verify_classifier

    _, arch, _ = verify_classifier(folder)
    return load_release_head(folder, arch, CPU)


def stand_in_release(root: Path, head, codes: list[str]) -> tuple[Path, Path]:
    """(release folder, public key): ``head`` as a signed release in ``root``, for timing `predict` only."""
    from dprelease.core.backends.head import HeadBackend
    from dprelease.core.config import HeadParams
    from dprelease.core.data.records import load_titles
    from dprelease.core.privacy.guarantee import ppm
    from dprelease.core.release.folder import publish, write_release
    from dprelease.core.release.signing import PUBLIC, ensure_key

    titles = load_titles()
    backend = HeadBackend(n_classes=len(codes), device=CPU, seed=0, params=HeadParams(hidden=head.hidden))
    signer, _ = ensure_key(root / "keys", signer="benchmark")
    write_release(
        root / "staging",
        backend,
        head,
        codes,
        [titles.get(c, c) for c in codes],
        {"guarantee": ppm(1.0, 0.5).as_dict()},
        ["core/release/folder.py"],
    )
    publish(root / "staging", root / "release", "# benchmark stand-in (not private)\n", signer=signer)
    return root / "release", root / "keys" / PUBLIC


def time_predict(release: Path, key: Path, runs: int, out_dir: Path, src: str | None = None) -> list[float]:
    argv = [
        str(Path(sys.executable).parent / "dprelease"),
        "predict",
        "--release",
        str(release),
        "--key",
        str(key),
        "--input",
        str(EXAMPLES),
    ]
    env = os.environ | ({"PYTHONPATH": str(Path(src).resolve())} if src else {})
    secs = []
    for i in range(runs):
        output = out_dir / f"coded-{i}.csv"
        start = time.perf_counter()
        proc = subprocess.run([*argv, "--output", str(output)], capture_output=True, text=True, env=env)
        secs.append(time.perf_counter() - start)
        if proc.returncode:
            raise SystemExit(f"dprelease predict failed: {proc.stderr.strip()}")
    return secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500, help="narratives per throughput pass (default: 500)")
    ap.add_argument("--repeats", type=int, default=3, help="passes per variant, the median is printed (default: 3)")
    ap.add_argument("--batch-sizes", default="32,64,128", help="batch sizes of the new embedding timed")
    ap.add_argument("--release", default=None, help="a head release folder (its head scores the agreement)")
    ap.add_argument("--key", default=None, help="the release's public key (with --release)")
    ap.add_argument("--runs", type=int, default=5, help="`dprelease predict` processes timed (default: 5)")
    ap.add_argument("--skip-before", action="store_true", help="do not time the transformers embedding")
    ap.add_argument("--skip-int8", action="store_true", help="do not time or compare the int8 encoder")
    ap.add_argument("--predict-only", action="store_true", help="time `dprelease predict` only")
    ap.add_argument("--throughput-only", action="store_true", help="stop after the narratives/s table")
    ap.add_argument("--src", default=None, help="time `dprelease predict` on this src folder (PYTHONPATH)")
    args = ap.parse_args()
    offline.quiet()
    warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")  # torch's notice on its int8 API
    if args.release and not args.key:
        ap.error("--release needs --key")
    if args.predict_only:
        from dprelease.core.backends.head import Head

        return predict_figures(
            args,
            Path(args.release) if args.release else None,
            args.key and Path(args.key),
            Head(384, 3, 256, 0.0).eval(),
            ["111", "112", "113"],
        )

    train, test = sample()
    texts = train["text"].sample(frac=1.0, random_state=0).tolist()[: args.n]
    tokens = [len(i) for i in minilm.token_ids(texts, 128)]
    print(
        f"# {len(texts)} OSHA narratives, {statistics.mean(tokens):.0f} tokens on average (median "
        f"{statistics.median(tokens):.0f}, max {max(tokens)}); torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; median of {args.repeats} passes"
    )
    print(
        f"{'embedding':60s} {'narratives/s':>12s} {'max |Δ| vs ref':>14s}  (ref: the char-length-sorted 'before', else the first line)"
    )
    variants = {}
    if not args.skip_before:
        variants["before: transformers, padded to 128, input order, batch 64"] = lambda t: transformers_embed(
            t, pad_to_max=True
        )
        variants["before: transformers, char-length-sorted, batch 64"] = transformers_embed
    for b in map(int, args.batch_sizes.split(",")):
        variants[f"after: plain-torch MiniLM, token-sorted, batch {b}" + (" (default)" if b == EMBED_BATCH else "")] = (
            lambda t, b=b: embed(t, CPU, batch_size=b)
        )
    if not args.skip_int8:
        variants[f"after: int8 dynamic quantized, token-sorted, batch {EMBED_BATCH}"] = lambda t: embed(
            t, CPU, quantized=True
        )
    measured = rates(variants, texts, args.repeats)
    reference = next((v for k, (_, v) in measured.items() if "char-length" in k), measured[next(iter(measured))][1])
    for label, (per_s, v) in measured.items():
        print(f"{label:60s} {per_s:12.1f} {(v - reference).abs().max():14.2e}", flush=True)
    if args.throughput_only:
        return

    test_texts = test["text"].tolist()
    x32 = embed(test_texts, CPU)
    codes = sorted(set(train["label"]))
    if args.release:
        head, release, key = release_head(Path(args.release)), Path(args.release), Path(args.key)
        print(f"# head: the release {release}")
    else:
        x_train = embed(train["text"].tolist(), CPU)
        y = torch.tensor([codes.index(c) for c in train["label"]])
        head = train_head(x_train, y, len(codes))
        accuracy = (head(x32).argmax(1) == torch.tensor([codes.index(c) for c in test["label"]])).float().mean()
        print(
            f"# head: a non-private stand-in ({len(codes)} classes, hidden 256) trained on {len(x_train)} float32 "
            f"train embeddings; test accuracy {accuracy:.3f}"
        )
        release = key = None
    if not args.skip_int8:
        x8 = embed(test_texts, CPU, quantized=True)
        cos = (x32 * x8).sum(1)
        with torch.no_grad():
            agree = (head(x32).argmax(1) == head(x8).argmax(1)).float().mean().item()
        print(
            f"int8 vs float32 on the test half ({len(test_texts)} narratives): max |Δ| {(x8 - x32).abs().max():.3e}, "
            f"min cosine {cos.min():.4f}, mean cosine {cos.mean():.4f}; the head's codes agree on "
            f"{100 * agree:.2f} % (bar: 99.5 %)"
        )
    few, small = test_texts[:5], head_module.SMALL_INPUT
    for n in (1, 2):
        head_module.SMALL_INPUT = 0  # embed's own one-thread rule off: the block's count holds
        try:
            with torch_threads(n):
                secs = []
                for _ in range(7):
                    start = time.perf_counter()
                    embed(few, CPU)
                    secs.append(time.perf_counter() - start)
        finally:
            head_module.SMALL_INPUT = small
        print(f"5 narratives on {n} torch thread(s): median {1000 * statistics.median(secs):.0f} ms")
    predict_figures(args, release, key, head, codes)


def predict_figures(args, release: Path | None, key: Path | None, head, codes: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-embed-") as tmp:
        if release is None:
            release, key = stand_in_release(Path(tmp), head, codes)
        secs = time_predict(release, key, args.runs, Path(tmp), args.src)
    where = f" (src: {args.src})" if args.src else ""
    print(
        f"dprelease predict of the {EXAMPLES.name} narratives (5), {args.runs} processes{where}: median "
        f"{statistics.median(secs):.2f} s (min {min(secs):.2f}, max {max(secs):.2f})"
    )


if __name__ == "__main__":
    main()
