"""The release folder and `predict`, which codes new narratives from that folder alone.

A release holds: ``model.safetensors`` (the released draw), ``model.json`` (architecture and the
public encoder reference), ``labels.json`` (OIICS codes and titles), ``tokenizer/`` + ``config.json``
for the full backend, and ``release.json`` (the manifest). It never holds SWAG moments, risks, weights,
losses or training text; :func:`check_release_folder` enforces that. The manifest's ``files`` maps every
other file to its sha256, so a partner can tell a tampered or corrupt release from the real one:
:func:`verify_release` checks it (with the file checks of :mod:`dprelease.core.release.check`), and everything else that can be
checked without loading the weights, before `predict` loads anything; it lives in
:mod:`dprelease.core.release.classifier`, which imports no torch (``dprelease verify``).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from dprelease import __version__
from dprelease.core.backends import backend_class
from dprelease.core.data.records import read_csv
from dprelease.core.data.splits import label_info
from dprelease.core.errors import ReleaseError
from dprelease.core.io import atomic_dir, atomic_path, write_json
from dprelease.core.release.check import (  # noqa: F401  (ALLOWED: re-exported)
    ALLOWED,
    MANIFEST,
    UNLISTED,
    check_release_folder,
    file_digests,
    release_files,
    shown_as,
    snapshot,
)
from dprelease.core.release.classifier import verify_classifier as _verify
from dprelease.core.release.classifier import verify_release
from dprelease.core.release.outputs import check_output, new_columns, require_rows
from dprelease.core.release.signing import Signer, require_signature, sign_folder

CARD = "README.md"

PREDICT_BATCH = 512  # narratives scored at once: memory stays bounded however long the input
PROGRESS_MIN_ROWS = 2000  # smaller inputs get no progress bar (nor does a non-TTY stderr)
NARRATIVE_COLUMNS = ("Final Narrative", "narrative", "text")
CODED_COLUMNS = ("code", "title", "probability")  # what predict adds (with --column-prefix before each)


def write_release(
    folder: Path,
    backend,
    model,
    codes: list[str],
    titles: list[str],
    manifest: dict,
    code: list[str],
    *,
    private: bool = False,
) -> None:
    """Write a release folder whole. ``manifest`` carries the guarantee record and public config;
    ``code`` is the code that made the release (package-relative, hashed into ``code_version``).
    The manifest's ``files`` records the sha256 of every other file in the folder. ``private``: a folder
    that is never shared (an arm's model), owner-only like every private artifact."""
    from dprelease.contracts import source  # here: `predict` never writes a release

    with atomic_dir(folder, private=private) as tmp:
        model_entry = backend.write_release_model(model, tmp)
        write_json(tmp / "labels.json", {"codes": codes, "titles": titles})
        write_json(
            tmp / MANIFEST,
            manifest
            | {
                "model": model_entry,
                "files": file_digests(tmp),
                "code_version": f"{__version__}+{source.code_hash(code)[:16]}",
            },
        )
        check_release_folder(tmp)


def publish(staging: Path, folder: Path, card: str, *, signer: Signer, extra: dict | None = None) -> None:
    """The shared release folder: a verified staging release plus its model card, with ``files`` in the
    manifest re-computed to cover the card, signed by ``signer``. Written whole (atomic). ``extra``: public
    aggregates measured after the draw (the ε-sensitivity grid's maximum) added to the manifest."""
    manifest = verify_release(staging)
    with atomic_dir(folder) as tmp:
        for rel in release_files(staging):
            if rel not in UNLISTED:
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(staging / rel, tmp / rel)
        (tmp / CARD).write_text(card, encoding="utf-8")
        write_json(tmp / MANIFEST, manifest | (extra or {}) | {"files": file_digests(tmp)})
        sign_folder(tmp, signer)
        check_release_folder(tmp)


def arm_model_dir(params, arm: str) -> str:
    """Where a comparison arm keeps its model as a release-format folder (private: arms other than the
    release are never shared; the privacy audit loads them from here, as an attacker would a release)."""
    return f"{params.artifacts}/arms/{arm}/model"


def write_arm_model(lay, arm: str, backend, model, guarantee, code: list[str]) -> None:
    labels = label_info(lay)
    write_release(
        lay.artifacts / "arms" / arm / "model",
        backend,
        model,
        labels["codes"],
        labels["titles"],
        {"guarantee": guarantee.as_dict(), "arm": arm},
        code,
        private=True,
    )


def load_release_model(folder: str | Path, device: str | torch.device = "cpu") -> tuple[dict, dict, torch.nn.Module]:
    """A verified release folder's (manifest, model.json, model): what an attacker gets."""
    manifest, arch, _ = _verify(Path(folder))
    model = backend_class(arch["backend"]).load_release_model(Path(folder), arch, torch.device(device))
    return manifest, arch, model


class Coder:
    """A release that codes lists of narratives (``predict`` and the MLflow model use it). When the Coder is
    made, the folder's files are read once into a private copy, and that copy is verified (the agency's
    signature with ``key`` first — no key is refused unless ``signature_check`` is False, the caller's explicit
    opt-out — then manifest hashes, allow-list, dimensions, shapes); the weights load from the copy on the
    first call, once (then the copy is removed), so the files loaded are the files checked."""

    def __init__(
        self, release: str | Path, device: str = "cpu", *, key: str | Path | None = None, signature_check: bool = True
    ) -> None:
        self.release, self.device = Path(release), _device(device)
        self._copy = tempfile.TemporaryDirectory(prefix="dprelease-release-")
        self.folder = Path(self._copy.name)
        try:
            with shown_as(self.folder, self.release):
                snapshot(self.release, self.folder)
                self.signature = require_signature(self.folder, key, shown=self.release, check=signature_check)
                _, self.arch, self.labels = _verify(self.folder)
        except BaseException:
            self._copy.cleanup()
            raise
        self._score = None

    def __call__(self, texts: list[str]) -> pd.DataFrame:
        """code, title and probability of the arg-max class per narrative."""
        if self._score is None:
            self._score = backend_class(self.arch["backend"]).release_scorer(self.folder, self.arch, self.device)
            self._copy.cleanup()  # everything is loaded: the copy has done its work
        prob, idx = _score_batches(self._score, texts, len(self.labels["codes"]), self.release)
        return pd.DataFrame(
            {
                "code": [self.labels["codes"][i] for i in idx.tolist()],
                "title": [self.labels["titles"][i] for i in idx.tolist()],
                "probability": prob.numpy().round(4),
            }
        )


def predict(
    release: str | Path,
    input_csv: str | Path,
    output_csv: str | Path,
    text_column: str | None = None,
    device: str = "cpu",
    encoding: str = "auto",
    *,
    key: str | Path | None = None,
    column_prefix: str = "",
    signature_check: bool = True,
    force: bool = False,
    warn=lambda line: print(line, file=sys.stderr),
) -> int:
    """Code every narrative of ``input_csv``; write its columns plus code, title, probability (each name
    after ``column_prefix``). Returns the row count. The release is verified (``key``: its signature, required
    unless ``signature_check`` is False; then manifest hashes, allow-list, dimensions, tensor shapes) before
    any weight is loaded; the output path (an existing file only with ``force``) and the new columns are checked
    before anything is coded (:mod:`dprelease.core.release.outputs`); every problem is a one-line
    :class:`ReleaseError` (or ``DataError`` for the input), with nothing written. Narratives longer than the
    encoder's window are coded from its first tokens, and counted in one line given to ``warn``."""
    output_csv = check_output(output_csv, input_file=input_csv, release=release, replace=force)
    coder = Coder(release, device, key=key, signature_check=signature_check)  # checked; no weight loaded yet
    df, texts = read_narratives(Path(input_csv), text_column, encoding)
    columns = new_columns(df.columns, CODED_COLUMNS, column_prefix, input_csv)
    require_rows(len(texts), input_csv)
    if long := over_window(texts, coder.arch["max_length"]):
        warn(
            f"dprelease: note: {len(long)} of {len(texts)} narratives are longer than the encoder's window "
            f"({coder.arch['max_length']} tokens) and are coded from their first {coder.arch['max_length']} tokens "
            f"only (data rows {', '.join(map(str, long[:5]))}{', …' if len(long) > 5 else ''})"
        )
    coded = coder(texts)
    out = df.copy()
    for name, column in zip(columns, coded.columns):
        out[name] = coded[column].to_numpy()
    check_output(output_csv, input_file=input_csv, release=release, replace=force)  # again: it may have changed
    try:
        with atomic_path(output_csv) as tmp:
            out.to_csv(tmp, index=False)
    except OSError as e:
        raise ReleaseError(f"{output_csv}: cannot write the output ({e.strerror or e})") from None
    return len(out)


def _device(device: str) -> torch.device:
    try:
        dev = torch.device(device)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ReleaseError(f"unknown device {device!r} (cpu, cuda or cuda:N)")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ReleaseError(f"device {device!r} requested but no CUDA device is available")
    return dev


def read_narratives(path: Path, text_column: str | None, encoding: str) -> tuple[pd.DataFrame, list[str]]:
    df = read_csv(path, encoding, skip_blank_lines=False)  # one-line DataError: missing, binary, mis-encoded, not CSV
    column = text_column or next((c for c in NARRATIVE_COLUMNS if c in df.columns), None)
    if column is None or column not in df.columns:
        raise ReleaseError(
            f"{path}: no narrative column (looked for {text_column or ', '.join(NARRATIVE_COLUMNS)}; "
            f"found {', '.join(map(str, df.columns))})"
        )
    texts = df[column].fillna("").astype(str).str.strip()
    if (texts == "").any():
        rows = (texts == "").to_numpy().nonzero()[0][:5] + 1
        raise ReleaseError(f"{path}: empty narrative in data row(s) {', '.join(map(str, rows))}")
    wordless = ~texts.str.contains(r"[^\W\d_]", regex=True)  # not one letter: numbers, codes, punctuation
    if len(texts) and wordless.all():
        raise ReleaseError(
            f"{path}: column {column!r} holds no text (e.g. {texts.iloc[0][:40]!r}): not narratives; "
            "give the narrative column with --text-column"
        )
    if wordless.any():
        rows = wordless.to_numpy().nonzero()[0][:5] + 1
        raise ReleaseError(
            f"{path}: {int(wordless.sum())} value(s) of column {column!r} hold no word (data row(s) "
            f"{', '.join(map(str, rows))}, e.g. {texts[wordless].iloc[0][:40]!r}): not narratives"
        )
    return df, texts.tolist()


def over_window(texts: list[str], max_length: int) -> list[int]:
    """The 1-based data rows whose narrative is longer than ``max_length`` tokens of the public encoder's tokenizer
    (the head's encoder, and the full backend's released copy of it), special tokens included: what the model
    cuts. Counted in chunks, each text's characters bounded (a token is at least one character)."""
    from dprelease.core.backends.minilm import token_ids  # the fast tokenizer `embed` uses (no transformers import)

    rows = []
    for start in range(0, len(texts), PREDICT_BATCH):
        chunk = [t[: 8 * max_length] for t in texts[start : start + PREDICT_BATCH]]
        ids = token_ids(chunk, max_length + 1)  # cut at one past the window: longer is all that is asked
        rows += [start + i + 1 for i, row in enumerate(ids) if len(row) > max_length]
    return rows


def _score_batches(score, texts: list[str], n_classes: int, release: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Arg-max class and its probability per narrative, scored :data:`PREDICT_BATCH` at a time (only the
    arg-max is kept, never the whole [n, C] matrix)."""
    n = len(texts)
    prob, idx = torch.empty(n), torch.empty(n, dtype=torch.long)
    disable = True if n < PROGRESS_MIN_ROWS else None  # None: tqdm shows the bar only on a TTY
    with tqdm(total=n, desc="predict", unit="narrative", file=sys.stderr, disable=disable) as bar:
        for start in range(0, n, PREDICT_BATCH):
            chunk = texts[start : start + PREDICT_BATCH]
            probs = score(chunk)
            if tuple(probs.shape) != (len(chunk), n_classes):
                raise ReleaseError(
                    f"{release}: model gave scores of shape {tuple(probs.shape)} for "
                    f"{len(chunk)} narratives and {n_classes} classes"
                )
            if not torch.isfinite(probs).all():
                raise ReleaseError(f"{release}: model gave non-finite scores (data rows from {start + 1})")
            prob[start : start + len(chunk)], idx[start : start + len(chunk)] = probs.max(dim=1)
            bar.update(len(chunk))
    return prob, idx
