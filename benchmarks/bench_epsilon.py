"""Benchmark of what the released ε means (issue 10): the release flow under several settings on the
bundled OSHA data (head backend), each in one scratch project that keeps the embeddings between runs.

Per setting it prints, per weighted round: ε (Δ̂ and how many draws), SWAG's temperature T̂ before and
after calibration, the re-weighting decision and refit count, the released round's ε with the GEV
interval of the tail quantile of M, and the 30-draw mean test F1 of the released round and of round 2
(the latter scored here from round 2's SWAG with the audit's seed, so the two are comparable). Then
the targets: released ε ≤ 1.15 × round 2's; released 30-draw weighted F1 ≥ round 2's − 0.005; T̂ after
calibration within [0.8, 1.25]; the warm wall time of each run (embeddings cached, every PPM stage
recomputed) ≤ 45 s.

    python benchmarks/bench_epsilon.py [--settings default,uncalibrated,oneshot] [--lr-sweep] [--cap N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_release import reset_to_embeddings, run_flow, scratch_project  # noqa: E402

SETTINGS = {
    "default": [],
    "uncalibrated": ["ppm.calibration=none"],
    "oneshot": ["ppm.calibration=none", "ppm.reweight_mode=oneshot"],  # the paper's procedure, uncalibrated SWAG
}
LR_SWEEP = {
    f"lr {lr} {cal}": [f"swag.head.lr={lr}", f"ppm.calibration={cal}", "ppm.reweight=false"]
    for lr in ("0.003", "0.01", "0.03")
    for cal in ("none", "scale")
}


def timed_flow(work: Path, sets: list[str]) -> float:
    """Wall seconds of one release flow with ``--set`` overrides (bench_release's runner)."""
    return run_flow(work, [x for s in sets for x in ("--set", s)])[0]


def round2_f1(work: Path, sets: list[str]) -> float:
    """30-draw mean weighted test F1 of round 2's SWAG, drawn with the audit stage's seed for round 2."""
    import yaml

    from dprelease.contracts.layout import Layout
    from dprelease.core.config import load_params
    from dprelease.core.data.splits import backend_for, features
    from dprelease.core.seeds import stage_seed
    from dprelease.mechanisms.swag_ppm.reweighting import mean_weighted_f1
    from dprelease.mechanisms.swag_ppm.swag import SwagMoments

    params = load_params(work / "params.yaml", {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in sets)})
    lay = Layout.from_params(params, work)
    backend = backend_for(params, lay)
    feats, y = features(lay, "test")
    moments = SwagMoments.load(lay.swag(2) / "moments.safetensors")
    return mean_weighted_f1(
        backend,
        backend.new_model(feats),
        moments,
        feats,
        y,
        draws=params.evaluation.draws,
        seed=stage_seed(params.seed, "audit", 2),
    )


def collect(work: Path, sets: list[str], wall: float) -> dict:
    m = lambda name: json.loads((work / "metrics" / f"{name}.json").read_text())  # noqa: E731
    rel, audit = m("release"), m("evaluation")
    row = {
        "wall_s": round(wall, 1),
        "released_round": rel["round"],
        "released_epsilon": rel["guarantee"]["epsilon"],
        "released_f1_30": audit["weighted_f1_mean"],
        "round2_f1_30": round2_f1(work, sets),
        "tail": rel["local_sensitivity_tail"],
        "rounds": {},
    }
    manifest = json.loads((work / "release" / "release.json").read_text())
    for r in sorted(int(k.split("_")[1]) for k in manifest["epsilon_by_round"]):  # the rounds this run fitted
        sens = m(f"sensitivity_r{r}")
        t = m(f"temperature_r{r}")
        row["rounds"][r] = {
            "epsilon": sens["epsilon"],
            "draws": sens["draws"],
            "T_uncalibrated": t["temperature_uncalibrated"]["subspace"],
            "T": t["temperature"]["subspace"],
            "T_min": t["temperature"]["subspace_min"],
            "T_max": t["temperature"]["subspace_max"],
            "calibration": t["calibration"],
        }
    rw = m("reweight")
    if 3 in row["rounds"] and "skipped" not in rw:
        row["reweight"] = {k: rw[k] for k in ("mode", "refits", "accepted", "reason")}
    return row


