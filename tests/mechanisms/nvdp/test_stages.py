"""The NVDP stages end to end on a tiny root (OSHA slice + 40 rows of MRPC), and the sanitizer contract."""

import json
import shutil

import pandas as pd
import pytest

from dprelease.core.errors import ReleaseError
from dprelease.core.release.check import ALLOWED
from dprelease.mechanisms.nvdp.stages import sanitize

pytestmark = pytest.mark.slow


def test_code_each_stage_runs_is_code_it_declares(nvdp_run):
    from dprelease.contracts import source
    from dprelease.pipeline import registry

    params, _, used = nvdp_run
    for name, files in used.items():
        stage = registry.get(params, name)
        declared = {f.relative_to(source.PACKAGE_DIR).as_posix() for f in source.code_files(stage.code)}
        assert files <= declared, f"{name} ran code it does not declare: {sorted(files - declared)}"
    assert {"mechanisms/nvdp/renyi.py", "mechanisms/nvdp/accountant.py", "mechanisms/nvdp/train.py"} <= used[
        "nvdp_osha"
    ]
    assert "mechanisms/nvdp/report.py" not in used["nvdp_osha"] and "mechanisms/nvdp/states.py" in used["nvdp_states"]


def test_table_report_and_metrics(nvdp_run):
    params, root, summaries = nvdp_run
    df = pd.read_csv(root / "reports/nvdp/table.csv")
    for col in ("task", "variant", "lambda", "score", "bdp_epsilon", "rd_max", "rd_avg", "rd_max_filtered"):
        assert col in df
    assert set(df.task) == {"mrpc", "osha"} and set(df.variant) == {"nonprivate", "unconstrained", "clipped"}
    assert len(df) == 2 * (1 + 2 * len(params.nvdp.lambdas))
    private = df[df.variant != "nonprivate"]
    assert (private.bdp_epsilon >= 0).all() and (private.rd_max >= private.rd_max_filtered).all()
    assert (root / "reports/nvdp/tradeoff.png").stat().st_size > 0
    text = (root / "reports/nvdp/report.md").read_text(encoding="utf-8")
    assert "Table 1 analogue" in text and "filtered" in text
    section = (root / "reports/nvdp/section.md").read_text(encoding="utf-8")  # its section of docs/results.md
    assert section.startswith("## NVDP with parameter clipping") and "| mrpc | clipped |" in section
    assert json.loads((root / "metrics/nvdp_mrpc.json").read_text())["clipped@0.01"]["bdp_epsilon"] > 0


def test_membership_scores_feed_the_audit_arm(nvdp_run):
    from safetensors.torch import load_file

    params, root, _ = nvdp_run
    scores = load_file(str(root / params.artifacts / "nvdp/membership/scores.safetensors"))
    member = scores["member"].bool()
    assert set(scores) == {"nonprivate", "unconstrained", "clipped", "member"} and 0 < int(member.sum()) < len(member)
    assert all(v.shape == member.shape and bool((v <= 0).all()) for k, v in scores.items() if k != "member")  # log p_y
    audit = json.loads((root / "metrics/audit_nvdp.json").read_text())
    assert set(audit["arms"]) == {"nonprivate", "unconstrained", "clipped"}
    assert all(0 <= a["attacks"]["loss"]["auc"] <= 1 for a in audit["arms"].values())
    assert audit["arms"]["clipped"]["lambda"] == params.nvdp.release_lambda
    assert all(a["claimed_epsilon"] is None for a in audit["arms"].values())  # NVDP claims no ε
    assert audit["arms"]["clipped"]["reference_accountant_epsilon"] > 0
    assert "NVDP clipped" in (root / "reports/privacy_nvdp/report.md").read_text(encoding="utf-8")


