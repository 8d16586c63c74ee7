"""The release folder is the only thing shared: allow-listed files, no training text, a complete manifest;
``dprelease predict`` codes new narratives from it alone and reports bad input in one line."""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import pandas as pd
import pytest
from conftest import SliceRun

from dprelease.cli import main as cli
from dprelease.core.errors import ReleaseError
from dprelease.core.io import read_json
from dprelease.core.release.folder import ALLOWED, check_release_folder, verify_release

pytestmark = pytest.mark.slow

FORBIDDEN_WORDS = ("moments", "weights", "risk", "train", "loss", "swag", "sensitivity")


def _release(run: SliceRun):
    return run.path(run.params.release)


def _train_narratives(run: SliceRun, n: int = 20) -> list[str]:
    df = pd.read_csv(run.path(f"{run.params.artifacts}/data/train.csv"), dtype=str, keep_default_na=False)
    assert len(df) >= n
    return df["text"].head(n).tolist()


def _files(folder) -> list:
    return sorted(p for p in folder.rglob("*") if p.is_file())


# privacy of the folder ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["head", "full"])
def test_release_holds_only_allow_listed_files(request, backend):
    run = request.getfixturevalue(f"{backend}_run")
    folder = _release(run)
    check_release_folder(folder)
    names = {p.relative_to(folder).as_posix() for p in _files(folder)}
    assert names <= ALLOWED
    assert {"model.safetensors", "model.json", "labels.json", "release.json"} <= names
    for name in names:
        assert not any(word in name.lower() for word in FORBIDDEN_WORDS), name


@pytest.mark.parametrize("backend", ["head", "full"])
def test_release_contains_no_training_narrative(request, backend):
    run = request.getfixturevalue(f"{backend}_run")
    needles = []
    for text in _train_narratives(run):
        for t in (text, text[:40]):
            needles += [t.encode("utf-8"), json.dumps(t)[1:-1].encode("utf-8")]
    for path in _files(_release(run)):
        data = path.read_bytes()
        for needle in needles:
            assert needle not in data, f"{path.name} holds training text {needle[:40]!r}"


def test_manifest_fields(head_run):
    run, p = head_run, head_run.params
    manifest = read_json(_release(run) / "release.json")
    released = read_json(run.path("metrics/swag_ppm_draw.json"))
    data = read_json(run.path("metrics/data.json"))
    g = manifest["guarantee"]
    assert g == released["guarantee"]  # the manifest carries the one guarantee record
    assert "SWAG-PPM" in g["mechanism"] and g["kind"] == "ppm_local_asymptotic"
    assert isinstance(g["epsilon"], float) and g["epsilon"] > 0
    assert g["delta"] is None and g["delta_reason"] == "asymptotic, not quantified"
    assert manifest["c"] == p.ppm.c and manifest["g"] == p.ppm.g
    assert manifest["reweighting"]["mode"] == p.ppm.reweight_mode == "iterative"
    assert manifest["reweighting"]["accepted"] == (released["round"] == 3)
    r = released["round"]
    assert manifest["calibration"] == p.ppm.calibration
    knobs = manifest["knobs_that_move_epsilon"]  # every setting that moves ε, as the release was fitted
    assert (knobs["swag_lr"], knobs["swag_epochs"], knobs["swag_rank"]) == (
        getattr(p.swag, p.model.backend).lr,
        getattr(p.swag, p.model.backend).epochs,
        getattr(p.swag, p.model.backend).rank,
    )
    assert knobs["prior_precision"] == p.ppm.prior_precision and knobs["calibration"] == p.ppm.calibration
    assert knobs["finetune_epochs"] == p.backend.finetune.epochs and knobs["reweighting"]["mode"] == "iterative"
    assert manifest["temperature"] == read_json(run.path(f"metrics/temperature_r{r}.json"))["temperature"]
    assert manifest["draws"] == p.ppm.draws and manifest["randomness"]["public_seed"] == p.seed
    assert (
        "secret key" in manifest["randomness"]["released_draw"] and len(manifest["randomness"]["secret_key_id"]) == 16
    )
    # only the released round's statistics and the re-weighting outcome: no Δ̂, ε, F1 or count of another round
    assert "epsilon_by_round" not in manifest and "temperature_by_round" not in manifest
    assert set(manifest["reweighting"]) == {
        "mode",
        "k",
        "step",
        "tolerance",
        "max_refits",
        "accepted",
        "released_round",
        "reason",
    }
    assert not re.search(r"\d[.,]\d|\d\d", manifest["reweighting"]["reason"])  # an outcome, never a statistic
    assert isinstance(manifest["code_version"], str) and manifest["code_version"]
    assert manifest["dataset"] == {k: data["public"][k] for k in ("classes", "until", "expected_train_size")}  # no
    # private count (rows, training and test sizes) leaves the agency
    assert manifest["released_from_round"] == released["round"] in (2, 3)
    labels = read_json(_release(run) / "labels.json")
    assert set(labels) == {"codes", "titles"}  # no class sizes or other per-split counts
    assert len(labels["codes"]) == len(labels["titles"]) == data["classes"]


@pytest.mark.parametrize("backend", ["head", "full"])
def test_manifest_lists_every_file_with_its_sha256(request, backend):
    """``files``: every other file of the folder (but the signature of the manifest itself) → its sha256, so
    a partner can detect tampering; ``release.sig`` signs the manifest with the run's agency key."""
    run = request.getfixturevalue(f"{backend}_run")
    folder = _release(run)
    manifest = read_json(folder / "release.json")
    names = {p.relative_to(folder).as_posix() for p in _files(folder)}
    assert set(manifest["files"]) == names - {"release.json", "release.sig"}
    from dprelease.core.release.signing import PUBLIC, check_signature, key_folder

    assert (
        check_signature(folder, key_folder(run.params, run.root) / PUBLIC)["key_id"] == manifest["signed_by"]["key_id"]
    )
    for name, digest in manifest["files"].items():
        assert digest == hashlib.sha256((folder / name).read_bytes()).hexdigest(), name
    assert {"guarantee", "model", "code_version"} <= set(manifest)
    assert manifest["model"] == read_json(folder / "model.json")
    assert verify_release(folder) == manifest


