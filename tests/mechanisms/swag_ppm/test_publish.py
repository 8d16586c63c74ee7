"""Stage ``publish`` releasing SWAG-PPM (``released.mechanism: swag_ppm``): the shared release folder is the staged draw plus a card built from the evidence on disk,
verified and signed; re-run after a comparison, the card shows it, and the release's files stay the draw's."""

from __future__ import annotations

import json

from conftest import copy_root

from dprelease.core.io import read_json
from dprelease.core.release.folder import verify_release
from dprelease.mechanisms.swag_ppm.publish import staged
from dprelease.pipeline import registry


def publish(params, root):
    return registry.run_stage("publish", params, root)


def test_publish_rebuilds_the_card_from_the_evidence_on_disk(head_run, tmp_path):
    root = copy_root(head_run.root, tmp_path / "root")
    params = head_run.params
    (root / "metrics" / "nonprivate.json").unlink(missing_ok=True)
    first = publish(params, root)
    assert (
        first["mechanism"] == "swag_ppm"
        and first["kind"] == read_json(root / "metrics/swag_ppm_draw.json")["guarantee"]["kind"]
    )
    release = root / params.release
    manifest = verify_release(release)
    card = (release / "README.md").read_text(encoding="utf-8")
    assert "not measured (`make compare`)" in card and "Not audited yet" in card
    assert f"ε = {manifest['guarantee']['epsilon']:.3f}" in card  # the staged draw's guarantee

    (root / "metrics" / "nonprivate.json").write_text(
        json.dumps(
            {
                "weighted_f1": 0.8123,
                "macro_f1": 0.4567,
                "top_quartile_weighted_f1": 0.9012,
                "top_quartile_macro_f1": 0.8899,
                "bottom_quartile_weighted_f1": 0.1234,
                "bottom_quartile_macro_f1": 0.0987,
            }
        ),
        encoding="utf-8",
    )
    publish(params, root)
    card = (release / "README.md").read_text(encoding="utf-8")
    assert "0.901 / 0.890" in card and "0.123 / 0.099" in card and "0.812 / 0.457" in card
    staged_files = read_json(root / staged(params) / "release.json")["files"]
    assert {k: v for k, v in verify_release(release)["files"].items() if k in staged_files and k != "README.md"} == {
        k: v for k, v in staged_files.items() if k != "README.md"
    }  # the draw itself is unchanged


def test_publish_carries_the_epsilon_sensitivity_maximum_near_the_release_settings(head_run, tmp_path):
    from dprelease.core.headline import SENSITIVITY_TABLE

    root = copy_root(head_run.root, tmp_path / "root")
    params = head_run.params
    publish(params, root)
    assert "epsilon_sensitivity" not in verify_release(root / params.release)  # not measured: nothing carried
    lam = params.ppm.prior_precision
    table = root / SENSITIVITY_TABLE
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_text(
        f"swag_lr,prior_precision,epsilon\n0.01,{lam},7.58\n0.03,{lam},9.44\n0.01,{lam * 10},34.48\n", encoding="utf-8"
    )
    publish(params, root)
    manifest = verify_release(root / params.release)  # still whole and signed with the extra block
    assert manifest["epsilon_sensitivity"]["maximum"] == 9.44 and manifest["epsilon_sensitivity"]["cells"] == 2
    assert "the largest ε was 9.440" in (root / params.release / "README.md").read_text(encoding="utf-8")
