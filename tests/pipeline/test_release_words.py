"""Every releasable mechanism is described in its own words wherever the release is shown: the MLflow run's
name and note, the registry version's tags and description (the headline table), and the end-of-run summary,
all rendered from the release's record (``metrics/released.json``) alone. A mechanism that releases no draw
(DP-SGD, DP-NCM, the public model) is never labelled with a draw or a SWAG-PPM round."""

from __future__ import annotations

import pytest

from dprelease.contracts.layout import Layout
from dprelease.core.config import parse_params
from dprelease.core.headline import headline, markdown
from dprelease.core.io import write_json
from dprelease.core.privacy import guarantee
from dprelease.pipeline.service.promotion import figures_tags
from dprelease.pipeline.tracking import note, release_run_name
from flows.summary import released_lines

# (released.mechanism, its guarantee record, its audit arm, its own record fields): the shapes each plug-in's
# figures hook gives the shared publish step (dprelease.core.release.stages.publish)
RECORDS = {
    "dpsgd": (
        guarantee.accountant("DP-SGD (Opacus)", 7.9, 1e-5, target_epsilon=8.0),
        "dpsgd",
        {"diagnostics": {"noise_multiplier": 0.9, "steps": 120, "sample_rate": 0.01}},
    ),
    "ncm": (
        guarantee.accountant("DP nearest class mean", 7.9, 1e-5, target_epsilon=8.0),
        None,
        {"diagnostics": {"sigma": 0.4}},
    ),
    "public_only": (guarantee.accountant("the public model", 0.5, 1e-5, training_epsilon=0.0), None, {}),
    "linear_ppm": (guarantee.ppm(3.1, 1.5, mechanism="linear PPM (MCMC)"), None, {"diagnostics": {"rhat_max": 1.01}}),
    "swag_ppm": (
        guarantee.ppm(5.5, 2.7, round=3, temperature=0.93),
        "swag_ppm_reweighted",
        {
            "headline": {"temperature": 0.93, "weighted_f1_mean": 0.57},
            "tags": {"round": 3},
            "diagnostics": {"round": 3},
        },
    ),
}
NO_DRAW = ("dpsgd", "ncm", "public_only")


def _release(tmp_path, mechanism: str):
    g, arm, own = RECORDS[mechanism]
    params = parse_params({"released": {"mechanism": mechanism}})
    lay = Layout.from_params(params, tmp_path)
    write_json(lay.metrics / "data.json", {"public": {"expected_train_size": 2626}})
    write_json(
        lay.metrics / "released.json",
        {
            "mechanism": mechanism,
            "label": g.mechanism,
            "arm": arm,
            "guarantee": g.as_dict(),
            "weighted_f1": 0.61,
            "macro_f1": 0.33,
            "test_f1_kind": "dp_noised_counts" if mechanism in NO_DRAW else "exact",
            "diagnostics": {},
            "configuration": None,
            "tuning": None,
            "release": params.release,
        }
        | own,
    )
    return params, lay, g


@pytest.mark.parametrize("mechanism", list(RECORDS))
def test_the_release_is_described_in_its_own_words(tmp_path, mechanism):
    params, lay, g = _release(tmp_path, mechanism)
    from dprelease.core.headline import released_record

    rec = released_record(lay.metrics)
    tags = figures_tags(lay, rec["arm"])
    texts = {
        "run name": release_run_name(params, g),
        "run note": note(params, lay, g, rec),
        "version description": markdown(headline(lay.metrics), "version 1"),
        "summary": "\n".join(released_lines(params, str(tmp_path))),
        "version tags": " ".join(f"{k}={v}" for k, v in tags.items()),
    }
    assert tags["mechanism"] == mechanism and tags["guarantee"] == g.kind
    assert tags["weighted_f1"] == 0.61 and tags["epsilon"] == g.epsilon and tags["records"] == 2626
    assert g.mechanism in texts["run note"] and g.mechanism in texts["summary"] and g.mechanism in texts["run name"]
    assert f"released.mechanism: {mechanism}" in texts["summary"]
    assert "weighted F1 (released model) | 0.61" in texts["version description"]
    if mechanism == "swag_ppm":  # its own tag and figures, through its record
        assert tags["round"] == 3 and texts["run note"].startswith("Released round 3 of SWAG-PPM")
        assert "temperature" in headline(lay.metrics)
    else:
        assert "round" not in tags and "round" not in texts["run note"] and "SWAG" not in " ".join(texts.values())
    if mechanism in NO_DRAW:
        bad = {where: text for where, text in texts.items() if "draw" in text.lower()}
        assert not bad, bad