def report(name: str, row: dict) -> None:
    print(f"\n== {name}  (warm wall {row['wall_s']} s)")
    for r, d in row["rounds"].items():
        cmp = "≥" if d["draws"] < 500 else "="
        print(
            f"  round {r}: ε {cmp} {d['epsilon']:.3f} ({d['draws']} draws); T̂ {d['T_uncalibrated']:.3f} → "
            f"{d['T']:.3f} [{d['calibration']}], per-direction {d['T_min']:.3f}–{d['T_max']:.3f}"
        )
    if "reweight" in row:
        print(f"  re-weighting: {row['reweight']['refits']} refit(s); {row['reweight']['reason']}")
    t = row["tail"]
    eps2 = row["rounds"][2]["epsilon"]
    print(
        f"  released: round {row['released_round']}, ε = {row['released_epsilon']:.3f} "
        f"(ratio to round 2: {row['released_epsilon'] / eps2:.3f}); GEV q{t['level']:.4f} of M: "
        f"{t['estimate']:.3f} [{t['ci_low']:.3f}, {t['ci_high']:.3f}] → ε {2 * t['estimate']:.3f} "
        f"[{2 * t['ci_low']:.3f}, {2 * t['ci_high']:.3f}]"
    )
    print(
        f"  30-draw weighted F1 (test): released {row['released_f1_30']:.4f}, round 2 {row['round2_f1_30']:.4f} "
        f"(difference {row['released_f1_30'] - row['round2_f1_30']:+.4f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settings", default="default,uncalibrated,oneshot", help="comma-separated settings to run")
    ap.add_argument(
        "--lr-sweep",
        action="store_true",
        help="ε and T̂ at SWAG lr 0.003/0.01/0.03, with and without calibration (round 2 only)",
    )
    ap.add_argument("--cap", type=int, default=None, help="data.cap (1000000 = all 19,908 usable rows)")
    ap.add_argument("--keep", default=None, help="work in this folder and keep it (default: a temporary folder)")
    args = ap.parse_args()
    work = scratch_project(args.keep, "dprelease-bench-eps-")
    base = [f"data.cap={args.cap}"] if args.cap else []
    plan = {k: SETTINGS[k] for k in args.settings.split(",") if k} | (LR_SWEEP if args.lr_sweep else {})
    first = True
    rows = {}
    for name, sets in plan.items():
        if first:  # a cold run first, so every timed run below has the embeddings cached
            timed_flow(work, base + sets)
            first = False
        reset_to_embeddings(work)
        wall = timed_flow(work, base + sets)
        rows[name] = collect(work, base + sets, wall)
        report(name, rows[name])
    default = rows.get("default")
    if default:
        eps2 = default["rounds"][2]["epsilon"]
        print("\ntargets (default settings):")
        print(f"  released ε / round 2 ε = {default['released_epsilon'] / eps2:.3f}  (target ≤ 1.15)")
        print(
            f"  released − round 2 30-draw weighted F1 = {default['released_f1_30'] - default['round2_f1_30']:+.4f}"
            "  (target ≥ −0.005)"
        )
        print(
            "  T̂ after calibration: "
            + ", ".join(f"round {r} {d['T']:.3f}" for r, d in default["rounds"].items())
            + "  (target within [0.8, 1.25])"
        )
        print(f"  warm wall time {default['wall_s']} s  (target ≤ 45 s)")
    (work / "bench_epsilon.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    print(f"\nfigures: {work / 'bench_epsilon.json'}")


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    main()
