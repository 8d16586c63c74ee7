"""Three simulated retrains on growing EventDate windows of the tiny slice: DVC-versioned snapshots,
registered versions with their figures as tags, the privacy ledger, a production alias that moves only
through the gates (one refusal forced by the ε budget), an unchanged retrain that registers nothing but
attaches the audit it ran to the version, and the registered model coding narratives through
``mlflow.pyfunc`` (the extract's own column accepted, bad input a one-line 400-class error)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from conftest import GATED, SMALL_AUDIT, make_root, slice_raw

pytestmark = pytest.mark.slow

WINDOWS = ["2016-04-30", "2016-08-31", "2016-12-31"]  # each window holds a private period after proxy.until


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    import flows.retrain as fr

    root = make_root(tmp_path_factory.mktemp("retrain"))
    raw = slice_raw(
        **GATED,
        privacy_audit=SMALL_AUDIT,  # the unchanged retrain's audit: its figures attached
        service={"windows": WINDOWS, "audit": False, "gates": {"epsilon_budget": 50.0, "utility_tolerance": 1.0}},
    )
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        rc = fr.main(["--root", str(root), "--simulate"])
        windows = sorted((root / "runs" / "windows").glob("*.csv.gz"))
        # a fourth extract refused by the ε budget: production must stay where it was
        extra = root / "runs" / "extra.csv.gz"
        pd.read_csv(windows[0], dtype=str).iloc[::2].to_csv(extra, index=False)
        rc_refused = fr.main(["--root", str(root), str(extra), "--set", "service.gates.epsilon_budget=0.01"])
        # unchanged: nothing new registered, but the audit it runs now is attached to version 1
        rc_again = fr.main(["--root", str(root), str(windows[0]), "--set", "service.audit=true"])
        # production's own snapshot, code and params once more: ends at once, nothing run or registered
        rc_same = fr.main(["--root", str(root), str(windows[2])])
    return SimpleNamespace(root=root, rcs=(rc, rc_refused, rc_again, rc_same), windows=windows)


def _client(root):
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    return mlflow, mlflow.MlflowClient()


def test_snapshots_are_versioned_with_dvc(simulated):
    assert simulated.rcs == (0, 0, 0, 0)
    snaps = sorted((simulated.root / "data" / "snapshots").glob("*.csv.gz"))
    assert len(snaps) == 4 and all(s.with_name(s.name + ".dvc").is_file() for s in snaps)
    assert [len(pd.read_csv(w)) for w in simulated.windows] == sorted(len(pd.read_csv(w)) for w in simulated.windows)
    assert len({len(pd.read_csv(w)) for w in simulated.windows}) == 3  # windows grow
    assert (simulated.root / ".dvc").is_dir()


def test_versions_tags_and_gates(simulated):
    _, client = _client(simulated.root)
    versions = sorted(client.search_model_versions("name = 'oiics-autocoder'"), key=lambda v: int(v.version))
    assert [str(v.version) for v in versions] == ["1", "2", "3", "4"]  # the unchanged retrain added none
    for v in versions:
        for key in (
            "epsilon",
            "guarantee",
            "cumulative_epsilon",
            "weighted_f1",
            "macro_f1",
            "weighted_f1_mean",
            "records",
            "release.digest",
            "snapshot",
            "gate.decision",
            "gate.reason",
            "snapshot_id",
            "code_hash",
            "params_hash",
            "audited",
            "source",
        ):  # what it was made from
            assert key in v.tags, (v.version, key)
        assert v.tags["source"] == "retrain"
        run = client.get_run(v.tags["run_id"])
        for key in ("epsilon", "weighted_f1", "macro_f1", "records"):  # one name, same figure
            assert float(v.tags[key]) == pytest.approx(run.data.metrics[key])
    assert [v.tags["gate.decision"] for v in versions[:3]] == ["promoted"] * 3
    from dprelease.core.release.signing import load_signer

    agency = load_signer(simulated.root / "artifacts" / "keys")  # every retrain signs with the project's one key
    assert {(v.tags["release.signer"], v.tags["release.key_id"]) for v in versions} == {(agency.name, agency.key_id)}
    assert not list((simulated.root / "runs").rglob("agency.key"))  # no run folder made a key of its own
    refused = versions[3]
    assert refused.tags["gate.decision"] == "refused" and refused.tags["gate.failed"] == "epsilon"
    assert "ε" in refused.tags["gate.reason"] and "budget 0.01" in refused.tags["gate.reason"]
    assert (
        refused.description.startswith("refused by epsilon")
        and "| weighted F1 (released model) |" in refused.description
    )
    aliases = {
        a: str(client.get_model_version_by_alias("oiics-autocoder", a).version)
        for a in ("production", "candidate", "refused")
    }
    assert aliases == {"production": "3", "candidate": "4", "refused": "4"}


def test_a_retrain_of_productions_own_inputs_ends_at_once(simulated, capsys):
    """The fixture's last retrain: windows[2] is production's (version 3) snapshot, with its code and params."""
    import flows.retrain as fr

    _, client = _client(simulated.root)
    prod = client.get_model_version_by_alias("oiics-autocoder", "production")
    assert str(prod.version) == "3" and prod.tags["audited"] == "false"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        assert fr.main(["--root", str(simulated.root), str(simulated.windows[2])]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "; version 3 ε=" in line and line.endswith("→ unchanged, already promoted"), line
    assert float(line.split(": ", 1)[1].split(" s")[0]) < 15, line
    assert len(client.search_model_versions("name = 'oiics-autocoder'")) == 4


def test_unchanged_retrain_attaches_its_audit(simulated):
    _, client = _client(simulated.root)
    versions = {str(v.version): v for v in client.search_model_versions("name = 'oiics-autocoder'")}
    assert "epsilon_lb" in versions["1"].tags and "audit_loss_auc" in versions["1"].tags  # the audit of the 4th call
    assert not any("epsilon_lb" in versions[v].tags for v in ("2", "3", "4"))  # those ran no audit
    run = client.get_run(versions["1"].tags["run_id"])
    assert run.data.metrics["epsilon_lb"] == pytest.approx(float(versions["1"].tags["epsilon_lb"]))
    again = sorted((simulated.root / "runs" / "retrain").glob("*/metrics/retrain.json"))
    reports = [__import__("json").loads(p.read_text()) for p in again]
    unchanged = [r for r in reports if r["registry"]["decision"].startswith("unchanged")]
    assert len(unchanged) == 1 and unchanged[0]["registry"]["attached"] == ["audit_loss_auc", "epsilon_lb"]


def test_ledger_composes_published_versions(simulated):
    from dprelease.pipeline.service.ledger import Ledger

    _, client = _client(simulated.root)
    led = Ledger(simulated.root / "artifacts" / "ledger")
    eps = {e.version: e.epsilon for e in led.entries}
    assert [e.published for e in led.entries] == [True, True, True, False]
    for e in led.entries:
        tag = float(client.get_model_version("oiics-autocoder", e.version).tags["cumulative_epsilon"])
        assert e.epsilon <= tag <= sum(eps[u] for u in eps if u <= e.version or u == e.version) + 1e-9
    # the ledger stays private: nothing of it in MLflow's artifacts or the release folders
    leaked = [p for p in (simulated.root / "mlartifacts").rglob("*") if p.name in ("salt.bin", "ledger.json")]
    assert not leaked and not list((simulated.root / "mlartifacts").rglob("v1.npy"))


def test_production_model_codes_narratives(simulated):
    mlflow, _ = _client(simulated.root)
    model = mlflow.pyfunc.load_model("models:/oiics-autocoder@production")
    out = model.predict(
        pd.DataFrame(
            {
                "narrative": [
                    "An employee fell from a ladder and fractured a wrist.",
                    "A worker's finger was amputated by a press.",
                ]
            }
        )
    )
    assert list(out.columns) == ["code", "title", "probability"] and len(out) == 2
    assert out["probability"].between(0, 1).all()
    # the extract's own narrative column passes the signature, with the extract's other columns beside it
    own = model.predict(
        pd.DataFrame(
            {
                "ID": ["1", "2"],
                "Final Narrative": [
                    "An employee fell from a ladder and fractured a wrist.",
                    "A worker's finger was amputated by a press.",
                ],
            }
        )
    )
    assert own.equals(out)


def test_bad_input_is_a_one_line_invalid_parameter_error(simulated):
    from mlflow.exceptions import MlflowException

    mlflow, _ = _client(simulated.root)
    model = mlflow.pyfunc.load_model("models:/oiics-autocoder@production")
    for frame, why in (
        (pd.DataFrame({"narrative": ["fell", "  "]}), r"empty narrative in row\(s\) 2"),
        (pd.DataFrame({"a": ["x"], "b": ["y"]}), "no narrative column"),
    ):
        with pytest.raises(MlflowException, match=why) as err:
            model.predict(frame)
        assert err.value.get_http_status_code() == 400 and "\n" not in err.value.message


def test_model_requirements_example_and_signature(simulated):
    import json

    from mlflow.models import Model

    mlflow, _ = _client(simulated.root)
    path = Path(mlflow.artifacts.download_artifacts("models:/oiics-autocoder@production"))
    reqs = (path / "requirements.txt").read_text().split()
    assert "torch==2.13.0" in reqs and not any("+" in r for r in reqs)  # installable from the index
    example = json.loads((path / "serving_input_example.json").read_text())
    assert example["dataframe_split"]["columns"] == ["narrative"]
    inputs = Model.load(path).get_input_schema()
    assert {c.name: c.required for c in inputs.inputs} == {"narrative": False, "Final Narrative": False, "text": False}


def test_ledger_report_prints_aggregates_only(simulated, capsys):
    import flows.retrain as fr

    assert fr.main(["--root", str(simulated.root), "--ledger"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [r.split("|")[1].strip() for r in rows] == ["1", "2", "3", "4"]
    assert [r.split("|")[4].strip() for r in rows] == ["yes", "yes", "yes", "no"]
    assert "narrative" not in out.lower() and "salt" not in out.lower()
