"""Helpers shared by the `predict` and release-verification tests (not a test module)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from dprelease.cli import main as cli
from dprelease.core.io import read_json, write_json
from dprelease.core.release.folder import file_digests

NARRATIVES = [
    "An employee fell from a ladder and fractured his left wrist.",
    "A worker's finger was caught in a press and the fingertip was amputated.",
    "Employee cut his hand on a box cutter and required stitches.",
    "While lifting a heavy box, an employee felt pain in her lower back.",
]


# helpers ----------------------------------------------------------------------------------------------------------
def copy_release(run, tmp_path, name: str = "release"):
    """A private copy of a session run's release folder (never write into the session root)."""
    dst = tmp_path / name
    shutil.copytree(run.path(run.params.release), dst)
    return dst


def rehash(folder) -> None:
    """An attacker who edits the manifest too: ``files`` made to match whatever the folder now holds."""
    manifest = read_json(folder / "release.json")
    manifest["files"] = file_digests(folder)
    write_json(folder / "release.json", manifest)


def edit_json(folder, name: str, **changes) -> None:
    obj = read_json(folder / name)
    obj.update(changes)
    (folder / name).write_text(json.dumps(obj), encoding="utf-8")


def write_narratives(tmp_path):
    path = tmp_path / "narratives.csv"
    pd.DataFrame({"id": range(1, len(NARRATIVES) + 1), "Final Narrative": NARRATIVES}).to_csv(path, index=False)
    return path


def run_predict(capsys, release, input_csv, output, *extra) -> tuple[int, str, str]:
    rc = cli(["predict", "--release", str(release), "--input", str(input_csv), "--output", str(output), *extra])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err.strip()


def run_key(run):
    """The public key of the agency key a session run signed its releases with (what its partners hold)."""
    from dprelease.core.release.signing import PUBLIC, key_folder

    return key_folder(run.params, run.root) / PUBLIC


NO_CHECK_WARNING = "dprelease: warning: --no-signature-check:"


def fails(capsys, release, input_csv, output, *names: str, key=None) -> str:
    """``predict`` refuses with one error line, writing nothing. With ``key``, the signature is checked with
    it; without, ``--no-signature-check`` reaches the checks a signature would pre-empt (a file changed along
    with the manifest), and its one warning line comes before the error."""
    rc, _, err = run_predict(
        capsys, release, input_csv, output, *(["--key", str(key)] if key is not None else ["--no-signature-check"])
    )
    assert rc == 2, err
    if key is None:
        warning, _, err = err.partition("\n")
        assert warning.startswith(NO_CHECK_WARNING), warning
    assert err.startswith("dprelease: error:") and "\n" not in err, err
    assert "Traceback" not in err
    for name in names:
        assert name in err, f"{name!r} not named in: {err}"
    assert not output.exists()
    assert not list(output.parent.glob(f".{output.name}.*"))  # no temporary sibling left behind
    return err


# a tiny signed release, made in seconds (no pipeline run) ------------------------------------------------------------
CODES, TITLES = ["111", "112", "113"], ["Fractures", "Amputations", "Cuts"]


def tiny_release(folder, *, signer, favour: int = 0):
    """A published (signed) head release with 3 classes whose linear head codes every narrative as class
    ``favour`` (zero weights, a large bias)."""
    import torch
    from conftest import tiny_head_backend

    from dprelease.core.privacy.guarantee import ppm
    from dprelease.core.release.folder import publish, write_release

    backend = tiny_head_backend(classes=3, hidden=0)
    model = backend.build_model(384)
    with torch.no_grad():
        model.net[-1].weight.zero_()
        model.net[-1].bias.fill_(-4.0)
        model.net[-1].bias[favour] = 4.0
    staging = folder.parent / f"{folder.name}-staging"
    write_release(
        staging, backend, model, CODES, TITLES, {"guarantee": ppm(1.5, 0.75).as_dict()}, ["core/release/folder.py"]
    )
    publish(staging, folder, "# a tiny release\n", signer=signer)
    shutil.rmtree(staging)
    return folder


# a signing agency and its published release, shared by the signing tests -----------------------------------------
AGENCY = "Test Safety Agency"


@pytest.fixture(scope="module")
def agency(tmp_path_factory):
    """(key folder, signer) of a fresh agency key."""
    from dprelease.core.release.signing import ensure_key

    keys = tmp_path_factory.mktemp("agency") / "keys"
    signer, made = ensure_key(keys, signer=AGENCY)
    assert made
    return keys, signer


@pytest.fixture(scope="module")
def published(agency, tmp_path_factory):
    return tiny_release(tmp_path_factory.mktemp("published") / "release", signer=agency[1])


@pytest.fixture
def signed_copy(published, tmp_path):
    """A private copy of the signed release (tests that tamper work on it)."""
    dst = tmp_path / "release"
    shutil.copytree(published, dst)
    return dst


def verify_cli(capsys, folder, key):
    rc = cli(["verify", "--release", str(folder), "--key", str(key)])
    out = capsys.readouterr()
    return rc, out.out.strip(), out.err.strip()


def verify_refused(capsys, folder, key, *needles):
    rc, out, err = verify_cli(capsys, folder, key)
    assert rc == 2 and out == "" and err.startswith("dprelease: error:") and "\n" not in err, (rc, out, err)
    for n in needles:
        assert n in err, err
    return err