def test_sanitizer_release_holds_only_public_files(nvdp_run):
    params, root, _ = nvdp_run
    folder = root / params.nvdp.release_dir
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert files == {"model.safetensors", "model.json", "README.md", "release.json", "release.sig"} and files <= ALLOWED
    manifest = json.loads((folder / "release.json").read_text())
    assert manifest["kind"] == "sanitizer" and manifest["mechanism"] == "nvdp"
    from dprelease.core.release.signing import PUBLIC, check_signature, key_folder

    signed = check_signature(folder, key_folder(params, root) / PUBLIC)  # signed by the project's agency key
    assert signed["key_id"] == manifest["signed_by"]["key_id"]
    g = manifest["guarantee"]
    assert g["kind"] == "none" and g["epsilon"] is None and g["delta"] is None  # no finite ε claimed
    assert (
        g["quantities"]["reference_accountant_epsilon"] > 0
        and "not an ε" in g["quantities"]["reference_accountant_note"]
    )
    from safetensors.torch import load_file

    assert not [k for k in load_file(str(folder / "model.safetensors")) if k.startswith("head.")]
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "dprelease sanitize" in card and "No finite ε is claimed" in card
    assert "without any privacy guarantee" in card  # what no guarantee covers: the trained NVIB weights


def test_sanitize_from_the_folder_alone(nvdp_run, tmp_path):
    params, root, _ = nvdp_run
    folder = tmp_path / "copy"
    shutil.copytree(root / params.nvdp.release_dir, folder)  # nothing else of the run is needed
    texts = ["Employee fell from a ladder and fractured his wrist.", "A worker's finger was amputated by a saw.", ""]
    df, meta = sanitize(folder, texts, seed=3)
    assert len(df) == 3 and len(df.representation[0]) == params.nvdp.dim
    again, _ = sanitize(folder, texts, seed=3)
    other, _ = sanitize(folder, texts, seed=4)
    assert again.representation[0] == df.representation[0] and other.representation[0] != df.representation[0]
    assert meta["epsilon"] is None and meta["delta"] is None and meta["guarantee"] == "none"
    assert (
        meta["reference_accountant_epsilon"]
        == json.loads((folder / "release.json").read_text())["guarantee"]["quantities"]["reference_accountant_epsilon"]
    )
    df.to_parquet(tmp_path / "out.parquet")
    assert len(pd.read_parquet(tmp_path / "out.parquet")) == 3
    assert len(sanitize(folder, [], seed=0)[0]) == 0


def test_sanitize_refuses_a_tampered_or_foreign_folder(nvdp_run, tmp_path):
    params, root, _ = nvdp_run
    folder = tmp_path / "t"
    shutil.copytree(root / params.nvdp.release_dir, folder)
    (folder / "model.json").write_text((folder / "model.json").read_text().replace('"heads": 2', '"heads": 1'))
    with pytest.raises(ReleaseError, match="sha256|hash|changed"):
        sanitize(folder, ["x"], seed=0)
    with pytest.raises(ReleaseError, match="not a release folder"):
        sanitize(tmp_path, ["x"], seed=0)
    (folder / "notes.txt").write_text("x")
    with pytest.raises(ReleaseError):
        sanitize(folder, ["x"], seed=0)


def test_dprelease_sanitize_cli_writes_one_draw_per_narrative(nvdp_run, tmp_path, capsys):
    from dprelease.cli import main
    from dprelease.core.release.sanitizer import read_metadata

    params, root, _ = nvdp_run
    folder = tmp_path / "release"
    shutil.copytree(root / params.nvdp.release_dir, folder)
    src = tmp_path / "narratives.csv"
    pd.DataFrame(
        {
            "Final Narrative": ["Employee fell from a ladder.", "Finger amputated by a saw."],
            "Employer": ["ACME", "Widgets"],
        }
    ).to_csv(src, index=False)
    from dprelease.core.release.signing import PUBLIC, key_folder

    key = str(key_folder(params, root) / PUBLIC)  # the agency's signature checked first
    assert (
        main(
            [
                "sanitize",
                "--release",
                str(folder),
                "--input",
                str(src),
                "--output",
                str(tmp_path / "z.parquet"),
                "--key",
                key,
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "with the nvdp release, no ε claimed ->" in captured.out and captured.err == ""
    table, meta = pd.read_parquet(tmp_path / "z.parquet"), read_metadata(tmp_path / "z.parquet")
    assert len(table) == 2 and "Employer" not in table.columns and len(table.representation[0]) == params.nvdp.dim
    assert meta["mechanism"] == "nvdp" and meta["guarantee"] == "none" and meta["epsilon"] is None
