"""Reading files this process did not write, bounded: a JSON object of limited size, integer dimensions
within :data:`BOUNDS`, a safetensors header checked against the file's size, tensors of the expected shapes,
finite weights. Each problem is a one-line :class:`~dprelease.core.errors.ReleaseError` naming the file.

The bottom layer of loading a release (imports neither the backends nor the release package): the backends'
loaders and :mod:`dprelease.core.release.check` both build on it. Only reading the weights imports torch
(:func:`load_weights`): the checks before it (``dprelease verify``) run without it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from dprelease.core.errors import ReleaseError

if TYPE_CHECKING:
    import torch

# The one place the dimensions a release may declare are bounded (inclusive). Generous for any
# MiniLM/BERT-base-sized release; anything outside is refused before a tensor is allocated.
BOUNDS: dict[str, dict[str, tuple[int, int]]] = {
    "head": {"dim": (1, 4096), "hidden": (0, 16384), "n_classes": (2, 100_000), "max_length": (8, 512)},
    "full": {"n_classes": (2, 100_000), "max_length": (8, 512)},
    "config.json": {
        "hidden_size": (1, 4096),
        "num_hidden_layers": (1, 48),
        "num_attention_heads": (1, 64),
        "intermediate_size": (1, 16384),
        "vocab_size": (1, 250_000),
        "max_position_embeddings": (8, 8192),
        "type_vocab_size": (1, 16),
        "num_labels": (2, 100_000),
    },
}
MAX_PARAMETERS = 1_000_000_000  # all tensors together (4 GB as float32), however the dimensions combine
MAX_JSON_BYTES = 64 << 20  # release.json, model.json, labels.json, config.json
MAX_HEADER_BYTES = 64 << 20  # a safetensors header
FLOAT_DTYPES = {"F16", "BF16", "F32", "F64"}
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}


def read_json_object(path: Path) -> dict:
    if not path.is_file():
        raise ReleaseError(f"{path}: missing from the release folder")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise ReleaseError(f"{path}: {path.stat().st_size} bytes, more than any release file of its kind")
    try:
        obj = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ReleaseError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ReleaseError(f"{path}: not a JSON object")
    return obj


def bounded(path: Path, obj: dict, bounds: dict[str, tuple[int, int]], keys=None) -> dict[str, int]:
    """The integer fields ``keys`` (default: all of ``bounds``) of ``obj``, each within its bounds."""
    out = {}
    for key in bounds if keys is None else keys:
        lo, hi = bounds[key]
        value = obj.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ReleaseError(f"{path}: {key} must be an integer, got {json.dumps(value)[:40]}")
        if not lo <= value <= hi:
            raise ReleaseError(f"{path}: {key}={value} outside the bounds a release may declare [{lo}, {hi}]")
        out[key] = value
    return out


def module_shapes(path: Path, model: torch.nn.Module) -> dict[str, tuple[tuple[int, ...], bool]]:
    return limited(path, {k: (tuple(v.shape), v.is_floating_point()) for k, v in model.state_dict().items()})


def limited(path: Path, shapes: dict[str, tuple[tuple[int, ...], bool]]) -> dict[str, tuple[tuple[int, ...], bool]]:
    """``shapes`` (tensor name → (shape, floating-point)), refused when all tensors together hold more than
    :data:`MAX_PARAMETERS`."""
    total = sum(math.prod(s) for s, _ in shapes.values())
    if total > MAX_PARAMETERS:
        raise ReleaseError(
            f"{path}: the architecture has {total:,} parameters, more than a release may hold ({MAX_PARAMETERS:,})"
        )
    return shapes


# weights ----------------------------------------------------------------------------------------------------
def safetensors_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name → (dtype, shape) from a safetensors file's header, which is checked against the file's size
    (a truncated file or random bytes is an error here, not when the tensors are read)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 2 or n > min(size - 8, MAX_HEADER_BYTES):
            raise ReleaseError(f"{path}: not a safetensors file, or truncated (header length {n}, file {size} bytes)")
        raw = fh.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ReleaseError(
            f"{path}: safetensors header is not valid JSON (corrupt or not a safetensors file)"
        ) from None
    if not isinstance(header, dict):
        raise ReleaseError(f"{path}: safetensors header is not a JSON object")
    data_size, out, spans = size - 8 - n, {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            ok = (
                dtype in DTYPE_BYTES
                and isinstance(shape, list)
                and all(type(d) is int and d >= 0 for d in shape)
                and type(begin) is int
                and type(end) is int
                and 0 <= begin <= end
            )
        except (TypeError, KeyError, ValueError):
            ok = False
        if not ok:
            raise ReleaseError(f"{path}: tensor {name!r} has a malformed header entry")
        if end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
            raise ReleaseError(f"{path}: tensor {name!r}: {end - begin} bytes for shape {shape} {dtype}")
        out[name] = (dtype, tuple(shape))
        spans.append((begin, end))
    position = 0
    for begin, end in sorted(spans):
        if begin != position:
            raise ReleaseError(f"{path}: tensor data overlaps or has gaps (corrupt)")
        position = end
    if position != data_size:
        what = "truncated" if position > data_size else "trailing bytes after the tensors"
        raise ReleaseError(f"{path}: tensors need {position} bytes of data, the file holds {data_size} ({what})")
    return out


def check_shapes(path: Path, header: dict, expected: dict, source: str) -> None:
    """The file's tensors are exactly those of the architecture ``source`` describes, with its shapes
    (floating-point where it is)."""
    missing, extra = sorted(set(expected) - set(header)), sorted(set(header) - set(expected))
    if missing or extra:
        parts = ([f"missing {', '.join(missing[:5])}"] if missing else []) + (
            [f"unexpected {', '.join(extra[:5])}"] if extra else []
        )
        raise ReleaseError(f"{path}: tensors do not match the architecture in {source} ({'; '.join(parts)})")
    for name, (shape, floating) in expected.items():
        dtype, found = header[name]
        if found != shape:
            raise ReleaseError(
                f"{path}: tensor {name!r} has shape {list(found)}, the architecture in {source} implies {list(shape)}"
            )
        if floating and dtype not in FLOAT_DTYPES:
            raise ReleaseError(f"{path}: tensor {name!r} is {dtype}, expected a floating-point type")


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, each floating one finite."""
    import torch
    from safetensors.torch import load_file

    safetensors_header(path)  # a one-line error for a truncated or corrupt file
    try:
        state = load_file(str(path))
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types
        raise ReleaseError(f"{path}: cannot read the weights ({type(e).__name__}: {e})") from None
    for name, tensor in state.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ReleaseError(f"{path}: non-finite weights (tensor {name!r} holds NaN or infinity)")
    return state


def fit_state(model: torch.nn.Module, state: dict[str, torch.Tensor], path: Path) -> None:
    """``model.load_state_dict(state)``, a mismatch being a one-line error."""
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ReleaseError(f"{path}: weights do not fit the architecture ({first[:200]})") from None