@pytest.mark.parametrize("extra", ["weights.npy", "tokenizer/moments.safetensors", "train.csv"])
def test_check_release_folder_rejects_extra_files(head_run, tmp_path, extra):
    folder = tmp_path / "release"
    shutil.copytree(_release(head_run), folder)
    check_release_folder(folder)
    (folder / extra).parent.mkdir(parents=True, exist_ok=True)
    (folder / extra).write_bytes(b"\x00" * 8)
    with pytest.raises(ReleaseError, match=extra.replace(".", r"\.")):
        check_release_folder(folder)


# predict ---------------------------------------------------------------------------------------------------------------
NARRATIVES = [
    "An employee fell from a ladder and fractured his left wrist.",
    "A worker's finger was caught in a press and the fingertip was amputated.",
    "Employee cut his hand on a box cutter and required stitches.",
    "While lifting a heavy box, an employee felt pain in her lower back.",
    "A roofer fell through a skylight and broke several ribs.",
]


@pytest.fixture
def narratives_csv(tmp_path):
    path = tmp_path / "narratives.csv"
    pd.DataFrame({"id": range(1, 6), "Final Narrative": NARRATIVES}).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("backend", ["head", "full"])
def test_predict_end_to_end(request, backend, narratives_csv, tmp_path, capsys):
    run = request.getfixturevalue(f"{backend}_run")
    out = tmp_path / f"coded_{backend}.csv"
    rc = cli(
        ["predict", "--release", str(_release(run)), "--input", str(narratives_csv), "--output", str(out), *_key(run)]
    )
    assert rc == 0, capsys.readouterr().err
    assert "coded 5 narratives" in capsys.readouterr().out
    coded = pd.read_csv(out, dtype={"code": str}, keep_default_na=False)
    labels = read_json(_release(run) / "labels.json")
    assert len(coded) == 5
    assert {"code", "title", "probability"} <= set(coded.columns)
    assert list(coded["Final Narrative"]) == NARRATIVES and list(coded["id"]) == [1, 2, 3, 4, 5]
    assert set(coded["code"]) <= set(labels["codes"])
    title_of = dict(zip(labels["codes"], labels["titles"]))
    assert all(title_of[c] == t for c, t in zip(coded["code"], coded["title"]))
    n = len(labels["codes"])
    assert ((coded["probability"] > 0) & (coded["probability"] <= 1)).all()
    assert (coded["probability"] >= 1 / n - 1e-4).all()  # the arg-max of a softmax over n classes


def _key(run) -> list[str]:
    """``--key`` with the public key the session run signed its releases with."""
    from release_helpers import run_key

    return ["--key", str(run_key(run))]


def _predict_error(capsys, release, input_csv, output, *extra) -> str:
    rc = cli(["predict", "--release", str(release), "--input", str(input_csv), "--output", str(output), *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith("dprelease: error:") and "\n" not in err, err
    assert not output.exists()
    return err


def test_predict_missing_input(head_run, tmp_path, capsys):
    err = _predict_error(capsys, _release(head_run), tmp_path / "nope.csv", tmp_path / "out.csv", *_key(head_run))
    assert "nope.csv" in err and "not found" in err


def test_predict_no_narrative_column(head_run, tmp_path, capsys):
    path = tmp_path / "cols.csv"
    pd.DataFrame({"id": [1], "description": ["fell off a ladder"]}).to_csv(path, index=False)
    err = _predict_error(capsys, _release(head_run), path, tmp_path / "out.csv", *_key(head_run))
    assert "narrative column" in err and "description" in err


def test_predict_named_column_missing(head_run, narratives_csv, tmp_path, capsys):
    err = _predict_error(
        capsys, _release(head_run), narratives_csv, tmp_path / "out.csv", *_key(head_run), "--text-column", "Story"
    )
    assert "Story" in err


@pytest.mark.parametrize(
    "content",
    [
        "id,Final Narrative\n1,fell off a ladder\n2,   \n3,cut hand\n",
        "id,Final Narrative\n1,fell off a ladder\n2,\n3,cut hand\n",
        'Final Narrative\nfell off a ladder\n""\ncut hand\n',
    ],
    ids=["blank", "missing", "quoted-empty"],
)
def test_predict_empty_narrative(head_run, tmp_path, capsys, content):
    path = tmp_path / "empty.csv"
    path.write_text(content, encoding="utf-8")
    err = _predict_error(capsys, _release(head_run), path, tmp_path / "out.csv", *_key(head_run))
    assert "empty narrative" in err and "row(s) 2" in err


def test_predict_whitespace_only_line_in_single_column_csv(head_run, tmp_path, capsys):
    path = tmp_path / "blank.csv"
    path.write_text("Final Narrative\nfell off a ladder\n   \ncut hand\n", encoding="utf-8")
    err = _predict_error(capsys, _release(head_run), path, tmp_path / "out.csv", *_key(head_run))
    assert "empty narrative" in err and "row(s) 2" in err


def test_predict_not_a_release_folder(narratives_csv, tmp_path, capsys):
    folder = tmp_path / "not_a_release"
    folder.mkdir()
    err = _predict_error(capsys, folder, narratives_csv, tmp_path / "out.csv")
    assert "not a release folder" in err
