"""The sanitizer release's checks that need no trained run: kind / mechanism, and bounded architecture."""

import json

import pytest

from dprelease.core.errors import ReleaseError
from dprelease.core.io import write_json
from dprelease.mechanisms.gpp.sanitizer import _build, load_sanitizer


def test_a_classifier_or_nvdp_release_is_not_a_gpp_sanitizer(tmp_path):
    write_json(tmp_path / "release.json", {"kind": "classifier", "files": {}})
    with pytest.raises(ReleaseError, match="not a sanitizer release"):
        load_sanitizer(tmp_path)
    write_json(tmp_path / "release.json", {"kind": "sanitizer", "mechanism": "nvdp", "files": {}})
    with pytest.raises(ReleaseError, match="a nvdp sanitizer release, not a gpp one"):
        load_sanitizer(tmp_path)
    with pytest.raises(ReleaseError, match="release folder not found"):
        load_sanitizer(tmp_path / "missing")


@pytest.mark.parametrize(
    "arch, message",
    [
        ({"d_in": 384, "d_z": 10**7, "hidden": [8]}, "outside the bounds"),
        ({"d_in": 384, "d_z": 4, "hidden": []}, "hidden"),
        ({"d_in": 384, "d_z": 4, "hidden": [True]}, "hidden"),
        ({"d_in": "384", "d_z": 4, "hidden": [8]}, "integer"),
    ],
)
def test_architecture_is_bounded_before_anything_is_allocated(tmp_path, arch, message):
    with pytest.raises(ReleaseError, match=message):
        _build(arch, tmp_path / "model.json")


def test_a_valid_architecture_builds_on_the_meta_device(tmp_path):
    enc = _build(json.loads('{"d_in": 384, "d_z": 4, "hidden": [16, 8]}'), tmp_path / "model.json")
    assert next(enc.parameters()).device.type == "meta"


def test_release_stage_leaves_a_marker_when_osha_is_off(tmp_path):
    from dprelease.core.config import parse_params
    from dprelease.mechanisms.gpp.sanitizer import write_sanitizer_release

    source = tmp_path / "artifacts/gpp/osha"
    source.mkdir(parents=True)
    write_json(source / "skipped.json", {"skipped": "off"})
    out = write_sanitizer_release(parse_params({"gpp": {"osha": {"enabled": False}}}), tmp_path, source, code=["gpp"])
    assert "skipped" in out and (tmp_path / "release-gpp/skipped.json").is_file()


def test_the_guarantee_is_a_guarantee_record_with_an_empirical_kind():
    """GPP claims no ε: its record is a privacy.guarantee.Guarantee of kind empirical_probe, and what
    `dprelease sanitize` writes next to the draws is read from it."""
    from dprelease.core.privacy.guarantee import Guarantee
    from dprelease.mechanisms.gpp.sanitizer import GUARANTEE, guarantee, public_meta

    audit = {"adversary_auc": 0.62, "noprivacy_adversary_auc": 0.81, "utility_auc": 0.9}
    record = Guarantee.from_dict(json.loads(json.dumps(guarantee(audit))))
    assert (record.kind, record.epsilon, record.delta) == ("empirical_probe", None, None)
    assert record.quantities == {"adversary_auc": 0.62, "statement": GUARANTEE, "noprivacy_adversary_auc": 0.81}
    meta = public_meta(record.as_dict())
    assert meta["guarantee"] == "empirical_probe" and meta["epsilon"] is None and meta["adversary_auc"] == 0.62
    assert meta["meaning"].startswith("no differential-privacy ε") and meta["statement"] == GUARANTEE
