"""Checks on a release folder's files, the bottom layer (imports neither the backends nor the release
module, which build on it): allow-list, manifest hashes, JSON files, bounded dimensions, safetensors
headers, finite weights.

:func:`verify_release_folder` is the one verification of a release folder, for the classifier release and
every mechanism's sanitizer alike (each passes its architecture's shapes). For the classifier,
:func:`dprelease.release.folder.verify_release` runs it before any weight is read: the manifest's sha256 of every file, the
allow-list, the JSON files, the architecture's dimensions against :data:`BOUNDS`, ``n_classes`` against
``labels.json``, and every tensor's shape in ``model.safetensors`` (its header only) against the shapes the
architecture implies (the model is built on the ``meta`` device, which allocates nothing). The hash check
alone catches most tampering; the other checks stand on their own, for a manifest edited along with the
files. :func:`load_weights` (used by the backends' loaders) then reads the tensors and refuses
non-finite ones. Every problem is a one-line :class:`ReleaseError` naming the file.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterator

import torch

from ..errors import ReleaseError
from ..io import file_hash

ALLOWED = {"model.safetensors", "model.json", "labels.json", "release.json", "release.sig", "README.md", "config.json",
           "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json", "tokenizer/special_tokens_map.json",
           "tokenizer/vocab.txt"}
MANIFEST = "release.json"
SIGNATURE = "release.sig"  # the agency's signature of the manifest (dprelease.release.signing); not listed in it
UNLISTED = {MANIFEST, SIGNATURE}

# The one place the dimensions a release may declare are bounded (inclusive). Generous for any
# MiniLM/BERT-base-sized release; anything outside is refused before a tensor is allocated.
BOUNDS: dict[str, dict[str, tuple[int, int]]] = {
    "head": {"dim": (1, 4096), "hidden": (0, 16384), "n_classes": (2, 100_000), "max_length": (8, 512)},
    "full": {"n_classes": (2, 100_000), "max_length": (8, 512)},
    "config.json": {"hidden_size": (1, 4096), "num_hidden_layers": (1, 48), "num_attention_heads": (1, 64),
                    "intermediate_size": (1, 16384), "vocab_size": (1, 250_000),
                    "max_position_embeddings": (8, 8192), "type_vocab_size": (1, 16), "num_labels": (2, 100_000)},
}
MAX_PARAMETERS = 1_000_000_000  # all tensors together (4 GB as float32), however the dimensions combine
MAX_JSON_BYTES = 64 << 20  # release.json, model.json, labels.json, config.json
MAX_HEADER_BYTES = 64 << 20  # a safetensors header
FLOAT_DTYPES = {"F16", "BF16", "F32", "F64"}
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
               "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
_SHA256 = re.compile(r"[0-9a-f]{64}")
CLASSIFIER, SANITIZER = "classifier", "sanitizer"  # the kinds of release folder (release.json's "kind")
KINDS = (CLASSIFIER, SANITIZER)
Shapes = dict[str, tuple[tuple[int, ...], bool]]  # tensor name → (shape, floating-point)
Architecture = Callable[[Path, dict], tuple[Shapes, str]]


def release_files(folder: Path) -> list[str]:
    """Every file under ``folder`` (relative posix paths, sorted), symbolic links included."""
    folder = Path(folder)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def file_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file in the folder except the manifest itself and its signature."""
    return {rel: file_hash(Path(folder) / rel) for rel in release_files(folder) if rel not in UNLISTED}


def check_release_folder(folder: Path) -> None:
    """Raise if the folder holds anything outside the allow-list (privacy check)."""
    extra = sorted(set(release_files(folder)) - ALLOWED)
    if extra:
        raise ReleaseError(f"{folder}: release folder holds files that must not be released: {', '.join(extra)}")


