"""How far the knobs that are not the data move SWAG-PPM's ε: round 2 released over a grid.

For every cell (SWAG learning rate {0.003, 0.01, 0.03} × prior precision {0.1, 1, 10} × the configured λ,
the default cell over 3 training seeds, and SWAG rank 10 and 10 SWAG epochs one at a time around the
defaults — 10 epochs with rank 10, as SWAG keeps one snapshot per epoch; ``--grid-seeds 3`` repeats every
lr × λ cell over seeds) the round-2 release is fitted from the project's prepared
split and features (``make run`` first: ``stratify`` and ``featurize`` are reused, never re-run, so every
cell sees the same records) in a scratch root holding a copy of the project's randomness key, with
``ppm.reweight: false`` (the release is round 2). Each cell records T̂ and T_min before and after the
configured calibration, Δ̂, the released ε (calibrated), the ε the SAME SWAG would carry uncalibrated
(2Δ̂ / min(1, T_min) of SWAG as fitted, the ``swag_ppm_uncalibrated`` arm) and the 30-draw weighted and
macro F1 on the test split.

Writes ``reports/epsilon_sensitivity/table.csv`` and ``epsilon.png`` and prints the spread of ε over the
lr × λ grid (each cell the median over seeds) and the best cell's utility. The table holds statistics of
models that are never released (ε and F1 of every cell, from the confidential records): it is written
owner-only (0600 in a 0700 folder) for the agency's own review and belongs in no partner-facing folder.

    python benchmarks/epsilon_sensitivity.py [--root .] [--seeds 3] [--grid-seeds 1] [--quick] [--resume]

1–2 min per cell on 2 cores (13 cells: ~20 min); ``--quick`` runs the four lr × λ corners with one seed.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dprelease.core.config import parse_params  # noqa: E402
from dprelease.core.io import read_json  # noqa: E402
from dprelease.pipeline.registry import run_stage  # noqa: E402

LRS = (0.003, 0.01, 0.03)
PRIOR_FACTORS = (0.1, 1.0, 10.0)  # × the configured λ (the objective's λ/(2N)·|θ|²)
STAGES = (
    "finetune_r1",
    "swag_r1",
    "risk",
    "finetune_r2",
    "swag_r2",
    "sensitivity_r2",
    "draw",
    "evaluate",
    "swag_ppm_uncalibrated",
)
COLUMNS = (
    "swag_lr",
    "prior_precision",
    "rank",
    "swag_epochs",
    "seed",
    "calibration",
    "temperature_raw",
    "temperature_min_raw",
    "temperature",
    "temperature_min",
    "local_sensitivity",
    "epsilon",
    "epsilon_uncalibrated",
    "weighted_f1_mean",
    "macro_f1_mean",
    "seconds",
)


def cells(base: dict, *, seeds: int, grid_seeds: int, quick: bool) -> list[dict]:
    """lr × λ (× ``grid_seeds``), the default cell × ``seeds``, and rank 10 and 10 SWAG epochs at the default."""
    swag, lam = base["model"]["head"]["swag"], base["ppm"]["prior_precision"]
    default = {"swag_lr": swag["lr"], "prior_precision": lam, "rank": swag["rank"], "swag_epochs": swag["epochs"]}
    lrs, factors = ((LRS[0], LRS[-1]), (PRIOR_FACTORS[0], PRIOR_FACTORS[-1])) if quick else (LRS, PRIOR_FACTORS)
    out = [
        default | {"swag_lr": lr, "prior_precision": lam * f, "seed": s}
        for lr, f, s in itertools.product(lrs, factors, range(grid_seeds))
    ]
    if not quick:
        out += [default | {"seed": s} for s in range(seeds)]
        # SWAG keeps one snapshot per epoch, so 10 epochs allow rank ≤ 10: that cell pairs with rank 10
        out += [default | {"rank": 10, "seed": 0}, default | {"rank": 10, "swag_epochs": 10, "seed": 0}]
    unique = []
    for c in out:
        if c not in unique:
            unique.append(c)
    return unique


def run_cell(cell: dict, base: dict, root: Path, scratch: Path) -> dict:
    raw = yaml.safe_load(yaml.safe_dump(base))
    raw["seed"] = base.get("seed", 0) * 1000 + cell["seed"]  # training randomness only: the split is copied
    swag = raw["model"][raw["model"].get("backend", "head")]["swag"]
    swag.update(lr=cell["swag_lr"], rank=cell["rank"], epochs=cell["swag_epochs"])
    raw["ppm"].update(prior_precision=cell["prior_precision"], reweight=False)
    params = parse_params(raw)
    if scratch.exists():
        shutil.rmtree(scratch)
    art = scratch / params.artifacts
    art.mkdir(parents=True, mode=0o700)
    for name in ("data", "features", "secret"):
        shutil.copytree(root / params.artifacts / name, art / name)
    (scratch / "metrics").mkdir()
    shutil.copyfile(root / "metrics/data.json", scratch / "metrics/data.json")
    start = time.perf_counter()
    for stage in STAGES:
        run_stage(stage, params, scratch)
    t = read_json(scratch / "metrics/temperature_r2.json")
    g = read_json(scratch / "metrics/swag_ppm_draw.json")["guarantee"]
    unc = read_json(scratch / "metrics/swag_ppm_uncalibrated.json")["guarantee"]
    audit = read_json(scratch / "metrics/evaluation.json")
    return cell | {
        "calibration": params.ppm.calibration,
        "temperature_raw": t["temperature_uncalibrated"]["subspace"],
        "temperature_min_raw": t["temperature_uncalibrated"]["subspace_min"],
        "temperature": t["temperature"]["subspace"],
        "temperature_min": t["temperature"]["subspace_min"],
        # a cell released without an ε (kind ppm_uncertified, docs/guarantees.md K.9) is recorded as nan, never its index
        "local_sensitivity": g["quantities"]["local_sensitivity"],
        "epsilon": _eps(g),
        "epsilon_uncalibrated": _eps(unc),
        "weighted_f1_mean": audit["weighted_f1_mean"],
        "macro_f1_mean": audit["macro_f1_mean"],
        "seconds": time.perf_counter() - start,
    }


def _eps(g: dict) -> float:
    return float("nan") if g["epsilon"] is None else g["epsilon"]


def read_table(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for k in COLUMNS:
            if k == "calibration":
                continue
            r[k] = int(r[k]) if k in ("rank", "swag_epochs", "seed") else float(r[k])
    return rows


def write_table(path: Path, rows: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def summarise(rows: list[dict], *, lam: float) -> list[str]:
    """The spread of ε over the lr × λ grid, around the configured λ ``lam``, and the best cells' utility."""
    grid = {}
    for r in rows:
        if (r["rank"], r["swag_epochs"]) == (rows[0]["rank"], rows[0]["swag_epochs"]):
            grid.setdefault((r["swag_lr"], r["prior_precision"]), []).append(r)
    med = {
        k: {c: statistics.median(x[c] for x in v) for c in ("epsilon", "epsilon_uncalibrated", "weighted_f1_mean")}
        for k, v in grid.items()
    }
    best = max(med.values(), key=lambda m: m["weighted_f1_mean"])["weighted_f1_mean"]
    near = [m for m in med.values() if m["weighted_f1_mean"] >= best - 0.01]
    lines = []
    for key in ("epsilon", "epsilon_uncalibrated"):
        vals = [m[key] for m in med.values()]
        lines.append(
            f"{key}: lr × λ grid (median over seeds) min {min(vals):.3f} max {max(vals):.3f} "
            f"max/min {max(vals) / min(vals):.2f}; all cells {min(r[key] for r in rows):.3f}–"
            f"{max(r[key] for r in rows):.3f}"
        )
    around = [r["epsilon"] for r in rows if r["prior_precision"] == lam]
    lines.append(
        f"epsilon around the settings (λ = {lam:g}: every lr, seed, rank and epochs cell): "
        f"{min(around):.3f}–{max(around):.3f}, max/min {max(around) / min(around):.2f}; largest {max(around):.3f}"
    )
    eps_near = [m["epsilon"] for m in near]
    lines.append(
        f"best 30-draw weighted F1 {best:.3f}; {len(near)} of {len(med)} lr × λ cells within 0.01 of it, "
        f"their ε max/min {max(eps_near) / min(eps_near):.2f}"
    )
    return lines


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for lam in sorted({r["prior_precision"] for r in rows}):
        for ax, key in zip(axes, ("epsilon", "epsilon_uncalibrated")):
            pts = sorted(
                (r["swag_lr"], r[key])
                for r in rows
                if r["prior_precision"] == lam
                and (r["rank"], r["swag_epochs"]) == (rows[0]["rank"], rows[0]["swag_epochs"])
            )
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"λ = {lam:g}")
    for ax, title in zip(axes, ("released ε (calibrated)", "ε of SWAG as fitted (2Δ̂ / min(1, T_min))")):
        ax.set(xscale="log", yscale="log", xlabel="SWAG learning rate", ylabel="ε", title=title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=REPO, help="the project root (after make run)")
    ap.add_argument("--seeds", type=int, default=3, help="training seeds of the default cell")
    ap.add_argument("--grid-seeds", type=int, default=1, help="training seeds of every lr × λ cell")
    ap.add_argument("--quick", action="store_true", help="the lr × λ corners, one seed")
    ap.add_argument("--resume", action="store_true", help="reuse the cells of an interrupted run (table.partial)")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    base = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    if not (root / base.get("artifacts", "artifacts") / "features").is_dir():
        print("epsilon_sensitivity: run `make run` first (prepared split and features needed)", file=sys.stderr)
        return 2
    out = root / "reports/epsilon_sensitivity"
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(out, 0o700)
    rows, table = [], out / "table.csv"
    partial = table.with_suffix(".partial")
    done = read_table(partial) if args.resume and partial.is_file() else []
    with tempfile.TemporaryDirectory(prefix="eps-grid-") as tmp:
        for i, cell in enumerate(cells(base, seeds=args.seeds, grid_seeds=args.grid_seeds, quick=args.quick)):
            again = [r for r in done if {k: r[k] for k in cell} == cell]
            rows.append(again[0] if again else run_cell(cell, base, root, Path(tmp) / "cell"))
            print(
                f"[{i + 1}] "
                + ", ".join(
                    f"{k}={rows[-1][k]:.4g}" if isinstance(rows[-1][k], float) else f"{k}={rows[-1][k]}"
                    for k in COLUMNS
                ),
                flush=True,
            )
            write_table(partial, rows)  # a crash keeps the cells measured so far (--resume reuses them)
    write_table(table, rows)
    partial.unlink()
    plot(rows, out / "epsilon.png")
    os.chmod(out / "epsilon.png", 0o600)
    for line in summarise(rows, lam=base["ppm"]["prior_precision"]):
        print(line)
    print(f"wrote {table.relative_to(root)} and epsilon.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
