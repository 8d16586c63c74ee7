"""``reports/gpp``: the table of every audited GPP fit (``table.csv``), the S003 table analogues with the
communication figures and the honest-claims paragraph (``report.md``), and the β trade-off figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dprelease.core.config import Params
from dprelease.core.io import atomic_dir, atomic_path, read_json
from dprelease.mechanisms.gpp import section

COLUMNS = [
    "dataset",
    "experiment",
    "method",
    "setting",
    "clients",
    "beta",
    "d_z",
    "k",
    "epochs",
    "utility_auc",
    "utility_accuracy",
    "adversary_auc",
    "adversary_accuracy",
    "adversary_majority",
    "noise",
    "betas",
    "train_s",
]
NAMES = {
    "raw": "Raw input (reference)",
    "noprivacy": "No-Privacy",
    "random_projection": "Random Projection",
    "noisy": "Noisy Encoder",
    "gpp": "GPP",
}
HONEST = (
    "**What is and is not claimed.** GPP gives **no differential-privacy ε**. Its guarantee is empirical: a fresh "
    "probe (MLP 256-128) trained on sanitized training representations and evaluated on sanitized test "
    "representations, whose adversary AUC is reported above (0.5 = chance). A stronger or differently built "
    "attacker may extract more. S003's mutual-information statement (Prop. 2: leakage ≤ I(Z;S) + I(U;S|Z)) holds "
    "only under its assumptions (independent clients, an honest-but-curious aggregator, (z, u)-only messages, "
    "and a training adversary as good as any attacker); it is not a worst-case bound. On digits S = parity of U "
    "is a function of U (docs/algorithms.md, G.4): whoever learns U learns S, and a low adversary AUC next to a high "
    "utility AUC is possible only because Z blurs adjacent sums, which the utility *accuracy* column shows."
)


def rows_of(root: Path) -> pd.DataFrame:
    rows = []
    for name in ("gpp_digits", "gpp_osha"):
        path = root / "metrics" / f"{name}.json"
        if path.is_file():
            rows += read_json(path).get("rows", [])
    frame = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in frame.columns:
            frame[c] = None
    return frame[COLUMNS]


def _md(frame: pd.DataFrame, cols: list[str]) -> str:
    def cell(v) -> str:
        if v is None or (isinstance(v, float) and pd.isna(v)):
            return "–"
        if isinstance(v, float):
            return f"{v:g}" if v.is_integer() else f"{v:.3f}"
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in frame[cols].itertuples(index=False)]
    return "\n".join(lines)


def _headline(part: pd.DataFrame) -> list[str]:
    """GPP against No-Privacy (and against the raw input), centralized, in differences."""
    base = part[(part["experiment"] == "baseline") & (part["setting"] == "centralized")].set_index("method")
    if not {"gpp", "noprivacy"} <= set(base.index):
        return []
    g = base.loc["gpp"]
    lines = []
    for ref, name in (("noprivacy", "No-Privacy"), ("raw", "the raw input")):
        if ref in base.index:
            r = base.loc[ref]
            lines.append(
                f"GPP vs {name}: adversary AUC {g['adversary_auc'] - r['adversary_auc']:+.3f}, utility AUC "
                f"{g['utility_auc'] - r['utility_auc']:+.3f}, utility accuracy "
                f"{g['utility_accuracy'] - r['utility_accuracy']:+.3f}."
            )
    return [" ".join(lines)]


def beta_figure(frame: pd.DataFrame, path: Path) -> None:
    """Utility AUC and adversary AUC against β (log scale), one panel per dataset."""
    sweep = frame[frame["experiment"] == "sweep_beta"]
    datasets = list(dict.fromkeys(sweep["dataset"])) or ["(none)"]
    fig = Figure(figsize=(5 * len(datasets), 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    for i, ds in enumerate(datasets):
        ax = fig.add_subplot(1, len(datasets), i + 1)
        part = sweep[sweep["dataset"] == ds].sort_values("beta")
        ax.plot(part["beta"], part["utility_auc"], "o-", label="utility AUC")
        ax.plot(part["beta"], part["utility_accuracy"], "s--", label="utility accuracy")
        ax.plot(part["beta"], part["adversary_auc"], "^-", label="adversary AUC")
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("β")
        ax.set_title(f"{ds}: privacy-utility trade-off")
        ax.legend(fontsize=8)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)


def _comm(root: Path) -> list[str]:
    lines = [
        "| dataset | setting | clients | rounds | uplink B/round | downlink B/round | FedAvg B/round "
        "(up+down) | engine overhead s | training s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("gpp_digits", "gpp_osha"):
        path = root / "metrics" / f"{name}.json"
        comm = read_json(path).get("communication", {}) if path.is_file() else {}
        for setting, c in comm.items():
            if "skipped" in c if isinstance(c, dict) else True:
                continue
            lines.append(
                f"| {name[4:]} | {setting} | {c['clients']} | {c['rounds']} | {c['bytes_up_per_round']:,} | "
                f"{c['bytes_down_per_round']:,} | {c['fedavg_bytes_per_round']:,} | {c['engine_overhead_s']} | "
                f"{c['train_s']} |"
            )
        if "skipped" in comm:
            lines.append(f"| {name[4:]} | not run: {comm['skipped']} | | | | | | | |")
    return lines


def write_report(params: Params, root: str | Path = ".") -> dict:
    root = Path(root)
    frame = rows_of(root)
    main = [
        "dataset",
        "method",
        "setting",
        "clients",
        "beta",
        "d_z",
        "utility_auc",
        "utility_accuracy",
        "adversary_auc",
    ]
    parts = [
        "# Gaussian Privacy Protector (S003): sanitized representations",
        "",
        "Every figure comes from the G.3 audit: a fresh probe trained on sanitized training representations, "
        "evaluated on sanitized test representations (one draw each). Digits: `load_digits` composites, "
        "U = sum (19 classes), S = parity. OSHA: MiniLM embeddings of the narratives, U = Nature code, "
        "S = industry sector (NAICS 2-digit); clients = federal OSHA regions.",
        "",
    ]
    for ds in dict.fromkeys(frame["dataset"]):
        part = frame[frame["dataset"] == ds]
        base = part[part["experiment"] == "baseline"].copy()
        base["method"] = base["method"].map(NAMES)
        parts += [
            f"## {ds}: baselines (S003 Table: baseline comparison)",
            "",
            _md(base, main),
            "",
            *_headline(part),
            "",
        ]
        dist = part[
            (part["setting"] != "centralized") | ((part["method"] == "gpp") & (part["experiment"] == "baseline"))
        ]
        if (dist["setting"] != "centralized").any():
            parts += [
                f"## {ds}: centralized vs distributed (Flower) (S003 Table X)",
                "",
                _md(dist, main + ["betas"]),
                "",
            ]
        for sweep in ("beta", "d_z", "k"):
            sw = part[part["experiment"] == f"sweep_{sweep}"]
            if len(sw):
                parts += [
                    f"## {ds}: {sweep} sweep (GPP, {int(sw['epochs'].iloc[0])} epochs)",
                    "",
                    _md(sw, ["beta", "d_z", "k", "utility_auc", "utility_accuracy", "adversary_auc"]),
                    "",
                ]
    parts += [
        "## Communication per round (S003 §V-F)",
        "",
        *_comm(root),
        "",
        "Uplink carries only (z, u) per client batch; downlink the utility head's weights. FedAvg moves the "
        "encoder's weights up and down each round. Engine overhead (Flower start-up and messaging) is "
        "measured apart from the clients' and aggregator's compute.",
        "",
        "![β trade-off](beta_tradeoff.png)",
        "",
        HONEST,
        "",
    ]
    with atomic_dir(root / "reports" / "gpp") as tmp:
        frame.to_csv(tmp / "table.csv", index=False)
        (tmp / "report.md").write_text("\n".join(parts), encoding="utf-8")
        section.write(tmp)  # its section of docs/results.md (params.RESULTS_SECTION)
        beta_figure(frame, tmp / "beta_tradeoff.png")
    return {"rows": len(frame)}
