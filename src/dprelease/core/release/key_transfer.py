"""The private keys for a second operator (``dprelease key export-private`` / ``import-private``): both keys encrypted
under a passphrase, the only way they leave the agency's machine.

See docs/release.md, "Notes from the code", `core/release/key_transfer.py`."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from dprelease.core.errors import ConfigError

PASSPHRASE_ENV = "DPRELEASE_KEY_PASSPHRASE"
SECRET_FILE, AGENCY_FILE, INFO = "randomness.key.enc", "agency.key.pem", "keys.json"
FORMAT = "dprelease-private-keys-1"
SCRYPT = {"n": 2**15, "r": 8, "p": 1}
MIN_PASSPHRASE = 10


def passphrase(*, confirm: bool) -> bytes:
    """From :data:`PASSPHRASE_ENV`, else a prompt on the terminal (twice when ``confirm``)."""
    value = os.environ.get(PASSPHRASE_ENV)
    if value is None:
        if not sys.stdin.isatty():
            raise ConfigError(f"no passphrase: set {PASSPHRASE_ENV} or run on a terminal (it is never an argument)")
        value = getpass.getpass("passphrase for the private keys: ")
        if confirm and getpass.getpass("again: ") != value:
            raise ConfigError("the passphrases differ; nothing written")
    if len(value) < MIN_PASSPHRASE:
        raise ConfigError(f"the passphrase is shorter than {MIN_PASSPHRASE} characters")
    return value.encode("utf-8")


def _aad(kid: str) -> bytes:
    return b"dprelease randomness key " + kid.encode("ascii")


def _kdf(pw: bytes, salt: bytes, n: int, r: int, p: int) -> bytes:
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(pw)


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _folders(params, root: Path) -> tuple[Path, Path]:
    from dprelease.core.release.signing import key_folder

    return root / params.artifacts / "secret", key_folder(params, root)


def export_private(params, root: str | Path, to: str | Path, pw: bytes) -> list[str]:
    """Write both private keys, encrypted, into the new (or empty) folder ``to``; the lines to print."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat

    from dprelease.core.privacy import secret
    from dprelease.core.release.signing import PUBLIC, SIGNER, load_signer

    root, to = Path(root), Path(to)
    sdir, kdir = _folders(params, root)
    if not (sdir / secret.KEY).is_file():
        raise ConfigError(f"no randomness key in {sdir}: nothing to export")
    key = secret._read_key(sdir / secret.KEY)
    kid = secret._id(key)
    signer = load_signer(kdir)  # refuses a key folder or key file others can read
    if to.exists() and (not to.is_dir() or any(to.iterdir())):
        raise ConfigError(f"{to}: exists and is not an empty folder; give a new one")
    to.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(to, 0o700)
    salt, nonce = os.urandom(16), os.urandom(12)
    sealed = AESGCM(_kdf(pw, salt, **SCRYPT)).encrypt(nonce, key, _aad(kid))
    _write(
        to / SECRET_FILE,
        json.dumps(
            {
                "format": FORMAT,
                "key_id": kid,
                "kdf": "scrypt",
                **SCRYPT,
                "salt": salt.hex(),
                "cipher": "AES-256-GCM",
                "nonce": nonce.hex(),
                "ciphertext": sealed.hex(),
            },
            indent=2,
        ).encode()
        + b"\n",
    )
    _write(
        to / AGENCY_FILE,
        signer.private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(pw)),
    )
    for name in (PUBLIC, SIGNER):
        _write(to / name, (kdir / name).read_bytes())
    history = secret._history(sdir)
    _write(
        to / INFO,
        json.dumps(
            {
                "format": FORMAT,
                "randomness_key_id": kid,
                "randomness_history": history,
                "agency_key_id": signer.key_id,
                "signer": signer.name,
            },
            indent=2,
        ).encode()
        + b"\n",
    )
    return [
        f"exported the randomness key {kid} and the agency key {signer.key_id[:16]} (signer {signer.name}), "
        f"encrypted, to {to}/ (0700, files 0600): carry it to the second operator, who runs "
        f"`dprelease key import-private --from {to.name}`; then delete it"
    ]


