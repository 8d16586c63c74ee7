"""``make results``: the result page rendered from a tiny metrics/ and reports/ tree, and the lines that say
what has not been measured yet."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from dprelease.compare.reports import results
from dprelease.core.config import parse_params
from dprelease.mechanisms.gpp import section as gpp_section
from dprelease.mechanisms.nvdp import section as nvdp_section
from dprelease.mechanisms.swag_ppm import section as swag_ppm_section

AUDIT_COLUMNS = [
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
    "tpr_at_fpr_0.01",
    "tp_0.01",
    "fp_0.01",
    "null_tpr_95_0.01",
    "tpr_at_fpr_0.001",
    "tp_0.001",
    "fp_0.001",
    "null_tpr_95_0.001",
    "runs",
    "tightness",
    "bound",
]


def _json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")


def _csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns or list(rows[0]), restval="")
        w.writeheader()
        w.writerows(rows)


def _release(root: Path) -> None:
    m = root / "metrics"
    _json(
        m / "data.json",
        {
            "rows": 5252,
            "classes": 108,
            "train_rows": 2626,
            "validation_rows": 525,
            "test_rows": 2101,
            "train_class_gini": 0.6592,
        },
    )
    _json(
        m / "swag_ppm_draw.json",
        {
            "round": 2,
            "guarantee": {
                "epsilon": 7.1452,
                "delta": None,
                "delta_reason": "asymptotic, not quantified",
                "kind": "ppm_local_asymptotic",
                "quantities": {
                    "local_sensitivity": 3.5726,
                    "posterior_draws": 500,
                    "round": 2,
                    "temperature": 0.98,
                    "temperature_min": 0.91,
                    "temperature_all": 0.0034,
                    "calibration": "subspace",
                },
            },
            "local_sensitivity_tail": {
                "level": 0.9998,
                "confidence": 0.95,
                "estimate": 4.5,
                "ci_low": 4.0,
                "ci_high": 5.25,
            },
        },
    )
    _json(
        m / "evaluation.json",
        {
            "released_weighted_f1": 0.39678,
            "released_macro_f1": 0.12794,
            "draws": 30,
            "weighted_f1_mean": 0.41709,
            "weighted_f1_sd": 0.02467,
            "macro_f1_mean": 0.13329,
            "macro_f1_sd": 0.00947,
            "top_quartile_weighted_f1": 0.48295,
            "bottom_quartile_weighted_f1": 0.0,
            "verdict": "underfit",
        },
    )
    _json(m / "reweight.json", {"accepted": False, "mode": "iterative", "reason": "round 2 released"})
    _json(m / "released.json", DPSGD_RECORD)
    (root / "reports/release").mkdir(parents=True, exist_ok=True)
    swag_ppm_section.write(root / "reports/release", m)  # what stage evaluate writes at its end


DPSGD_RECORD = {  # metrics/released.json as the publish step writes it for the default release
    "mechanism": "dpsgd",
    "label": "DP-SGD (Opacus)",
    "arm": "dpsgd",
    "guarantee": {"epsilon": 7.9974, "delta": 0.00017, "kind": "dp_accountant", "quantities": {}},
    "weighted_f1": 0.51834,
    "macro_f1": 0.19712,
    "test_f1_kind": "dp_noised_counts",
    "release": "release",
}


def test_an_empty_root_says_what_to_run_for_every_section(tmp_path):
    page = results.render(tmp_path)
    for target in ("run", "compare", "audit", "audit-tight", "nvdp", "gpp", "epsilon-sensitivity"):
        assert f"not measured yet: run `make {target}`." in page, target
    assert "| figure |" not in page  # no table without its inputs


def test_the_release_section_reads_the_release_record_and_swag_ppm_s_chain_has_its_own(tmp_path):
    _release(tmp_path)
    page = results.render(tmp_path)
    release, chain = page.split("## The release (`make run`)")[1].split(swag_ppm_section.RESULTS_SECTION.heading)
    assert "| mechanism | `dpsgd` (DP-SGD (Opacus)) | declared in `released.mechanism` |" in release
    assert "| guarantee kind | `dp_accountant` | see [docs/guarantees.md](guarantees.md) |" in release
    assert "| ε | **7.997** |" in release and "| δ | 1.7e-04 |" in release
    assert (
        "| weighted / macro F1 (test split) | 0.5183 / 0.1971 | `dp_noised_counts`: computed from Gaussian-noised "
        "counts, covered by the release's ε |"
    ) in release
    assert "| release folder | `release` |" in release and "Source: `metrics/released.json`." in release
    assert "Data: 5,252 rows, 108 classes; train 2,626 / validation 525 / test 2,101" in release
    assert "7.145" not in release and "0.3968" not in release  # nothing of SWAG-PPM's draw in the release's section
    assert "| ε (its draw's claim) | **7.145** |" in chain
    assert "| Δ̂ (local sensitivity; ε = 2Δ / min(1, T_min over all directions)) | 3.573 |" in chain
    assert "| T̂ / T_min (SWAG against the Laplace marginal, in SWAG's subspace) | 0.980 / 0.910 |" in chain
    assert "| 2Δ at Δ̂'s 0.9998 quantile (GEV) [95 % interval] | 9.000 [8.000, 10.500] |" in chain
    assert "| weighted / macro F1, its draw (test split) | 0.3968 / 0.1279 |" in chain
    assert "0.4171 ± 0.0247 / 0.1333 ± 0.0095" in chain
    assert "| re-weighting (round 3) | iterative not accepted | round 2 released |" in chain
    assert "private selection" not in chain  # no selection row handed in: none
    assert "not measured yet: run `make compare`" in page  # the others still missing


def test_the_release_section_names_the_declared_mechanism(tmp_path):
    from dprelease.core.release.manifest import NOISED

    assert NOISED in results.F1_KINDS  # the page explains the kind the noised releases write
    _release(tmp_path)
    dpsgd = results.release_section(tmp_path)
    assert "| mechanism | `dpsgd` (DP-SGD (Opacus)) | declared in `released.mechanism` |" in dpsgd
    swag = DPSGD_RECORD | {
        "mechanism": "swag_ppm",
        "label": "SWAG-PPM",
        "arm": "swag_ppm_reweighted",
        "guarantee": {
            "epsilon": None,
            "delta": None,
            "delta_reason": "none (no differential-privacy claim)",
            "kind": "ppm_uncertified",
        },
        "test_f1_kind": "exact",
    }
    _json(tmp_path / "metrics/released.json", swag)
    lines = results.release_section(tmp_path)
    assert "| mechanism | `swag_ppm` (SWAG-PPM) | declared in `released.mechanism` |" in lines
    assert "| ε | **none claimed** |  |" in lines and "| δ | none (no differential-privacy claim) |  |" in lines
    assert (
        "| weighted / macro F1 (test split) | 0.5183 / 0.1971 | `exact`: exact: not noised, not covered by ε |" in lines
    )
    assert not any("dpsgd" in line for line in lines)
    (tmp_path / "metrics/released.json").unlink()
    assert "The release: not measured yet: run `make run`." in results.release_section(tmp_path)


def test_an_uncertified_release_has_no_epsilon_in_the_epsilon_row(tmp_path):
    _release(tmp_path)
    rel = json.loads((tmp_path / "metrics/swag_ppm_draw.json").read_text(encoding="utf-8"))
    rel["guarantee"] |= {
        "epsilon": None,
        "kind": "ppm_uncertified",
        "delta_reason": "none (no differential-privacy claim)",
    }
    rel["guarantee"]["quantities"] |= {
        "uncertified_index": 10.5,
        "uncertified_index_point": 7.1452,
        "certified_directions": 19,
        "parameters": 126316,
    }
    _json(tmp_path / "metrics/swag_ppm_draw.json", rel)
    p = parse_params({"selection": {"enabled": False}})
    page = "\n".join(swag_ppm_section.render(tmp_path / "metrics", selection=swag_ppm_section.selection_row(p)))
    assert "| ε (its draw's claim) | **none claimed** | kind `ppm_uncertified`" in page
    assert "| index 2Δ (NOT an ε) | 10.500 | certified in 19 of 126316 directions; point 7.145 |" in page
    assert "| private selection | off | selection.enabled is false |" in page


def test_comparison_audit_nvdp_and_gpp_tables(tmp_path):
    _csv(
        tmp_path / "reports/compare/table1.csv",
        [
            {
                "model": "Non-private",
                "epsilon": "",
                "delta": "none (not private)",
                "guarantee": "none",
                "T̂": "",
                "weighted F1": 0.59416,
                "macro F1": 0.25664,
            },
            {
                "model": "DP-SGD (Opacus)",
                "epsilon": 7.14268,
                "delta": 0.00019040,
                "guarantee": "dp_accountant",
                "T̂": "",
                "weighted F1": 0.42959,
                "macro F1": 0.14457,
            },
        ],
    )
    _csv(
        tmp_path / "reports/privacy/audit.csv",
        [
            {
                "arm": "dpsgd",
                "claimed_epsilon": 7.1427,
                "delta": 0.00019,
                "attack": "lira_online",
                "method": "heuristic_l3",
                "epsilon_lower_bound": 0.2818,
                "convicted": "False",
                "gate": "False",
                "auc": 0.57457,
                "tpr_at_fpr_0.01": 0.02894,
                "tp_0.01": 76.0,
                "fp_0.01": 21.0,
                "null_tpr_95_0.01": 0.01561,
                "tpr_at_fpr_0.001": 0.00609,
                "tp_0.001": 16.0,
                "fp_0.001": 2.0,
                "null_tpr_95_0.001": 0.00343,
            },
            {
                "arm": "planted:nonprivate_labelled_eps1",
                "claimed_epsilon": 1.0,
                "delta": 0.0,
                "attack": "canary_input",
                "method": "steinke_pure",
                "epsilon_lower_bound": 6.5281,
                "confidence": 0.95,
                "guesses": 3000.0,
                "correct": 3000.0,
                "ceiling": 6.5281,
                "convicted": "True",
                "gate": "True",
            },
        ],
        AUDIT_COLUMNS,
    )
    _csv(
        tmp_path / "reports/nvdp/table.csv",
        [
            {
                "task": "mrpc",
                "variant": "nonprivate",
                "lambda": "",
                "score": 0.70,
                "bdp_epsilon": "",
                "rd_max": "",
                "rd_max_filtered": "",
            },
            {
                "task": "mrpc",
                "variant": "clipped",
                "lambda": 0.01,
                "score": 0.68,
                "bdp_epsilon": 10.47,
                "rd_max": 0.5,
                "rd_max_filtered": 0.01,
            },
            {
                "task": "mrpc",
                "variant": "clipped",
                "lambda": 0.1,
                "score": 0.66,
                "bdp_epsilon": 10.46,
                "rd_max": 0.2,
                "rd_max_filtered": 0.005,
            },
        ],
    )
    _csv(
        tmp_path / "reports/gpp/table.csv",
        [
            {
                "dataset": "digits",
                "experiment": "baseline",
                "method": "gpp",
                "setting": "centralized",
                "clients": 1,
                "beta": 1.0,
                "d_z": 32,
                "utility_auc": 0.9781,
                "utility_accuracy": 0.61,
                "adversary_auc": 0.5312,
                "adversary_accuracy": 0.52,
                "adversary_majority": 0.5,
            },
            {
                "dataset": "digits",
                "experiment": "sweep_beta",
                "method": "gpp",
                "setting": "centralized",
                "clients": 1,
                "beta": 8.0,
                "d_z": 32,
                "utility_auc": 0.99,
                "utility_accuracy": 0.7,
                "adversary_auc": 0.8,
            },
        ],
    )
    nvdp_section.write(tmp_path / "reports/nvdp")  # what each report stage writes beside its table
    gpp_section.write(tmp_path / "reports/gpp")
    page = results.render(tmp_path)
    assert "| Non-private | – | none (not private) | `none` | – | 0.5942 | 0.2566 |" in page
    assert "| DP-SGD (Opacus) | 7.143 | 1.9e-04 | `dp_accountant` | – | 0.4296 | 0.1446 |" in page
    assert "| dpsgd | lira_online | 0.575 | 0.029 (76 / 21) | 0.016 | 0.006 (16 / 2) | 0.003 | 0.282 |" in page
    assert (
        "| planted:nonprivate_labelled_eps1 | input | steinke_pure | 1.000 | 0 | 3,000 / 3,000 | 6.528 | 6.528 "
        "| yes | yes |"
    ) in page
    assert "The tight multi-run audit: not measured yet: run `make audit-tight`." in page
    assert "| mrpc | clipped | 0.01 | 0.680 | 0.700 | 10.470 | 0.500 | 0.010 |" in page  # the best λ only
    assert "| mrpc | clipped | 0.1 |" not in page
    assert "| digits | gpp | centralized | 1 | 32 | 1.0 | 0.978 | 0.610 | 0.531 | 0.520 (0.500) |" in page
    assert "0.990" not in page  # sweeps stay in reports/gpp/report.md


def test_the_owner_only_sensitivity_grid_reaches_the_page_as_aggregates_only(tmp_path):
    cells = [
        {"swag_lr": lr, "prior_precision": lam, "epsilon": eps, "weighted_f1_mean": f1}
        for lr, lam, eps, f1 in [
            (0.003, 10.0, 34.4809, 0.4001),
            (0.01, 100.0, 8.2215, 0.4239),
            (0.03, 100.0, 9.4368, 0.4273),
            (0.01, 1000.0, 5.9225, 0.0203),
        ]
    ]
    _csv(tmp_path / "reports/epsilon_sensitivity/table.csv", cells)
    _json(tmp_path / "metrics/temperature_r2.json", {"temperature": {"prior_precision": 100.0}})
    page = results.render(tmp_path)
    assert "4 cells" in page and "ε from 5.923 to 34.481 (max / min 5.82)" in page
    assert "At the release's prior λ = 100 (2 cells): 8.222 to 9.437 (max / min 1.15)" in page
    for per_cell in ("0.4001", "0.400", "0.4239", "0.424", "0.0203", "0.003"):
        assert per_cell not in page, per_cell  # no F1, no per-cell setting


def test_main_writes_the_page_and_refuses_a_missing_root(tmp_path, capsys):
    _release(tmp_path)
    out = tmp_path / "docs" / "results.md"
    assert results.main(["--root", str(tmp_path), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == results.render(tmp_path)
    assert results.main(["--root", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such project root" in err
