"""The private privacy ledger: which records (salted hashes) each registered version was trained on, and the cumulative
ε the published versions spent on them (basic composition).

See docs/service.md, "Notes from the code", `pipeline/service/ledger.py`."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from dprelease.core.io import atomic_path, private_dir, read_json, write_json

SALT, INDEX, HASH_BYTES = "salt.bin", "ledger.json", 16


@dataclass(frozen=True)
class Entry:
    version: str
    epsilon: float
    records: int
    published: bool = False
    snapshot: str = ""  # the snapshot's content digest (public: it names a file, not a record)


def record_hashes(texts: list[str], labels: list[str], salt: bytes) -> np.ndarray:
    """Sorted unique salted hashes of (label, narrative) pairs, as an [n, 16] uint8 array."""
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} narratives but {len(labels)} labels")
    out = {
        hmac.new(salt, f"{label}\x1f{' '.join(str(text).split())}".encode(), hashlib.sha256).digest()[:HASH_BYTES]
        for text, label in zip(texts, labels)
    }
    return np.frombuffer(b"".join(sorted(out)), dtype=np.uint8).reshape(-1, HASH_BYTES)


def _as_keys(hashes: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(hashes).view(f"V{HASH_BYTES}").ravel()


class Ledger:
    """The ledger folder (private): ``salt.bin``, ``ledger.json`` (entries) and ``v<version>.npy`` hashes."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = private_dir(Path(folder))
        index = self.folder / INDEX
        self.entries = [Entry(**e) for e in read_json(index)["entries"]] if index.is_file() else []

    @property
    def salt(self) -> bytes:
        path = self.folder / SALT
        if not path.is_file():
            with atomic_path(path) as tmp:
                tmp.write_bytes(secrets.token_bytes(32))
                tmp.chmod(0o600)
        return path.read_bytes()

    def hashes(self, version: str) -> np.ndarray:
        return np.load(self.folder / f"v{version}.npy")

    def entry(self, version: str) -> Entry:
        for e in self.entries:
            if e.version == version:
                return e
        raise KeyError(f"version {version} is not in the privacy ledger")

    def add(self, version: str, epsilon: float, hashes: np.ndarray, snapshot: str = "") -> Entry:
        if any(e.version == version for e in self.entries):
            raise ValueError(f"version {version} is already in the privacy ledger")
        with atomic_path(self.folder / f"v{version}.npy") as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, hashes)
        entry = Entry(version, float(epsilon), int(len(hashes)), False, snapshot)
        self.entries.append(entry)
        self._save()
        return entry

    def publish(self, version: str) -> None:
        self.entries = [Entry(**(asdict(e) | {"published": True})) if e.version == version else e for e in self.entries]
        self._save()

    def cumulative(self, version: str) -> float:
        """Basic composition over the records of ``version``: the largest per-record sum of ε over the
        published versions trained on that record, ``version`` itself counted as published."""
        own = self.entry(version)
        keys = _as_keys(self.hashes(version))
        spent = np.full(len(keys), own.epsilon)
        for e in self.entries:
            if e.published and e.version != version:
                spent += e.epsilon * np.isin(keys, _as_keys(self.hashes(e.version)))
        return float(spent.max()) if len(spent) else own.epsilon

    def overlapping(self, version: str) -> list[str]:
        """Published versions (other than ``version``) that share at least one record with it."""
        keys = _as_keys(self.hashes(version))
        return [
            e.version
            for e in self.entries
            if e.published and e.version != version and np.isin(keys, _as_keys(self.hashes(e.version))).any()
        ]

    def report(self) -> list[dict]:
        """Per version, aggregates only: ε, record count, published, the versions it overlaps, cumulative ε."""
        return [
            asdict(e) | {"overlaps": self.overlapping(e.version), "cumulative_epsilon": self.cumulative(e.version)}
            for e in self.entries
        ]

    def _save(self) -> None:
        write_json(
            self.folder / INDEX,
            {
                "composition": "basic (per-record sum of ε over published versions)",
                "entries": [asdict(e) for e in self.entries],
            },
        )


def report_table(rows: list[dict]) -> str:
    """:meth:`Ledger.report` as a Markdown table (``make ledger``): per version its ε, record count, whether
    it was published, the published versions it shares records with, and its cumulative ε now."""
    lines = [
        "| version | ε | records | published | shares records with (published) | cumulative ε now |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['version']} | {r['epsilon']:.3f} | {r['records']} | {'yes' if r['published'] else 'no'} | "
        f"{', '.join(r['overlaps']) or '—'} | {r['cumulative_epsilon']:.3f} |"
        for r in rows
    ]
    return "\n".join(
        lines
        + [
            "",
            "cumulative ε: per record, the sum of ε over the published versions trained on it "
            "(this version counted as published); the largest over the version's records.",
        ]
    )
