"""The release folder and `predict`, which codes new narratives from that folder alone.

A release holds: ``model.safetensors`` (the released draw), ``model.json`` (architecture and the
public encoder reference), ``labels.json`` (OIICS codes and titles), ``tokenizer/`` + ``config.json``
for the full backend, and ``release.json`` (the manifest). It never holds SWAG moments, risks, weights,
losses or training text; :func:`check_release_folder` enforces that.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch

from . import __version__
from .backends import backend_class
from .cache import code_hash
from .errors import ReleaseError
from .io import atomic_dir, atomic_path, write_json

ALLOWED = {"model.safetensors", "model.json", "labels.json", "release.json", "config.json",
           "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json", "tokenizer/special_tokens_map.json",
           "tokenizer/vocab.txt"}


def write_release(folder: Path, backend, model, codes: list[str], titles: list[str], manifest: dict,
                  code: list[str]) -> None:
    """Write a release folder whole. ``manifest`` carries the guarantee record and public config;
    ``code`` is the code that made the release (package-relative, hashed into ``code_version``)."""
    with atomic_dir(folder) as tmp:
        model_entry = backend.write_release_model(model, tmp)
        write_json(tmp / "labels.json", {"codes": codes, "titles": titles})
        write_json(tmp / "release.json", manifest | {"model": model_entry,
                                                     "code_version": f"{__version__}+{code_hash(code)[:16]}"})
        check_release_folder(tmp)


def check_release_folder(folder: Path) -> None:
    """Raise if the folder holds anything outside the allow-list (privacy check)."""
    found = {p.relative_to(folder).as_posix() for p in Path(folder).rglob("*") if p.is_file()}
    extra = sorted(found - ALLOWED)
    if extra:
        raise ReleaseError(f"release folder holds files that must not be released: {', '.join(extra)}")


def _load(folder: Path, device: torch.device):
    folder = Path(folder)
    if not (folder / "release.json").is_file():
        raise ReleaseError(f"not a release folder (no release.json): {folder}")
    arch = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    labels = json.loads((folder / "labels.json").read_text(encoding="utf-8"))
    return backend_class(arch.get("backend")).release_scorer(folder, arch, device), labels


def predict(release: str | Path, input_csv: str | Path, output_csv: str | Path, text_column: str | None = None,
            device: str = "cpu") -> int:
    """Code every narrative of ``input_csv``; write code, title, probability. Returns the row count."""
    input_csv = Path(input_csv)
    if not input_csv.is_file():
        raise ReleaseError(f"input file not found: {input_csv}")
    df = pd.read_csv(input_csv, dtype=str, keep_default_na=False, skip_blank_lines=False)
    column = text_column or next((c for c in ("Final Narrative", "narrative", "text") if c in df.columns), None)
    if column is None or column not in df.columns:
        raise ReleaseError(f"{input_csv}: no narrative column (looked for {text_column or 'Final Narrative, narrative, text'}; "
                           f"found {', '.join(df.columns)})")
    texts = df[column].str.strip()
    if (texts == "").any():
        rows = (texts == "").to_numpy().nonzero()[0][:5] + 1
        raise ReleaseError(f"{input_csv}: empty narrative in data row(s) {', '.join(map(str, rows))}")
    score, labels = _load(Path(release), torch.device(device))
    probs = score(texts.tolist()) if len(texts) else torch.empty(0, len(labels["codes"]))
    p, idx = probs.max(dim=1)
    out = df.copy()
    out["code"] = [labels["codes"][i] for i in idx.tolist()]
    out["title"] = [labels["titles"][i] for i in idx.tolist()]
    out["probability"] = p.numpy().round(4)
    with atomic_path(output_csv) as tmp:
        out.to_csv(tmp, index=False)
    return len(out)
