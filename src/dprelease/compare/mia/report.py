"""Stage ``privacy_report``: ``reports/privacy/`` — audit.csv (one row per arm, attack and bound), roc.png
(every arm, log–log), report.md (what the figures do and do not show).

audit.csv rows: per audited arm, the membership-inference attacks (``loss``, ``lira_offline``; their ε
figure is HEURISTIC, L.3) with TPR at FPR 1 % / 0.1 %, their counts, Clopper–Pearson interval and null
band; and per canary set (``canary_input``, ``canary_mislabelled``) both one-run bounds (``steinke``,
``fdp``) against the claim of the canary run, with confidence, guesses, right guesses, canaries, the
bound's ceiling, whether it convicts the claim and whether it is the bound the gate uses. The planted
bugs are rows of their own (arm ``planted:…``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dprelease.contracts import plugins
from dprelease.contracts.layout import Layout
from dprelease.core.config import Params
from dprelease.core.io import atomic_dir, read_json
from dprelease.core.plots import roc_plot

COUNTS = ["tp", "fp", "tpr_ci_low", "tpr_ci_high", "null_tpr_95"]
COLUMNS = (
    [
        "arm",
        "claimed_epsilon",
        "delta",
        "guarantee",
        "attack",
        "method",
        "epsilon_lower_bound",
        "confidence",
        "guesses",
        "correct",
        "canaries",
        "included",
        "ceiling",
        "convicted",
        "gate",
        "auc",
        "members",
        "non_members",
    ]
    + [f"{c}_{f}" for f in ("0.01", "0.001") for c in ["tpr_at_fpr", *COUNTS]]
    + ["runs", "tightness", "bound"]
)
TIGHT = "audit_tight.json"  # written by `make audit-tight` (benchmarks/audit_tight.py), merged when present
REPLAY = "audit_replay.json"  # written by the replay audit (stage audit_replay), merged when present
REPLAY_ARM = "replayed release"  # its rows' arm when an older file does not name it


def replay_rows(replay: dict) -> list[dict]:
    """The replay audit's two rows (docs/guarantees.md, L.5): the standard adversary's and the operator's, under the
    arm its file names."""
    rows = []
    for view, v in replay["views"].items():
        rows.append(
            {
                "arm": replay.get("arm", REPLAY_ARM),
                "claimed_epsilon": replay["claimed"],
                "delta": None,
                "guarantee": replay["guarantee"],
                "attack": "replay",
                "method": f"replay_{view}",
                "epsilon_lower_bound": v["epsilon_lower_bound"],
                "confidence": 1 - replay["alpha"],
                "guesses": v["decisions"],
                "correct": v["correct"],
                "members": v["targets"],
                "non_members": v["targets"],
                "convicted": v["convicted"],
                "gate": False,
                "bound": (
                    f"replay ({'exact re-fit: privacy loss ' + format(v['max_privacy_loss'], '.3g') if v['reproduces_release'] else 're-fit does not reproduce the release: decision counts, descriptive'}); "
                    + v["covers"]
                ),
            }
        )
    return rows


def _method_name(method: str, delta: float) -> str:
    if method == "steinke":
        return "steinke_delta" if delta > 0 else "steinke_pure"
    return "fdp_gaussian" if delta > 0 else "fdp_pure"


BOUND_TEXT = {
    "steinke_pure": "one-run canary bound (Steinke et al. 2023, δ = 0)",
    "steinke_delta": "one-run canary bound (Steinke et al. 2023, with the δ term)",
    "fdp_pure": "one-run f-DP bound (Mahloujifar et al. 2024, ε-DP curve)",
    "fdp_gaussian": "one-run f-DP bound (Mahloujifar et al. 2024, Gaussian reading of the (ε, δ) claim)",
}


def canary_rows(name: str, r: dict, alpha: float) -> list[dict]:
    rows = []
    delta = r["delta"] or 0.0
    for kind, d in r["audits"].items():
        for method in ("steinke", "fdp"):
            b = d[method]
            m = _method_name(method, delta)
            rows.append(
                {
                    "arm": name,
                    "claimed_epsilon": r["epsilon"],
                    "delta": r["delta"],
                    "guarantee": r["guarantee"],
                    "attack": f"canary_{kind}",
                    "method": m,
                    "epsilon_lower_bound": b["epsilon_lower_bound"],
                    "confidence": 1 - alpha,
                    "guesses": b["guesses"],
                    "correct": b["correct"],
                    "canaries": d["canaries"],
                    "included": d["included"],
                    "ceiling": b["ceiling"],
                    "convicted": r["epsilon"] is not None and b["epsilon_lower_bound"] > r["epsilon"],
                    "gate": method == d["gate"]["method"],
                    "bound": f"{BOUND_TEXT[m]}, {round(100 * (1 - alpha))} % confidence, claim of the canary run",
                }
            )
    return rows


def audit_table(mia: dict, canary: dict, tight: dict | None = None, replay: dict | None = None) -> pd.DataFrame:
    rows = []
    alpha = canary["alpha"]
    for arm in [a for a in plugins.arms() if a in mia["arms"]]:
        d = mia["arms"][arm]
        for attack in [k for k in ("loss", "lira_offline", "lira_online") if k in d["attacks"]]:
            r = d["attacks"][attack]
            rows.append(
                {
                    "arm": arm,
                    "claimed_epsilon": d["claimed_epsilon"],
                    "delta": d.get("delta"),
                    "guarantee": d["guarantee"],
                    "attack": attack,
                    "method": "heuristic_l3",
                    "epsilon_lower_bound": r["heuristic_epsilon"],
                    "auc": r["auc"],
                    "members": mia["members"],
                    "non_members": mia["non_members"],
                    "gate": False,
                    **{f"tpr_at_fpr_{f}": r[f"tpr_at_fpr_{f}"] for f in ("0.01", "0.001")},
                    **{f"{c}_{f}": r.get(f"{c}_{f}") for f in ("0.01", "0.001") for c in COUNTS},
                    "bound": "heuristic (L.3: one model, records are not independent trials): not a bound",
                }
            )
        if arm in canary["arms"]:
            rows += canary_rows(arm, canary["arms"][arm], alpha)
    for name, r in canary.get("planted", {}).items():
        rows += canary_rows(f"planted:{name}", r, alpha)
    extra = (tight or {}).get("rows", [])  # the multi-run audit's rows (their own columns: runs, tightness)
    gated = {r["arm"] for r in extra if r.get("gate")}  # an arm with a multi-run bound: the gate uses that one
    rows = [r | {"gate": False} if r["arm"] in gated else r for r in rows]
    return pd.DataFrame(rows + extra + (replay_rows(replay) if replay else []), columns=COLUMNS)


COUNT_COLUMNS = {
    "guesses",
    "correct",
    "canaries",
    "included",
    "runs",
    "members",
    "non_members",
    "tp_0.01",
    "fp_0.01",
    "tp_0.001",
    "fp_0.001",
}


def _fmt(v, col: str = "") -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    if col in COUNT_COLUMNS and isinstance(v, float) and v.is_integer():
        return f"{int(v):,}"  # a count (a float column only because other rows have none)
    if col == "delta" and isinstance(v, float):
        return f"{v:.3g}"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def privacy_report(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    mia = read_json(lay.metrics / "privacy_audit.json")
    canary = read_json(lay.metrics / "audit_canary.json")
    pool = read_json(lay.metrics / "audit_pool.json")
    tight = read_json(lay.metrics / TIGHT) if (lay.metrics / TIGHT).is_file() else None
    replay = read_json(lay.metrics / REPLAY) if (lay.metrics / REPLAY).is_file() else None
    table = audit_table(mia, canary, tight, replay)
    with atomic_dir(lay.reports / "privacy") as out:
        table.to_csv(out / "audit.csv", index=False)
        labels = {name: arm.label for name, arm in plugins.arms().items()}
        curves = {
            f"{labels[arm]} · {atk}": (mia["fpr_grid"], r["roc_tpr"])
            for arm, d in mia["arms"].items()
            for atk, r in d["attacks"].items()
        }
        roc_plot(curves, out / "roc.png", title="membership inference, members = train, non-members = test")
        (out / "report.md").write_text(_markdown(params, table, mia, canary, pool, tight), encoding="utf-8")
    return {"rows": len(table), "arms": list(mia["arms"])}


def _table(df: pd.DataFrame, cols: list[str]) -> list[str]:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return lines + ["| " + " | ".join(_fmt(r[c], c) for c in cols) + " |" for _, r in df.iterrows()]


def _tight_section(table: pd.DataFrame, tight: dict | None) -> list[str]:
    if not tight:
        return ["## Tight multi-run audit", "", "Not run here (`make audit-tight`, a benchmark).", ""]
    rows = table[table["method"].isin(["multirun_cp", "gdp_fit_heuristic"])]
    honest = [name for name in plugins.arms() if name in tight["arms"]]  # a declared arm's honest runs, else a bug's
    d = tight["arms"][honest[0]] if honest else next(iter(tight["arms"].values()))
    planted = sorted(a for a in table["arm"].unique() if str(a).startswith("planted:"))
    verdicts = [
        "; ".join(
            f"**{a}** convicted by "
            + (
                ", ".join(
                    f"{r['attack']} / {r['method']} (ε_LB {r['epsilon_lower_bound']:.3f} > {r['claimed_epsilon']:.3f})"
                    for _, r in table[(table["arm"] == a) & (table["convicted"] == True)].iterrows()  # noqa: E712 (a pandas column)
                )
                or "no audit"
            )
            for a in planted
        )
    ]
    return [
        "## Tight multi-run audit (`make audit-tight`)",
        "",
        "Many independent training runs, each with or without ONE canary (secret coin); a test fixed before the "
        "evaluated runs are seen; Clopper–Pearson bounds on its error rates over the runs (valid: the runs are "
        "independent trials). DP-SGD: the DP-SGD stage's q, T and σ (hence its accountant ε) on a subsample of "
        f"{d['records']} training embeddings, a gradient canary (Nasr et al. 2023) whose every privatised gradient "
        "the attacker sees. `tightness` = ε_LB / ε for honest DP-SGD (goal ≥ 0.5); `gdp_fit_heuristic` is a "
        "Gaussian fit with no confidence: not a bound."
        + (" (fast variant: planted bugs only)" if tight.get("fast") else ""),
        "",
        *_table(
            rows,
            [
                "arm",
                "attack",
                "method",
                "claimed_epsilon",
                "delta",
                "epsilon_lower_bound",
                "confidence",
                "runs",
                "guesses",
                "correct",
                "ceiling",
                "convicted",
                "tightness",
            ],
        ),
        "",
        *(["Planted bugs: " + verdicts[0] + ".", ""] if planted else []),
    ]


def _replay_section(table: pd.DataFrame) -> list[str]:
    rows = table[table["attack"] == "replay"]
    if rows.empty:
        return ["## Replay audit", "", "Not run here (`make audit-replay`).", ""]
    return [
        "## Replay audit: the standard adversary re-fits the release (docs/guarantees.md, L.5)",
        "",
        "The adversary re-runs the released round's fit on D and on D∖{x} for each target (public seed; the "
        "operator's row uses the key) and scores the released draw by the likelihood ratio of the two "
        "samplers. `guesses` = member + non-member decisions, `correct` = right ones.",
        "",
        *_table(
            rows,
            [
                "method",
                "claimed_epsilon",
                "guarantee",
                "members",
                "guesses",
                "correct",
                "epsilon_lower_bound",
                "convicted",
                "bound",
            ],
        ),
        "",
    ]


def _markdown(
    params: Params, table: pd.DataFrame, mia: dict, canary: dict, pool: dict, tight: dict | None = None
) -> str:
    a = params.privacy_audit
    conf = round(100 * (1 - canary["alpha"]))
    mi = table[table["method"] == "heuristic_l3"]
    can = table[table["method"].isin(["steinke_pure", "steinke_delta", "fdp_pure", "fdp_gaussian"])]
    sets = canary["canary_sets"]
    lines = [
        "# Privacy audit: what an attacker can do",
        "",
        "## Canary audits (valid one-run lower bounds)",
        "",
        "Each canary is included in one extra training run of every arm by a secret coin (probability ½); the "
        "attacker, holding the released weights, scores each canary and guesses. Canary sets: "
        + "; ".join(f"**{k}** {v['canaries']:,} ({v['included']:,} included)" for k, v in sets.items())
        + " — *input*: random unit embeddings with random labels (designed to be found: far from every real "
        "narrative, only memorisation fits them); *mislabelled*: unused narratives with a re-drawn label. "
        f"Guess counts tried: {canary['guess_grid']} (Bonferroni over the grid). Every bound holds at {conf} % "
        "confidence for the claim of the canary run (whose training data include the canaries, so its ε can "
        "differ from the release's). `ceiling` = the bound with every guess right: a claim above it cannot "
        "be convicted by this audit. `gate` marks the bound fixed in advance for the registry gate.",
        "",
        *_table(
            can,
            [
                "arm",
                "attack",
                "method",
                "claimed_epsilon",
                "delta",
                "epsilon_lower_bound",
                "guesses",
                "correct",
                "ceiling",
                "convicted",
                "gate",
            ],
        ),
        "",
        *_tight_section(table, tight),
        *_replay_section(table),
        "## Membership inference (members = train, non-members = test)",
        "",
        f"Members: the {mia['members']:,} training records; non-members: the {mia['non_members']:,} test records "
        "(same distribution). The attacker also has the public encoder and a population pool of "
        f"{pool['reference_pool_rows']:,} unused rows; it covers {pool['reference_pool_classes']} of "
        f"{pool['classes']} classes (data.cap = {params.data.cap} rows per class in the split, so rare classes "
        "are under-represented in the reference models). TPR at FPR with its counts (tp, fp), a two-sided "
        f"{conf} % Clopper–Pearson interval and the null band (`null_tpr_95`: what scores carrying no "
        "information reach 5 % of the time): a TPR inside the null band is chance.",
        "",
        *_table(
            mi,
            [
                "arm",
                "attack",
                "auc",
                "tpr_at_fpr_0.01",
                "tp_0.01",
                "fp_0.01",
                "tpr_ci_low_0.01",
                "tpr_ci_high_0.01",
                "null_tpr_95_0.01",
                "tpr_at_fpr_0.001",
                "tp_0.001",
                "fp_0.001",
                "null_tpr_95_0.001",
                "epsilon_lower_bound",
            ],
        ),
        "",
        "![ROC](roc.png)",
        "",
        "## How to read it",
        "",
        f"* **loss** (Yeom et al. 2018), **lira_offline** and **lira_online** (Carlini et al. 2022; {a.references} "
        f"OUT models on pool subsets, and {a.references} models on random halves of the targets, each target IN "
        "for half of them; all trained like the non-private arm): their `epsilon_lower_bound` is **heuristic** (docs/guarantees.md, "
        "L.3): one trained model, records are not independent trials — a descriptive figure, not a bound.",
        "* **steinke** is exact for a pure ε claim; with δ its term 2mδ grows with the canaries and leaves "
        "little power. **fdp** with a δ reads the claim as the Gaussian mechanism with that (ε, δ) (the curve "
        "DP-SGD's accounting rests on, approximately): a conviction there is evidence against that curve.",
        "* A lower bound far below the claimed ε does **not** show the claim is tight or loose: it shows what "
        "these attacks achieve. SWAG-PPM's ε is local and asymptotic (conditional on the posterior "
        "approximation); DP-SGD's is a worst-case accountant bound; equal numbers are not the same guarantee.",
        f"* A {conf} % bound exceeds the truth {100 - conf} % of the time: a gate on it has that false-alarm "
        "rate per bound (more when several bounds are checked).",
        "",
    ]
    return "\n".join(lines)
