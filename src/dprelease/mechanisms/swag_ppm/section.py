"""SWAG-PPM's section of ``docs/results.md`` (``reports/release/section.md``, declared by
``params.RESULTS_SECTION``): its chain's draw, measured beside the declared release in ``make run`` — the draw's
guarantee record, its evaluation, the re-weighting and private selection. Written by stage ``evaluate`` at its
end; aggregates only."""

from __future__ import annotations

from pathlib import Path

from dprelease.core.markdown import LINK, g4, missing, num, read_json, sci, table
from dprelease.mechanisms.swag_ppm.params import RESULTS_SECTION

SOURCES = ("swag_ppm_draw.json", "evaluation.json", "reweight.json")  # in the metrics folder


def _claim_rows(g: dict) -> list[list[str]]:
    """The ε rows: none claimed for an uncertified draw (its index is never in the ε row: docs/guarantees.md, K.9)."""
    q = g.get("quantities", {})
    if g["kind"] == "ppm_uncertified":
        return [
            ["ε (its draw's claim)", "**none claimed**", f"kind `{g['kind']}`, see {LINK}"],
            [
                "index 2Δ (NOT an ε)",
                num(q.get("uncertified_index")),
                f"certified in {q.get('certified_directions')} of {q.get('parameters')} directions; point "
                f"{num(q.get('uncertified_index_point'))}",
            ],
        ]
    return [
        [
            "ε (its draw's claim)",
            f"**{g4(g['epsilon'])}**",
            f"kind `{g['kind']}`, see {LINK}; Δ: {q.get('claim_basis', 'the measured Δ̂')}",
        ],
        ["ε point estimate (from the measured Δ̂)", g4(q.get("epsilon_point_estimate")), ""],
    ]


def _draw_rows(rel: dict) -> list[list[str]]:
    """δ, Δ̂, the released round, the temperatures and Δ̂'s tail, from the draw's record."""
    g, tail = rel["guarantee"], rel.get("local_sensitivity_tail") or {}
    q = g.get("quantities", {})
    rows = [
        ["δ", g.get("delta_reason") or sci(g.get("delta")), "never a number for SWAG-PPM"],
        [
            "Δ̂ (local sensitivity; ε = 2Δ / min(1, T_min over all directions))",
            num(q.get("local_sensitivity")),
            f"max over {q.get('posterior_draws', '–')} posterior draws and its draw",
        ],
        ["round of its draw", str(rel.get("round", q.get("round", "–"))), ""],
        [
            "T̂ / T_min (SWAG against the Laplace marginal, in SWAG's subspace)",
            f"{num(q.get('temperature'))} / {num(q.get('temperature_min'))}",
            f"calibration `{q.get('calibration', '–')}`",
        ],
        [
            "T̂ over all parameters (mean) / certified T_min over all",
            f"{num(q.get('temperature_all'))} / {q['temperature_min_all']:.3g}"
            if q.get("temperature_min_all") is not None
            else num(q.get("temperature_all")),
            "λ·scale·min var (docs/guarantees.md, M)",
        ],
    ]
    if tail:
        rows.append(
            [
                f"2Δ at Δ̂'s {tail['level']:g} quantile (GEV) [{100 * tail['confidence']:g} % interval]",
                f"{num(2 * tail['estimate'])} [{num(2 * tail['ci_low'])}, {num(2 * tail['ci_high'])}]",
                "Monte Carlo error of the maximum",
            ]
        )
    return rows


def _evaluation_rows(ev: dict) -> list[list[str]]:
    """The released draw's and the further draws' test F1, the quartiles and the fit verdict."""
    return [
        [
            "weighted / macro F1, its draw (test split)",
            f"{num(ev['released_weighted_f1'], 4)} / {num(ev['released_macro_f1'], 4)}",
            "",
        ],
        [
            f"weighted / macro F1, mean ± sd over {ev.get('draws', '–')} further draws",
            f"{num(ev['weighted_f1_mean'], 4)} ± {num(ev['weighted_f1_sd'], 4)} / "
            f"{num(ev['macro_f1_mean'], 4)} ± {num(ev['macro_f1_sd'], 4)}",
            "",
        ],
        [
            "top / bottom quartile weighted F1 (classes by training size)",
            f"{num(ev.get('top_quartile_weighted_f1'), 4)} / {num(ev.get('bottom_quartile_weighted_f1'), 4)}",
            "",
        ],
        ["fit verdict (max-delta diagnostics)", str(ev.get("verdict", "–")), ""],
    ]


def selection_row(params) -> list[str]:
    """Whether the private selection of the draw runs, from the declared settings (never from the order stages ran)."""
    from dprelease.mechanisms.swag_ppm.select import NO_VALIDATION, NOT_ENABLED

    if not params.selection.enabled:
        return ["private selection", "off", NOT_ENABLED]
    if params.data.validation_size == 0:
        return ["private selection", "off", NO_VALIDATION]
    return ["private selection", "on", ""]


def render(metrics: Path, *, selection: list[str] | None = None) -> list[str]:
    """The section's lines from the chain's records in ``metrics`` (the metrics folder) and the ``selection`` row
    (:func:`selection_row`); the heading and a line naming ``make run`` when the draw's record or its evaluation is
    absent."""
    rel, ev, rw = (read_json(Path(metrics) / name) for name in SOURCES)
    out = [RESULTS_SECTION.heading, ""]
    if not rel or not ev:
        return out + [missing(RESULTS_SECTION.what, RESULTS_SECTION.target), ""]
    rows = _claim_rows(rel["guarantee"]) + _draw_rows(rel) + _evaluation_rows(ev)
    if rw:
        state = "off" if "skipped" in rw else ("accepted" if rw.get("accepted") else "not accepted")
        rows.append(
            [
                "re-weighting (round 3)",
                f"{rw.get('mode', '')} {state}".strip(),
                rw.get("reason") or rw.get("skipped", ""),
            ]
        )
    if selection:
        rows.append(selection)
    return out + [
        *table(["figure", "value", "note"], rows),
        "",
        "Sources: " + ", ".join(f"`metrics/{name}`" for name in SOURCES) + ".",
        "",
    ]


def write(folder: Path, metrics: Path, *, selection: list[str] | None = None) -> None:
    """``folder/section.md`` (the evaluation's report folder) from the chain's records in ``metrics``."""
    (Path(folder) / "section.md").write_text("\n".join(render(metrics, selection=selection)), encoding="utf-8")
