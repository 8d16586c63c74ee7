"""Checks on a release folder's files: allow-list, manifest hashes, the JSON files and the architecture's tensor
shapes, for every release kind. Imports neither the backends nor the release modules; every problem is a one-line
:class:`ReleaseError` naming the file.

See docs/release.md, "Notes from the code", `core/release/check.py`."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterator

from dprelease.core.errors import ReleaseError
from dprelease.core.io import file_hash
from dprelease.core.untrusted import check_shapes, read_json_object, safetensors_header

ALLOWED = {
    "model.safetensors",
    "model.json",
    "labels.json",
    "release.json",
    "release.sig",
    "README.md",
    "config.json",
    "tokenizer/tokenizer.json",
    "tokenizer/tokenizer_config.json",
    "tokenizer/special_tokens_map.json",
    "tokenizer/vocab.txt",
}
MANIFEST = "release.json"
SIGNATURE = "release.sig"  # the agency's signature of the manifest (dprelease.core.release.signing); not listed in it
UNLISTED = {MANIFEST, SIGNATURE}

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


def verify_release_folder(
    folder: str | Path,
    *,
    kind: str = CLASSIFIER,
    mechanism: str | None = None,
    architecture: Architecture | None = None,
) -> tuple[dict, dict | None]:
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
        raise ReleaseError(
            f"{folder}: not a {kind} release ({MANIFEST} kind is {found!r}; `dprelease "
            f"{'sanitize' if kind == CLASSIFIER else 'predict'}` reads a {found} release)"
            if found in KINDS
            else f"{folder}: not a {kind} release ({MANIFEST} kind is {found!r})"
        )
    if kind == SANITIZER:
        named = manifest.get("mechanism")
        if not isinstance(named, str) or not named:
            raise ReleaseError(f"{folder / MANIFEST}: no 'mechanism' named")
        if mechanism is not None and named != mechanism:
            raise ReleaseError(f"{folder / MANIFEST}: a {named} sanitizer release, not a {mechanism} one")
    files = manifest.get("files")
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ReleaseError(
            f"{folder / MANIFEST}: no 'files' mapping of file → sha256 (written by an older "
            "dprelease, or edited); re-run the stage that wrote it"
        )
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
            what = (
                "is a symbolic link (a release holds plain files only)"
                if (folder / rel).is_symlink()
                else f"cannot be read ({e.strerror})"
            )
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
