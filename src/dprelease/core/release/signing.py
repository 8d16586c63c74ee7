"""The agency's signing key and signed releases: Ed25519 (RFC 8032) through ``cryptography``. The manifest proves a
folder whole, the signature who wrote it; every loader checks it by default.

See docs/release.md, "Notes from the code", `core/release/signing.py`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from dprelease.core.errors import ConfigError, ReleaseError
from dprelease.core.io import atomic_path, private_dir, write_json
from dprelease.core.locks import file_lock
from dprelease.core.release.check import MANIFEST, SIGNATURE

KEY, PUBLIC, SIGNER = "agency.key", "agency.pub", "signer.json"
KEY_ENV = "DPRELEASE_AGENCY_KEY"  # the agency's public key file, where no --key is given
NO_CHECK_ENV = "DPRELEASE_NO_SIGNATURE_CHECK"  # 1: the MLflow model loads without checking the signature (loud)
RETIRED = "retired"
DEFAULT_SIGNER = "dprelease agency"
SIGNATURE_BYTES = 64
MAX_KEY_FILE_BYTES = 16 << 10
MAX_MANIFEST_BYTES = 64 << 20


class SignatureError(ReleaseError):
    """A release's signature is missing, wrong or could not be checked (no usable agency key): refused."""


@dataclass(frozen=True)
class Signer:
    """A loaded private key, its public key id and the name it signs as."""

    name: str
    key_id: str
    private_key: object = field(repr=False)

    def sign(self, data: bytes) -> bytes:
        return self.private_key.sign(data)


# the key folder ------------------------------------------------------------------------------------------------
def key_folder(params, root: str | Path = ".") -> Path:
    """Where the agency key lives: ``signing_key`` (relative to the root, or absolute), else ``<artifacts>/keys``."""
    return Path(root) / (params.signing_key or f"{params.artifacts}/keys")


def public_key_dep(params) -> str:
    """The public key as a stage input: a new key (rotation) re-runs the stages that sign."""
    return f"{params.signing_key or params.artifacts + '/keys'}/{PUBLIC}"


def key_id(public_key) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return hashlib.sha256(public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()


def _public_pem(public_key) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return public_key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)