def _check_folder(src: Path) -> dict:
    if not src.is_dir():
        raise ConfigError(f"{src}: no such folder (made by `dprelease key export-private --to DIR`)")
    for p in [src, *src.iterdir()]:
        if stat.S_IMODE(os.lstat(p).st_mode) & 0o077:
            raise ConfigError(
                f"{p}: readable by others; chmod 700 the folder and 600 its files (and consider rotating the keys)"
            )
    try:
        info = json.loads((src / INFO).read_text(encoding="utf-8"))
        sealed = json.loads((src / SECRET_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ConfigError(f"{src}: not an export-private folder (no readable {INFO}, {SECRET_FILE})") from None
    if info.get("format") != FORMAT or sealed.get("format") != FORMAT:
        raise ConfigError(f"{src}: unknown format (expected {FORMAT})")
    return info | {"sealed": sealed}


def import_private(params, root: str | Path, src: str | Path, pw: bytes) -> list[str]:
    """Install the keys of an ``export-private`` folder here; a different key already here is refused."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

    from dprelease.core.io import private_dir, write_json
    from dprelease.core.privacy import secret
    from dprelease.core.release.signing import KEY, PUBLIC, SIGNER, _install, _locked, key_id, load_signer

    root, src = Path(root), Path(src)
    info = _check_folder(src)
    sealed, kid = info["sealed"], info["randomness_key_id"]
    try:
        aes = _kdf(pw, bytes.fromhex(sealed["salt"]), int(sealed["n"]), int(sealed["r"]), int(sealed["p"]))
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key = AESGCM(aes).decrypt(bytes.fromhex(sealed["nonce"]), bytes.fromhex(sealed["ciphertext"]), _aad(kid))
        private = load_pem_private_key((src / AGENCY_FILE).read_bytes(), password=pw)
    except (InvalidTag, ValueError, TypeError, KeyError):
        raise ConfigError(f"{src}: wrong passphrase, or the files are damaged; nothing imported") from None
    if (
        secret._id(key) != kid
        or not isinstance(private, Ed25519PrivateKey)
        or key_id(private.public_key()) != info["agency_key_id"]
    ):
        raise ConfigError(f"{src}: the keys do not match the ids in {INFO}; nothing imported")
    sdir, kdir = _folders(params, root)
    here = secret._id(secret._read_key(sdir / secret.KEY)) if (sdir / secret.KEY).is_file() else None
    agency_here = load_signer(kdir).key_id if (kdir / KEY).is_file() else None
    for what, mine, theirs in (("randomness", here, kid), ("agency", agency_here, info["agency_key_id"])):
        if mine is not None and mine != theirs:
            raise ConfigError(
                f"a different {what} key is here already ({mine[:16]}, importing {theirs[:16]}): "
                "nothing imported; move the key folder aside first if this clone's key should go"
            )
    lines = []
    if here is None:
        private_dir(sdir)
        secret._write_new(sdir / secret.KEY, key.hex().encode("ascii") + b"\n")
        history = list(dict.fromkeys([*secret._history(sdir), *info.get("randomness_history", []), kid]))
        hp = sdir / secret.HISTORY
        old = json.loads(hp.read_text(encoding="utf-8")) if hp.is_file() else {}
        write_json(hp, old | {"key_ids": history}, private=True)
        write_json(sdir / secret.KEY_ID, {"key_id": kid}, private=True)
        lines.append(f"imported the randomness key {kid} into {sdir}")
    else:
        lines.append(f"kept the randomness key {kid}: already here")
    if agency_here is None:
        with _locked(kdir):
            staged = Path(tempfile.mkdtemp(prefix=".new.", suffix=".tmp", dir=kdir))
            try:
                secret._write_new(
                    staged / KEY, private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
                )
                for name in (PUBLIC, SIGNER):
                    secret._write_new(staged / name, (src / name).read_bytes())
                _install(kdir, staged)
            finally:
                shutil.rmtree(staged, ignore_errors=True)
        lines.append(
            f"imported the agency key {info['agency_key_id'][:16]} (signer {load_signer(kdir).name}) into {kdir}"
        )
    else:
        lines.append(f"kept the agency key {agency_here[:16]}: already here")
    return lines + [f"delete {src} now that the keys are in place (it holds them, encrypted)"]
