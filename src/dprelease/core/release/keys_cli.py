"""`dprelease key ACTION`: the agency signing key (:mod:`dprelease.core.release.signing`) from the command line (init,
show, export, rotate, export-private, import-private).

See docs/release.md, "Notes from the code", `core/release/keys_cli.py`."""

from __future__ import annotations

from pathlib import Path

from dprelease.contracts import plugins
from dprelease.core.config import Params
from dprelease.core.errors import ConfigError
from dprelease.core.locks import root_lock
from dprelease.core.release.signing import (
    DEFAULT_SIGNER,
    PUBLIC,
    RETIRED,
    ensure_key,
    export_public,
    key_folder,
    load_signer,
    rotate,
)


def release_folders(params: Params, root: Path) -> list[Path]:
    """The release and every folder a plug-in signs (its ``SIGNED``: :func:`dprelease.contracts.plugins.signed_folders`)."""
    return [root / params.release, *(root / folder for folder in plugins.signed_folders(params))]


def key_command(
    action: str,
    params: Params,
    *,
    signer: str | None = None,
    output: str | None = None,
    root: str | Path = ".",
    to: str | None = None,
    source: str | None = None,
    new_key: bool = False,
) -> list[str]:
    """Run ``action``; the lines to print."""
    root = Path(root)
    folder = key_folder(params, root)
    if action in ("export-private", "import-private"):
        from dprelease.core.release import key_transfer

        where = to if action == "export-private" else source
        if not where:
            raise ConfigError(f"dprelease key {action}: give {'--to' if action == 'export-private' else '--from'} DIR")
        pw = key_transfer.passphrase(confirm=action == "export-private")
        with root_lock(root, f"dprelease key {action}"):
            if action == "export-private":
                return key_transfer.export_private(params, root, where, pw)
            return key_transfer.import_private(params, root, where, pw)
    if action == "export":
        if not output:
            raise ConfigError("dprelease key export: give --output (e.g. --output agency.pub)")
        kid = export_public(folder, output)
        return [
            f"wrote {output}: the agency public key {kid[:16]} (signer {load_signer(folder).name}); partners "
            f"check a release with `dprelease verify --release DIR --key {Path(output).name}`"
        ]
    if action == "show":
        s = load_signer(folder)
        return [f"agency key {s.key_id} (signer {s.name}) in {folder}; public key {folder / PUBLIC}"]
    with root_lock(root, f"dprelease key {action}"):
        if action == "init":
            from dprelease.core.privacy import key_guard

            done = key_guard.check(params, root, new_key=new_key, keys=("agency",), use_release=False)
            s, made = ensure_key(folder, signer=signer or DEFAULT_SIGNER)
            if done:
                return done
            if not made and signer and signer != s.name:
                raise ConfigError(
                    f"{folder}: a key exists already (signer {s.name}); `dprelease key rotate "
                    f"--signer {signer!r}` makes a new one"
                )
            return [f"{'made' if made else 'kept'} agency key {s.key_id[:16]} (signer {s.name}) in {folder}"]
        from dprelease.core.release.verify import resign_all

        old, new = rotate(folder, signer=signer)
        retired = folder / RETIRED / old.key_id[:16]
        done, skipped = resign_all(release_folders(params, root), old_key=retired / PUBLIC, signer=new)
        lines = [
            f"retired key {old.key_id[:16]} to {retired}; new agency key {new.key_id[:16]} (signer {new.name})",
            f"re-signed: {', '.join(done) or 'no release folder'}",
        ]
        lines += [f"not re-signed: {s}" for s in skipped]
        lines.append("give partners the new public key: dprelease key export --output agency.pub")
        return lines
