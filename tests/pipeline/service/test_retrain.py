"""A retrain's run folder and reports (dprelease.pipeline.service.retrain): the run params reading the snapshot and
signing with the project's key, the run folder's randomness key derived from the project's (secret,
re-derived the same), the released arm, and the lines and artifact table a retrain reports. The retrain
itself: tests/flows/test_retrain_flow.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import make_root, slice_raw

from dprelease.core.config import load_params
from dprelease.core.io import read_json, write_json
from dprelease.core.privacy import secret
from dprelease.pipeline.service import retrain as svc

REL = Path("data") / "snapshots" / "sir_to_2015-12-31-0123456789.csv.gz"
REG = {
    "version": "4",
    "epsilon": 5.0691,
    "cumulative_epsilon": 10.1382,
    "utility": 0.61234,
    "decision": "refused",
    "promoted": False,
    "reason": "refused by epsilon (ε 5.069 vs budget 1)",
    "production": "3",
    "figures": {"epsilon": 5.0691, "weighted_f1": 0.61234},
}


@pytest.fixture
def project(tmp_path):
    root = make_root(tmp_path)
    (root / "params.yaml").write_text(yaml.safe_dump(slice_raw(), sort_keys=False), encoding="utf-8")
    return root, load_params(root / "params.yaml")


def test_run_folder_and_params_point_back_to_the_project(project):
    root, p = project
    where = svc.run_folder(root, REL)
    assert where == root / "runs" / "retrain" / "sir_to_2015-12-31-0123456789"
    rp = svc.run_params(p, REL)
    assert (where / rp.data.path).resolve() == (root / REL).resolve()  # the snapshot, from the run folder
    assert (where / rp.signing_key).resolve() == (root / p.artifacts / "keys").resolve()  # the project's one key
    assert rp.model_dump(exclude={"data", "signing_key"}) == p.model_dump(exclude={"data", "signing_key"})


def test_run_key_is_derived_from_the_project_key_and_re_derived_the_same(project):
    root, p = project
    where, rp = svc.prepare_run(p, root, REL)
    assert where.is_dir() and where == svc.run_folder(root, REL)
    child = secret.key_id(where / rp.artifacts)
    assert child != secret.key_id(root / p.artifacts)  # its own key ...
    assert (
        svc.prepare_run(p, root, REL)[0] == where and secret.key_id(where / rp.artifacts) == child
    )  # ... the same again
    other, orp = svc.prepare_run(p, root, REL.with_name("other-ffffffffff.csv.gz"))
    assert secret.key_id(other / orp.artifacts) not in (child, secret.key_id(root / p.artifacts))


def test_released_names_the_mechanism_and_its_audit_arm(tmp_path):
    with pytest.raises(FileNotFoundError, match="published nothing"):
        svc.released(tmp_path)
    # the mechanism's own tags come from its record (SWAG-PPM's figures hook: the released round)
    for rec, expected in (
        (
            {
                "mechanism": "swag_ppm",
                "arm": "swag_ppm_reweighted",
                "guarantee": {"quantities": {"round": 3}},
                "tags": {"round": 3},
            },
            ("swag_ppm round 3", "swag_ppm_reweighted"),
        ),
        ({"mechanism": "dpsgd", "arm": "dpsgd", "guarantee": {"quantities": {}}}, ("dpsgd", "dpsgd")),
        ({"mechanism": "linear_ppm", "arm": None, "guarantee": {"quantities": {}}}, ("linear_ppm", None)),
    ):
        write_json(tmp_path / "metrics" / "released.json", rec)
        assert svc.released(tmp_path) == expected


def test_report_leaves_out_the_run_folder(tmp_path):
    svc.write_report(tmp_path, {"snapshot": "s.csv", "seconds": 1.0, "run_folder": "runs/retrain/s"})
    assert read_json(tmp_path / "metrics" / "retrain.json") == {"snapshot": "s.csv", "seconds": 1.0}


def test_lines_and_artifact_of_a_refused_version():
    assert (
        svc.registry_line(REG, 2.345)
        == "registry: version 4 → refused (refused by epsilon (ε 5.069 vs budget 1)) (2.3 s)"
    )
    promoted = REG | {"decision": "unchanged, already promoted", "promoted": True, "attached": ["epsilon_lb"]}
    assert svc.registry_line(promoted, 0.5) == (
        "registry: version 4 → unchanged, already promoted; audit attached: epsilon_lb (0.5 s)"
    )
    out = {"snapshot": "sir-0123456789.csv.gz", "seconds": 12.34, "registry": REG}
    assert svc.result_line(out) == (
        "sir-0123456789.csv.gz: 12.3 s; version 4 ε=5.069 cumulative ε=10.138 "
        "utility=0.6123 → refused (refused by epsilon (ε 5.069 vs budget 1))"
    )
    text = svc.summary_markdown(out)
    assert text.startswith("### retrain sir-0123456789\n")
    for row in (
        "| ε | 5.069 |",
        "| weighted F1 (released model) | 0.6123 |",
        "| registered version | 4 |",
        "| gate decision | refused |",
        "| production version | 3 |",
        "| cumulative ε (basic composition) | 10.14 |",
    ):
        assert row in text, row


def test_untracked_run_reports_its_figures_only():
    out = {"snapshot": "sir-0123456789.csv.gz", "seconds": 3.0, "figures": {"epsilon": 2.5}}
    assert svc.result_line(out) == "sir-0123456789.csv.gz: 3.0 s"
    text = svc.summary_markdown(out)
    assert "| ε | 2.5 |" in text and "| gate decision | not registered (--no-track) |" in text


def test_result_line_of_a_version_that_claims_no_epsilon():
    reg = REG | {
        "epsilon": None,
        "guarantee": "ppm_uncertified",
        "cumulative_epsilon": float("inf"),
        "reason": "refused by epsilon (no ε claimed (kind ppm_uncertified) vs budget 1)",
    }
    line = svc.result_line({"snapshot": "s.csv", "seconds": 1.0, "registry": reg})
    assert "version 4 no ε (ppm_uncertified) cumulative ε=inf" in line and "ε=None" not in line