# files --------------------------------------------------------------------------------------------------------
def check_hashes(folder: Path, files: dict[str, str]) -> None:
    """Allow-list, no links, exactly the listed files, each with its recorded sha256."""
    check_release_folder(folder)
    present = release_files(folder)
    for rel in present:
        if (folder / rel).is_symlink():
            raise ReleaseError(f"{folder / rel}: is a symbolic link (a release holds plain files only)")
    listed = set(files)
    bad = sorted(listed - (ALLOWED - UNLISTED))
    if bad:
        raise ReleaseError(f"{folder / MANIFEST}: lists files a release may not hold: {', '.join(bad)}")
    missing = sorted(listed - set(present))
    if missing:
        raise ReleaseError(f"{folder}: file(s) listed in {MANIFEST} are missing: {', '.join(missing)}")
    unlisted = sorted(set(present) - listed - UNLISTED)
    if unlisted:
        raise ReleaseError(f"{folder}: file(s) not listed in {MANIFEST}: {', '.join(unlisted)}")
    for rel in sorted(listed):
        if not _SHA256.fullmatch(files[rel]):
            raise ReleaseError(f"{folder / MANIFEST}: {rel}: not a sha256 hex digest: {files[rel][:80]!r}")
        if file_hash(folder / rel) != files[rel]:
            raise ReleaseError(f"{folder / rel}: sha256 does not match {MANIFEST} (tampered or corrupt)")


def _check_folder(folder: Path) -> None:
    """The folder is a directory holding a plain ``release.json`` (no link)."""
    if not folder.exists():
        raise ReleaseError(f"release folder not found: {folder}")
    if not folder.is_dir():
        raise ReleaseError(f"not a release folder (not a directory): {folder}")
    if (folder / MANIFEST).is_symlink():
        raise ReleaseError(f"{folder / MANIFEST}: is a symbolic link (a release holds plain files only)")
    if not (folder / MANIFEST).is_file():
        raise ReleaseError(f"not a release folder (no {MANIFEST}): {folder}")


def verify_release_folder(folder: str | Path, *, kind: str = CLASSIFIER, mechanism: str | None = None,
                          architecture: Architecture | None = None) -> tuple[dict, dict | None]:
    """The one verification of a release folder, for every kind (the classifier release and each mechanism's
    sanitizer): run before anything is loaded, it returns ``(manifest, model.json)``.

    Checked, in order: the folder is a directory; ``release.json`` is a plain file (no link) holding a JSON
    object whose ``kind`` is ``kind`` (a manifest without one is a classifier release) and, for a sanitizer,
    whose ``mechanism`` is a name (``mechanism``, when given); its ``files`` maps file → sha256; the folder
    holds exactly those files (allow-list, no links), each with its recorded sha256 (:func:`check_hashes`).
    With ``architecture`` (a function of the folder and its ``model.json`` that bounds the architecture and
    returns the tensor shapes it implies and the file that declares them), ``model.safetensors``'s header
    must match those shapes, still without reading a weight. Every problem is a one-line ReleaseError."""
    folder = Path(folder)
    _check_folder(folder)
    manifest = read_json_object(folder / MANIFEST)
    found = manifest.get("kind", CLASSIFIER)
    if found != kind:
        raise ReleaseError(f"{folder}: not a {kind} release ({MANIFEST} kind is {found!r}; `dprelease "
                           f"{'sanitize' if kind == CLASSIFIER else 'predict'}` reads a {found} release)"
                           if found in KINDS else f"{folder}: not a {kind} release ({MANIFEST} kind is {found!r})")
    if kind == SANITIZER:
        named = manifest.get("mechanism")
        if not isinstance(named, str) or not named:
            raise ReleaseError(f"{folder / MANIFEST}: no 'mechanism' named")
        if mechanism is not None and named != mechanism:
            raise ReleaseError(f"{folder / MANIFEST}: a {named} sanitizer release, not a {mechanism} one")
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ReleaseError(f"{folder / MANIFEST}: no 'files' mapping of file → sha256 (written by an older "
                           "dprelease, or edited); re-run the stage that wrote it")
    check_hashes(folder, files)
    if architecture is None:
        return manifest, None
    arch = read_json_object(folder / "model.json")
    expected, source = architecture(folder, arch)
    weights = folder / "model.safetensors"
    check_shapes(weights, safetensors_header(weights), expected, source)
    return manifest, arch


