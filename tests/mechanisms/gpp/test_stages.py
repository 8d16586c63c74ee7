"""The GPP stages end to end on the tiny OSHA slice and small digits: table, report, sanitizer release,
``sanitize``; the distributed rows with a stand-in engine (the Flower run is tested in federated/)."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, make_root, run_stages, slice_raw

from dprelease.core.config import parse_params
from dprelease.core.errors import ReleaseError
from dprelease.core.release.check import ALLOWED
from dprelease.mechanisms.gpp import stages
from dprelease.mechanisms.gpp.data import digits_composites
from dprelease.mechanisms.gpp.federated import DistributedResult

TINY_GPP = {
    "epochs": 2,
    "sweep_epochs": 1,
    "encoder_hidden": [16, 8],
    "head_hidden": [8],
    "batch_size": 16,
    "probe": {"epochs": 2, "lr": 0.01, "batch_size": 16},
    "noise_grid": [1.0],
    "sweep_beta": [0.5, 2.0],
    "sweep_d_z": [4],
    "sweep_k": [0],
    "digits": {"n_train": 120, "n_test": 60, "d_z": 4, "clients": 2},
    "osha": {"d_z": 4, "min_client_rows": 1, "min_sector_rows": 1},
    "distributed": {"enabled": False},
}


@pytest.fixture(scope="module")
def gpp_run(tmp_path_factory):
    params = parse_params(slice_raw("head") | {"gpp": TINY_GPP})
    root = make_root(tmp_path_factory.mktemp("gpp"))
    shutil.copyfile(ROOT / "data/osha_regions.csv", root / "data/osha_regions.csv")
    run_stages(params, root, ["stratify", "featurize", "gpp_digits", "gpp_osha", "gpp_release", "gpp_report"])
    return params, root


def test_table_has_the_issue_columns_and_every_method(gpp_run):
    _, root = gpp_run
    table = pd.read_csv(root / "reports/gpp/table.csv")
    assert {
        "dataset",
        "method",
        "setting",
        "clients",
        "beta",
        "d_z",
        "utility_auc",
        "utility_accuracy",
        "adversary_auc",
    } <= set(table.columns)
    base = table[table["experiment"] == "baseline"]
    for ds in ("digits", "osha"):
        assert set(base[base["dataset"] == ds]["method"]) == {"raw", "noprivacy", "random_projection", "noisy", "gpp"}
    assert set(table["experiment"]) >= {"sweep_beta", "sweep_d_z", "sweep_k"}
    assert table[["utility_auc", "adversary_auc"]].notna().all().all()
    report = (root / "reports/gpp/report.md").read_text()
    assert "no differential-privacy ε" in report and (root / "reports/gpp/beta_tradeoff.png").stat().st_size > 0


def test_release_is_allow_listed_and_sanitize_follows_the_contract(gpp_run):
    params, root = gpp_run
    folder = root / params.gpp.release
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert files <= ALLOWED and {"release.json", "README.md", "model.safetensors", "model.json"} <= files
    manifest = json.loads((folder / "release.json").read_text())
    assert manifest["kind"] == "sanitizer" and manifest["mechanism"] == "gpp"
    from dprelease.core.release.signing import PUBLIC, check_signature, key_folder

    assert "release.sig" in files  # signed by the project's agency key
    assert check_signature(folder, key_folder(params, root) / PUBLIC)["key_id"] == manifest["signed_by"]["key_id"]
    assert manifest["guarantee"]["epsilon"] is None and "No differential-privacy" in (folder / "README.md").read_text()
    from dprelease.core.privacy.guarantee import Guarantee

    assert Guarantee.from_dict(manifest["guarantee"]).kind == "empirical_probe"
    texts = ["Worker fell from a ladder and fractured his wrist.", "An employee's finger was amputated by a saw."]
    out, guarantee = stages.sanitize(folder, texts, seed=3)
    assert len(out) == 2 and all(len(z) == params.gpp.osha.d_z for z in out["z"])
    again, _ = stages.sanitize(folder, texts, seed=3)
    other, _ = stages.sanitize(folder, texts, seed=4)
    assert out["z"].tolist() == again["z"].tolist() and out["z"].tolist() != other["z"].tolist()
    assert guarantee["epsilon"] is None and guarantee["guarantee"] == "empirical_probe"
    assert guarantee["adversary_auc"] == manifest["audit"]["adversary_auc"] and "S003" in guarantee["statement"]


def test_no_narrative_or_label_reaches_public_outputs(gpp_run):
    params, root = gpp_run
    train = pd.read_csv(root / params.artifacts / "data/train.csv", dtype=str, keep_default_na=False)
    public = [p for d in ("reports/gpp", params.gpp.release) for p in (root / d).rglob("*") if p.is_file()]
    public += list((root / "metrics").glob("gpp_*.json"))
    blob = b"".join(p.read_bytes() for p in public)
    assert not any(t[:40].encode() in blob for t in train["text"])


def test_tampered_release_is_refused(gpp_run, tmp_path):
    params, root = gpp_run
    copy = tmp_path / "rel"
    shutil.copytree(root / params.gpp.release, copy)
    (copy / "model.json").write_text((copy / "model.json").read_text().replace('"d_z": 4', '"d_z": 5'))
    with pytest.raises(ReleaseError, match="sha256"):
        stages.sanitize(copy, ["x"], seed=0)
    (copy / "notes.txt").write_text("private")
    with pytest.raises(ReleaseError, match="must not be released"):
        stages.sanitize(copy, ["x"], seed=0)


def test_distributed_rows_use_run_distributed(monkeypatch):
    """Rows and communication figures come from ``run_distributed``'s result; β is cycled per client."""
    import dprelease.mechanisms.gpp.federated as federated

    data = digits_composites(n_train=80, n_test=40, clients=3, seed=0)
    calls = []

    def fake(**kw):
        calls.append(kw)
        rng = np.random.default_rng(0)
        return DistributedResult(
            z_train=rng.normal(size=(80, 4)).astype(np.float32),
            z_test=rng.normal(size=(40, 4)).astype(np.float32),
            rounds=7,
            clients=3,
            bytes_up_per_round=100.0,
            bytes_down_per_round=50.0,
            fedavg_bytes_per_round=9e3,
            engine_overhead_s=1.5,
            train_s=2.5,
        )

    monkeypatch.setattr(federated, "run_distributed", fake)
    params = parse_params({"gpp": TINY_GPP | {"distributed": {"enabled": True, "hetero_betas": [0.5, 2.0]}}})
    rows, comm = stages.distributed_rows(data, params, stages.train_config(params, 4), seed=1)
    assert [r["setting"] for r in rows] == ["distributed", "distributed_hetero_beta"]
    assert {r["experiment"] for r in rows} == {"distributed"}
    assert calls[1]["betas"] == [0.5, 2.0, 0.5] and "s_train" in calls[0] and calls[0]["epochs"] == 2
    assert comm["distributed"]["bytes_up_per_round"] == 100 and rows[0]["clients"] == 3


def test_dprelease_sanitize_cli_writes_one_draw_per_narrative(gpp_run, tmp_path, capsys):
    from dprelease.cli import main
    from dprelease.core.release.sanitizer import read_metadata

    params, root = gpp_run
    src = tmp_path / "narratives.csv"
    pd.DataFrame({"Final Narrative": ["Worker fell from a ladder.", "Finger amputated by a saw."]}).to_csv(
        src, index=False
    )
    out = tmp_path / "z.parquet"
    from dprelease.core.release.signing import PUBLIC, key_folder

    key = str(key_folder(params, root) / PUBLIC)  # the agency's signature checked first
    assert (
        main(
            [
                "sanitize",
                "--release",
                str(root / params.gpp.release),
                "--input",
                str(src),
                "--output",
                str(out),
                "--key",
                key,
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "with the gpp release, no ε claimed ->" in captured.out and captured.err == ""  # GPP has no ε
    table, meta = pd.read_parquet(out), read_metadata(out)
    assert len(table) == 2 and all(len(z) == params.gpp.osha.d_z for z in table["z"])
    assert meta["mechanism"] == "gpp" and meta["epsilon"] is None