def _write_private(path: Path, data: bytes) -> None:
    """``path`` (a new name) holding ``data``, 0600 from the moment it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _new_pair(where: Path, signer: str) -> str:
    """A fresh key pair written into the (new, private) folder ``where``; returns its key id."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    if not signer.strip() or "\n" in signer:
        raise ConfigError(f"signer name {signer!r}: give one non-empty line")
    private = Ed25519PrivateKey.generate()  # the operating system's CSPRNG
    kid = key_id(private.public_key())
    _write_private(where / KEY, private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    _write_private(where / PUBLIC, _public_pem(private.public_key()))
    _write_private(where / SIGNER, json.dumps({"name": signer.strip(), "key_id": kid}, indent=2).encode() + b"\n")
    return kid


def _locked(folder: Path):
    private_dir(folder)
    lock = folder / ".lock"
    os.close(os.open(lock, os.O_RDWR | os.O_CREAT, 0o600))
    return file_lock(lock)


def _install(folder: Path, staged: Path) -> None:
    for name in (SIGNER, PUBLIC, KEY):  # the private key last: its presence means the pair is whole
        os.replace(staged / name, folder / name)


def ensure_key(folder: str | Path, *, signer: str = DEFAULT_SIGNER) -> tuple[Signer, bool]:
    """The agency key in ``folder``, made now if there is none; (signer, whether it was made)."""
    folder = Path(folder)
    with _locked(folder):
        if (folder / KEY).exists() or (folder / KEY).is_symlink():
            return load_signer(folder), False
        staged = Path(tempfile.mkdtemp(prefix=".new.", suffix=".tmp", dir=folder))
        try:
            _new_pair(staged, signer)
            _install(folder, staged)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    return load_signer(folder), True


def rotate(folder: str | Path, *, signer: str | None = None) -> tuple[Signer, Signer]:
    """Retire the key pair to ``retired/<key id>/`` (kept: it verifies what it signed) and make a new one
    (same signer name unless ``signer``); returns (old, new)."""
    folder = Path(folder)
    with _locked(folder):
        old = load_signer(folder)
        staged = Path(tempfile.mkdtemp(prefix=".new.", suffix=".tmp", dir=folder))
        try:
            _new_pair(staged, signer or old.name)
            retired = folder / RETIRED / old.key_id[:16]
            if retired.exists():
                raise ConfigError(f"{retired} exists already; move it away and rotate again")
            private_dir(retired)
            for name in (KEY, PUBLIC, SIGNER):
                os.replace(folder / name, retired / name)
            _install(folder, staged)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
    return old, load_signer(folder)


def _read_key_file(path: Path, *, private: bool) -> bytes:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such key file" + ("; create the agency key with `dprelease key init`" if private else "")
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{path}: not a regular file (a key is read from a plain file, never through a link)")
    if private and st.st_mode & 0o077:
        raise ConfigError(
            f"{path}: the private key is readable by others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"run `chmod 600 {path}` (and consider rotating the key)"
        )
    if st.st_size > MAX_KEY_FILE_BYTES:
        raise ConfigError(f"{path}: {st.st_size} bytes, not a key file")
    return path.read_bytes()


def load_signer(folder: str | Path) -> Signer:
    """The private key of ``folder`` (refused if others can read it, or if it does not match its public key)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    folder = Path(folder)
    if stat.S_IMODE(folder.stat().st_mode) & 0o077:
        raise ConfigError(f"{folder}: the key folder is open to others; run `chmod 700 {folder}`")
    try:
        private = load_pem_private_key(_read_key_file(folder / KEY, private=True), password=None)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{folder / KEY}: not a usable private key ({e})") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise ConfigError(f"{folder / KEY}: not an Ed25519 private key")
    kid = key_id(private.public_key())
    public, public_kid = load_public_key(folder / PUBLIC)
    try:
        info = json.loads(_read_key_file(folder / SIGNER, private=False))
    except ValueError:
        info = None
    if (
        public_kid != kid
        or not isinstance(info, dict)
        or info.get("key_id") != kid
        or not isinstance(info.get("name"), str)
    ):
        raise ConfigError(
            f"{folder}: {KEY}, {PUBLIC} and {SIGNER} do not belong together; restore the folder "
            "or make a new key with `dprelease key rotate`"
        )
    return Signer(info["name"], kid, private)


def load_public_key(path: str | Path) -> tuple[object, str]:
    """(public key, key id) from a PEM public key file, or a one-line error."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    path = Path(path)
    try:
        key = load_pem_public_key(_read_key_file(path, private=False))
    except ConfigError as e:
        raise SignatureError(str(e)) from None
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise SignatureError(f"{path}: not a PEM public key (the agency's agency.pub)") from None
    except OSError as e:
        raise SignatureError(f"{path}: cannot read the key ({e.strerror or e})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(f"{path}: not an Ed25519 public key (the agency's agency.pub is one)")
    return key, key_id(key)


def export_public(folder: str | Path, output: str | Path) -> str:
    """Copy the public key to ``output`` (what partners receive); returns the key id."""
    _, kid = load_public_key(Path(folder) / PUBLIC)
    with atomic_path(output) as tmp:
        tmp.write_bytes((Path(folder) / PUBLIC).read_bytes())
    return kid


# signing and checking a release folder ---------------------------------------------------------------------------
def sign_folder(folder: str | Path, signer: Signer) -> None:
    """Name the signer in ``folder``'s manifest and write ``release.sig`` over the manifest's bytes (the
    folder is one being written, e.g. inside :func:`dprelease.core.io.atomic_dir`)."""
    folder = Path(folder)
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    write_json(folder / MANIFEST, manifest | {"signed_by": {"name": signer.name, "key_id": signer.key_id}})
    (folder / SIGNATURE).unlink(missing_ok=True)
    (folder / SIGNATURE).write_bytes(signer.sign((folder / MANIFEST).read_bytes()))


def check_signature(folder: str | Path, public_key: str | Path, *, shown: str | Path | None = None) -> dict:
    """Raise unless ``folder``'s ``release.sig`` is a valid signature of its ``release.json`` by the key in
    ``public_key``. Returns who signed it (name, key id) and the manifest's sha256. ``shown``: the folder's
    name in messages (when ``folder`` is a private copy of it)."""
    from cryptography.exceptions import InvalidSignature

    folder, shown = Path(folder), Path(shown or folder)
    key, kid = load_public_key(public_key)
    sig_path, manifest_path = folder / SIGNATURE, folder / MANIFEST
    if not sig_path.is_file() or sig_path.is_symlink():
        raise SignatureError(f"{shown}: the release is not signed (no {SIGNATURE}); refused")
    if sig_path.stat().st_size != SIGNATURE_BYTES:
        raise SignatureError(
            f"{shown / SIGNATURE}: {sig_path.stat().st_size} bytes, not an Ed25519 signature (64 bytes)"
        )
    signature = sig_path.read_bytes()
    if not manifest_path.is_file() or manifest_path.stat().st_size > MAX_MANIFEST_BYTES:
        raise SignatureError(f"{shown}: not a release folder (no usable {MANIFEST})")
    data = manifest_path.read_bytes()
    try:
        signed_by = json.loads(data.decode("utf-8")).get("signed_by")
    except (UnicodeDecodeError, ValueError, AttributeError, RecursionError):
        signed_by = None
    signed_by = signed_by if isinstance(signed_by, dict) else {}
    try:
        key.verify(signature, data)
    except InvalidSignature:
        named = signed_by.get("key_id")
        if isinstance(named, str) and named != kid:
            raise SignatureError(
                f"{shown}: signed by another key ({str(signed_by.get('name'))[:80]}, key "
                f"{named[:16]}), not by {public_key} (key {kid[:16]}); refused"
            ) from None
        raise SignatureError(
            f"{shown}: the signature does not match {MANIFEST} with key {kid[:16]} from {public_key} "
            "(changed after signing, or signed by another key); refused"
        ) from None
    if signed_by.get("key_id") != kid or not isinstance(signed_by.get("name"), str):
        raise SignatureError(f"{shown / MANIFEST}: signed, but its signed_by does not name key {kid[:16]}; refused")
    return {"signer": signed_by["name"], "key_id": kid, "manifest_sha256": hashlib.sha256(data).hexdigest()}


def require_signature(
    folder: str | Path, key: str | Path | None, *, shown: str | Path | None = None, check: bool = True
) -> dict | None:
    """What every loader of a release runs first: :func:`check_signature` against ``key``; with no key the
    release is refused (:func:`missing_key`), unless ``check`` is False — the caller's explicit opt-out
    (``--no-signature-check``), which returns None and checks nothing."""
    if not check:
        return None
    if key is None:
        raise missing_key(shown or folder)
    return check_signature(folder, key, shown=shown)


def missing_key(
    shown: str | Path,
    how: str = f"give --key agency.pub or set {KEY_ENV}",
    opt_out: str | None = "--no-signature-check",
) -> SignatureError:
    """The error for a release with no agency key to check its signature against (the default refuses)."""
    skip = f"; {opt_out} skips the check" if opt_out else ""
    return SignatureError(
        f"{shown}: refused: no agency public key to check who signed this release ({how}: the "
        f"key the agency gave you, not one from the release{skip})"
    )


def key_from_env() -> str | None:
    """The public key file :data:`KEY_ENV` names, or None (unset or empty)."""
    return os.environ.get(KEY_ENV) or None


def opted_out(value: str | None) -> bool:
    """Whether an environment value (e.g. :data:`NO_CHECK_ENV`'s) turns the signature check off."""
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def agency_signer(params, root: str | Path = ".") -> Signer:
    """The signer a stage that publishes uses (the key is made on first use, unless dvc.lock records another:
    :mod:`dprelease.core.privacy.key_guard`)."""
    from dprelease.core.privacy import key_guard

    key_guard.check(params, root, new_key=key_guard.new_key_from_env(), keys=("agency",), use_release=False)
    return ensure_key(key_folder(params, root))[0]
