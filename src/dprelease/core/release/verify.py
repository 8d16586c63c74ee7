"""`dprelease verify` (a partner checks a release folder against the agency's public key) and the re-signing
that key rotation does.

:func:`verify_folder` reads the folder's files once into a private copy, checks the signature of
``release.json`` with the given public key, then everything the folder's kind allows without loading
weights (classifier: manifest hashes, allow-list, dimensions, tensor shapes; sanitizer: manifest hashes and
allow-list). :func:`summary` is its one line: who signed it, the manifest's sha256 and the guarantee.
Nothing here imports torch, sklearn or transformers for a head or sanitizer release (``tests/test_cli_imports.py``).
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

from dprelease.core.errors import ReleaseError
from dprelease.core.io import atomic_dir
from dprelease.core.privacy.guarantee import Guarantee, kind
from dprelease.core.release.check import MANIFEST, UNLISTED, check_release_folder, release_files, shown_as, snapshot
from dprelease.core.release.classifier import verify_release
from dprelease.core.release.sanitizer import KIND as SANITIZER
from dprelease.core.release.sanitizer import verify_sanitizer
from dprelease.core.release.signing import Signer, check_signature, missing_key, sign_folder
from dprelease.core.untrusted import read_json_object


def _check(folder: Path) -> dict:
    """The manifest, after the checks for the folder's kind."""
    kind = read_json_object(folder / MANIFEST).get("kind")
    return verify_sanitizer(folder) if kind == SANITIZER else verify_release(folder)


def verify_folder(release: str | Path, key: str | Path | None) -> dict:
    """Signature, then the file checks, on a private copy of ``release``; what :func:`summary` prints.
    ``key`` None (no --key, no ``DPRELEASE_AGENCY_KEY``): a one-line refusal, nothing read."""
    release = Path(release)
    if key is None:
        raise missing_key(release, opt_out=None)
    with tempfile.TemporaryDirectory(prefix="dprelease-verify-") as tmp, shown_as(Path(tmp), release):
        copy = Path(tmp)
        snapshot(release, copy)
        signed = check_signature(copy, key, shown=release)
        manifest = _check(copy)
    return signed | {
        "release": str(release),
        "kind": manifest.get("kind") or "classifier",
        "mechanism": manifest.get("mechanism"),
        "guarantee": manifest.get("guarantee"),
    }


def guarantee_text(g) -> str:
    """A release's guarantee record in a few words (ε, δ and the kind of claim)."""
    if not isinstance(g, dict):
        return "none recorded"
    try:
        r = Guarantee.from_dict(g)
    except (TypeError, ValueError):
        eps = g.get("epsilon")
        text = f"ε = {eps:.4g}" if isinstance(eps, (int, float)) and math.isfinite(eps) else "no ε claimed"
        claim = g.get("guarantee")
        return f"{text}; {' '.join(str(claim).split())}" if claim else text
    eps = (
        f"ε = {r.epsilon:.4g}"
        if r.epsilon is not None
        else f"no ε, {r.claim_text}"
        if kind(r.kind).claim is not None
        else "no ε"
    )
    auc = r.quantities.get("adversary_auc") if r.kind == "empirical_probe" else None
    probe = f"; attribute-probe AUC {auc:.3f}" if isinstance(auc, (int, float)) else ""
    return f"{r.mechanism}: {eps}, δ {r.delta_text} ({r.kind}){probe}"


def summary(info: dict) -> str:
    what = info["kind"] if not info.get("mechanism") else f"{info['mechanism']} {info['kind']}"
    return (
        f"{info['release']}: {what} release signed by {info['signer']} (key {info['key_id'][:16]}); "
        f"release.json sha256 {info['manifest_sha256']}; guarantee: {guarantee_text(info['guarantee'])}"
    )


def resign(folder: str | Path, *, old_key: str | Path, signer: Signer) -> None:
    """Re-sign a release folder with a new key (after rotation): its files are checked and its signature
    must verify with ``old_key`` first; the folder is replaced whole."""
    folder = Path(folder)
    check_signature(folder, old_key)
    _check(folder)
    with atomic_dir(folder) as tmp:
        for rel in release_files(folder):
            if rel not in UNLISTED or rel == MANIFEST:
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / rel, tmp / rel)
        sign_folder(tmp, signer)
        check_release_folder(tmp)


def resign_all(folders: list[Path], *, old_key: str | Path, signer: Signer) -> tuple[list[str], list[str]]:
    """:func:`resign` each release folder that exists; (re-signed, skipped with the reason)."""
    done, skipped = [], []
    for folder in folders:
        if not (folder / MANIFEST).is_file():
            continue
        try:
            resign(folder, old_key=old_key, signer=signer)
            done.append(str(folder))
        except ReleaseError as e:
            skipped.append(f"{folder} ({e})")
    return done, skipped
