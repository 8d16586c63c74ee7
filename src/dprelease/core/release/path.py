"""Where a release may be written: never over the project root, the data, the code or another output."""

from __future__ import annotations

from pathlib import Path

from dprelease.core.errors import ConfigError

# Folders of a project root a release must never be written into (nor replace): data, code, caches,
# version control and the other outputs.
PROTECTED = (
    "data",
    "src",
    "tests",
    "flows",
    "tasks",
    "benchmarks",
    "scripts",
    ".git",
    ".dvc",
    ".prefect",
    "metrics",
    "plots",
    "reports",
    "runs",
    "mlartifacts",
)


def check_release_path(params, root: str | Path = ".", folder: str | Path | None = None) -> Path:
    """The release folder (``params.release``, or ``folder`` relative to root), or a one-line
    :class:`ConfigError`: never the root or a folder holding it, never inside (or holding) the data,
    the artifacts or a source folder, never an existing folder that is not a release unless
    ``force_release_path: true``."""
    root = Path(root).resolve()
    target = (root / (folder if folder is not None else params.release)).resolve()
    name = f"release path {target}"
    if target == root or target in root.parents:
        raise ConfigError(f"{name} would replace the project root {root}")
    data_dir = (root / params.data.path).resolve().parent
    guarded = [root / p for p in PROTECTED] + [(root / params.artifacts).resolve(), data_dir]
    for g in guarded:
        if target == g or g in target.parents or (target in g.parents and g != root):
            raise ConfigError(f"{name} is inside or holds a protected folder ({g}); choose a path such as 'release'")
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{name} is a file, not a folder")
    if (
        target.is_dir()
        and any(target.iterdir())
        and not (target / "release.json").is_file()
        and not (target / "skipped.json").is_file()
        and not params.force_release_path
    ):
        raise ConfigError(
            f"{name} exists and is not a release folder (no release.json); choose another path "
            "or set force_release_path: true to replace it"
        )
    return target