def snapshot(folder: Path, dest: Path) -> None:
    """Copy a release folder's files into ``dest`` (a private folder of this process), reading each file
    once. What is verified and loaded afterwards is that copy, so a folder changed meanwhile (a release
    republished during `predict`) cannot mix files. Refuses before copying what the checks would refuse by
    name: links, anything but plain files, names outside the allow-list."""
    folder, dest = Path(folder), Path(dest)
    _check_folder(folder)
    check_release_folder(folder)
    for rel in release_files(folder):
        try:
            fd = os.open(folder / rel, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as e:
            what = "is a symbolic link (a release holds plain files only)" if (folder / rel).is_symlink() \
                else f"cannot be read ({e.strerror})"
            raise ReleaseError(f"{folder / rel}: {what}") from None
        with os.fdopen(fd, "rb") as src:
            if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
                raise ReleaseError(f"{folder / rel}: not a plain file")
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            with open(dest / rel, "xb") as out:
                shutil.copyfileobj(src, out, 1 << 20)


@contextlib.contextmanager
def shown_as(copy: Path, original: Path) -> Iterator[None]:
    """Errors raised inside name ``original`` where they would name its private ``copy``."""
    try:
        yield
    except ReleaseError as e:  # the same class (a SignatureError stays one), the original's name
        raise type(e)(str(e).replace(str(copy), str(original))) from None


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


# architecture ---------------------------------------------------------------------------------------------
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
    shapes = {k: (tuple(v.shape), v.is_floating_point()) for k, v in model.state_dict().items()}
    total = sum(math.prod(s) for s, _ in shapes.values())
    if total > MAX_PARAMETERS:
        raise ReleaseError(f"{path}: the architecture has {total:,} parameters, more than a release may hold "
                           f"({MAX_PARAMETERS:,})")
    return shapes


def check_labels(folder: Path, n_classes: int, labels: dict) -> None:
    path = folder / "labels.json"
    codes, titles = labels.get("codes"), labels.get("titles")
    for key, value in (("codes", codes), ("titles", titles)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ReleaseError(f"{path}: {key} must be a list of strings")
    if len(codes) != n_classes:
        raise ReleaseError(f"{path}: {len(codes)} codes but model.json says n_classes={n_classes}")
    if len(titles) != len(codes):
        raise ReleaseError(f"{path}: {len(titles)} titles for {len(codes)} codes")
    if len(set(codes)) != len(codes):
        raise ReleaseError(f"{path}: codes are not unique")


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
        raise ReleaseError(f"{path}: safetensors header is not valid JSON (corrupt or not a safetensors file)") from None
    if not isinstance(header, dict):
        raise ReleaseError(f"{path}: safetensors header is not a JSON object")
    data_size, out, spans = size - 8 - n, {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            ok = (dtype in DTYPE_BYTES and isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)
                  and type(begin) is int and type(end) is int and 0 <= begin <= end)
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
        parts = ([f"missing {', '.join(missing[:5])}"] if missing else []) + \
                ([f"unexpected {', '.join(extra[:5])}"] if extra else [])
        raise ReleaseError(f"{path}: tensors do not match the architecture in {source} ({'; '.join(parts)})")
    for name, (shape, floating) in expected.items():
        dtype, found = header[name]
        if found != shape:
            raise ReleaseError(f"{path}: tensor {name!r} has shape {list(found)}, the architecture in {source} "
                               f"implies {list(shape)}")
        if floating and dtype not in FLOAT_DTYPES:
            raise ReleaseError(f"{path}: tensor {name!r} is {dtype}, expected a floating-point type")


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, each floating one finite."""
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
