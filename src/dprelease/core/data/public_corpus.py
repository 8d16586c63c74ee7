"""The public encoder's training corpus: public reports only (docs/encoder.md).

Every report of the public period (``proxy.until`` and before) in the public label space, except the proxy's
validation part (``proxy_validation``), which scores the configurations chosen on public data and so must stay
unseen by the encoder. No private report and no key is read: the corpus is the same for every private extract.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from dprelease.core.config import Params
from dprelease.core.data.roles import report_ids
from dprelease.core.data.stages import period_split, proxy_splits, public_design

PARTS = ("proxy_train", "public_rest")  # the proxy's parts the encoder trains on (never proxy_validation)


def corpus(
    params: Params, root: str | Path = ".", *, parts: tuple[str, ...] = PARTS
) -> tuple[list[str], list[int], dict]:
    """(narratives, label indices, a description) of the public corpus, in content-id order.

    Args:
        params: the pipeline's params (data, proxy, seed: all public).
        root: the project folder the data path is relative to.
        parts: the proxy's parts to read (default: the encoder's corpus; ``("proxy_validation",)``: the held-out
            public reports that score the recipe's settings).

    Returns:
        The narratives, each one's index in the public label space, and a description of the corpus (public
        facts: the period, the counts, a sha256 over the reports' content ids) for the shipped recipe.json.
    """
    _, public = period_split(params, root)
    design = public_design(params, public)
    split = proxy_splits(public, design, params)
    frame = pd.concat([split[name] for name in parts], ignore_index=True)
    ids = report_ids(frame)
    order = sorted(range(len(frame)), key=ids.__getitem__)
    frame, ids = frame.iloc[order].reset_index(drop=True), ids[order]
    index = {c: i for i, c in enumerate(design["codes"])}
    digest = hashlib.sha256("\n".join(ids).encode("ascii")).hexdigest()
    meta = {
        "what": f"{params.data.path}: the public period up to {params.proxy.until}, {len(frame)} reports of "
        f"{len(index)} codes, "
        + ("the proxy's validation part left out" if parts == PARTS else f"the parts {', '.join(parts)}"),
        "data": params.data.path,
        "until": params.proxy.until,
        "reports": len(frame),
        "classes": len(index),
        "parts": list(parts),
        "content_ids_sha256": digest,
    }
    return frame["text"].tolist(), [index[c] for c in frame["label"]], meta
