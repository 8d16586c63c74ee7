"""A retrain's run folder and what it reports, without the orchestration (``flows/retrain.py`` runs the
stages and calls these).

Each snapshot gets ``runs/retrain/<snapshot id>/``: the project's params reading the snapshot and signing
with the project's agency key, and a randomness key derived from the project's (secret, reproducible by
the operator). After the stages: which arm was released (its audit arm), the one-line reports of the
registry outcome, and the headline table of the run's Markdown artifact.
"""

from __future__ import annotations

from pathlib import Path

from dprelease.core.config import Params, parse_params
from dprelease.core.headline import markdown, released_record
from dprelease.core.io import write_json
from dprelease.core.privacy import secret
from dprelease.core.release.signing import key_folder

RUNS = Path("runs") / "retrain"


def run_folder(top: Path, rel: Path) -> Path:
    """``runs/retrain/<snapshot id>`` under the project root, for the snapshot at ``rel``."""
    return top / RUNS / rel.name.split(".")[0]


def run_params(base: Params, rel: Path) -> Params:
    """The run folder's params: the project's, reading the snapshot and signing with the project's agency
    key (``../../../`` back to the root)."""
    up = Path("../../..")
    return parse_params(
        base.model_dump(mode="json"), {"data.path": str(up / rel), "signing_key": str(up / key_folder(base, "."))}
    )


def prepare_run(p: Params, top: Path, rel: Path) -> tuple[Path, Params]:
    """Make the snapshot's run folder and its randomness key; returns (folder, its params)."""
    where = run_folder(top, rel)
    where.mkdir(parents=True, exist_ok=True)
    rp = run_params(p, rel)
    # the run folder's randomness key, derived from the project's: secret, and reproducible by the operator
    # (re-derived each time: a rotated project key gives the run folder a new key, so a new release)
    secret.init(top / p.artifacts)
    secret.derive_child(top / p.artifacts, where / rp.artifacts, f"retrain/{where.name}")
    return where, rp


def released(where: str | Path) -> tuple[str, str | None]:
    """What the release stages released in ``where`` (the declared mechanism, with its own tags from the record:
    SWAG-PPM's round) and its arm in the privacy audit (None: no audit arm runs this mechanism as released)."""
    rec = released_record(Path(where) / "metrics")
    if rec is None:
        raise FileNotFoundError(f"{Path(where) / 'metrics' / 'released.json'}: the release stages published nothing")
    what = rec["mechanism"] + "".join(f" {k} {v}" for k, v in (rec.get("tags") or {}).items())
    return what, rec.get("arm")


def write_report(where: Path, out: dict) -> None:
    """``metrics/retrain.json``: the retrain's outcome (without the run folder's own path)."""
    write_json(where / "metrics" / "retrain.json", {k: v for k, v in out.items() if k != "run_folder"})


def registry_line(reg: dict, seconds: float) -> str:
    """The progress line of the registry step."""
    return (
        f"registry: version {reg['version']} → {reg['decision']}"
        + ("" if reg["promoted"] else f" ({reg['reason']})")
        + (f"; audit attached: {', '.join(reg['attached'])}" if reg.get("attached") else "")
        + f" ({seconds:.1f} s)"
    )


def result_line(out: dict) -> str:
    """The one line ``python -m flows.retrain`` prints per snapshot."""
    reg = out.get("registry", {})
    line = f"{out['snapshot']}: {out['seconds']:.1f} s"
    if reg:
        eps = (
            f"ε={reg['epsilon']:.3f}"
            if reg.get("epsilon") is not None
            else f"no ε ({reg.get('guarantee') or 'no claim'})"
        )
        line += (
            f"; version {reg['version']} {eps} cumulative ε={reg['cumulative_epsilon']:.3f} "
            f"utility={reg['utility']:.4f} → {reg['decision']}" + ("" if reg["promoted"] else f" ({reg['reason']})")
        )
    return line


def summary_markdown(out: dict) -> str:
    """The run's Markdown artifact: headline figures, the registered version and the gate decision."""
    reg = out.get("registry")
    extra = {"snapshot": out["snapshot"], "seconds": out["seconds"]}
    if reg:
        extra |= {
            "registered version": reg["version"],
            "cumulative ε (basic composition)": f"{reg['cumulative_epsilon']:.4g}",
            "gate decision": reg["decision"],
            "gate detail": reg["reason"] or "—",
            "production version": reg["production"] or "none",
        }
        if reg.get("attached"):
            extra["audit attached to the version"] = ", ".join(reg["attached"])
    else:
        extra["gate decision"] = "not registered (--no-track)"
    figures = reg["figures"] if reg else out["figures"]
    return markdown(figures, f"retrain {out['snapshot'].split('.')[0]}", extra)
