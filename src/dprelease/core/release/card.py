"""What every release's model card (``README.md``) shares: the audit table, the replay audit's lines, the claim's
sentence and number formats. A card is generated from the release's own manifest (its guarantee record) and the
public aggregates in ``metrics/`` and ``reports/``; never hand-edited; what it cannot know yet it says so, with the
command that measures it. Each releasing mechanism writes its card with these (its ``ReleaseSpec.card``).

What it says of the guarantee comes from the record's kind (:func:`dprelease.core.privacy.guarantee.kind`: its
sentence, how its figure was measured, its conditions), declared by whoever makes the kind: a mechanism with a
new kind of claim renders here without an edit."""

from __future__ import annotations

import csv
from pathlib import Path

from dprelease.core.privacy.guarantee import kind

CARD = "README.md"


def fixed(v, digits: int = 3) -> str:
    """A number with ``digits`` decimals; None, NaN and empty CSV cells (an empty quartile) as "–"."""
    if isinstance(v, str):
        v = float(v) if v.strip() not in ("", "nan", "NaN") else None
    return "–" if v is None or v != v else f"{v:.{digits}f}"


def short(v) -> str:
    return "–" if v is None else f"{v:.3g}"


def audit_rows(path: Path, arm: str) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if r["arm"] == arm]


def _num(r: dict, k: str) -> str:
    return fixed(float(r[k])) if r.get(k) not in (None, "", "nan") else "–"


def _count(r: dict, k: str) -> str:
    """A count read back from audit.csv (a float column where other rows have none): 1000.0 → 1000."""
    v = r.get(k)
    return str(int(float(v))) if v not in (None, "", "nan") else "–"


def audit_lines(rows: list[dict], g: dict) -> list[str]:
    """The audit table of this arm and, first, its strongest valid lower bound next to its ε."""
    valid = [r for r in rows if "heuristic" not in r.get("method", "heuristic_l3") and r["epsilon_lower_bound"] != ""]
    out = []
    if valid:
        best = max(valid, key=lambda r: float(r["epsilon_lower_bound"]))
        conf = round(100 * float(best["confidence"]))
        claim = f"ε = {fixed(g['epsilon'])}" if g.get("epsilon") is not None else "no ε claimed"
        out += [
            f"**Strongest audit lower bound: ε_LB = {_num(best, 'epsilon_lower_bound')}** (this release: "
            f"{claim}) — {best['method']} on the {best['attack'].removeprefix('canary_')} canaries, "
            f"{_count(best, 'correct')} of {_count(best, 'guesses')} guesses right, {conf} % confidence each (the largest of "
            f"{len(valid)} bounds), against the canary run's own claim ε = {_num(best, 'claimed_epsilon')}; "
            f"the audit could certify at most {_num(best, 'ceiling')} (its ceiling). A bound far below ε says "
            "what these attacks achieve, not that the claim is tight or loose.",
            "",
        ]
    out += [
        "| attack | bound | AUC | TPR @ 1 % FPR | TPR @ 0.1 % FPR | ε lower bound | ceiling |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['attack']} | {r.get('method', '')} | {_num(r, 'auc')} | {_num(r, 'tpr_at_fpr_0.01')} | "
            f"{_num(r, 'tpr_at_fpr_0.001')} | {_num(r, 'epsilon_lower_bound')} | {_num(r, 'ceiling')} |"
        )
    return out + [
        "",
        "Members = training records, non-members = test records. Only the canary bounds are valid "
        "lower bounds; `heuristic_l3` figures come from one model (see `reports/privacy/report.md`).",
    ]


def replay_lines(replay: dict | None) -> list[str]:
    """The replay audit's two rows (docs/guarantees.md, L.5): can the standard adversary re-fit the sampler?"""
    if not replay:
        return ["Replay audit: not run (`make audit-replay`)."]
    out = [
        "**Replay audit** (the adversary re-runs the released round's fit on D and on D∖{x} for "
        f"{replay['views']['public']['targets']} records and scores this draw by the likelihood ratio of the two "
        "samplers):",
        "",
        "| view | re-fit reproduces the release | decisions right | verdict | covered |",
        "|---|---|---|---|---|",
    ]
    for view, v in replay["views"].items():
        out.append(
            f"| {view} | {'yes' if v['reproduces_release'] else 'no'} | {v['correct']} of {v['decisions']} | "
            f"{'convicted' if v['convicted'] else 'not convicted'} | "
            f"{'yes: the standard adversary' if view == 'public' else 'no: holds the secret key'} |"
        )
    return out


def guarantee_sentence(g: dict) -> str:
    """The card's one-sentence claim: its kind's (:attr:`dprelease.contracts.mechanism.Kind.sentence`)."""
    return kind(g["kind"]).sentence(g)
