"""The one manifest builder: the common fields every releasing mechanism's manifest has, filled once, and the
mechanism's own fields beside them; the secret key's id only, never the key."""

from __future__ import annotations

from dprelease.contracts.layout import Layout
from dprelease.core.config import parse_params
from dprelease.core.privacy import guarantee, secret
from dprelease.core.release.manifest import NOISED, noised, release_manifest


def test_the_common_fields_are_filled_once_and_the_mechanism_adds_its_own(tmp_path):
    params = parse_params({})
    lay = Layout.from_params(params, tmp_path)
    secret.init(lay.artifacts)
    g = guarantee.accountant("toy", 1.0, 1e-5, target_epsilon=1.0)
    m = release_manifest(
        params,
        lay,
        g,
        mechanism="toy",
        backend="head",
        test_f1={"weighted_f1": 0.5},
        randomness={"public_seed_drives": "the split", "secret_key_drives": "the noise"},
        tuning="declared",
        configuration={"sigma": 2.0},
    )
    assert m["guarantee"] == g.as_dict() and (m["mechanism"], m["backend"]) == ("toy", "head")
    assert m["test_f1"] == {"weighted_f1": 0.5} and (m["tuning"], m["configuration"]) == ("declared", {"sigma": 2.0})
    assert m["randomness"] == {
        "public_seed": params.seed,
        "public_seed_drives": "the split",
        "secret_key_drives": "the noise",
        "secret_key_id": secret.key_id(lay.artifacts),
    }
    key = (lay.artifacts / "secret" / "key").read_bytes()
    assert key.hex() not in repr(m) and repr(key) not in repr(m)


def test_a_release_evaluated_after_staging_has_no_test_f1_and_any_own_name_is_kept(tmp_path):
    params = parse_params({})
    lay = Layout.from_params(params, tmp_path)
    secret.init(lay.artifacts)
    g = guarantee.accountant("toy", 1.0, 1e-5, target_epsilon=1.0)
    m = release_manifest(params, lay, g, mechanism="toy", backend="head", test_f1=None, randomness={}, g=0.5)
    assert "test_f1" not in m and m["g"] == 0.5 and m["guarantee"] == g.as_dict()  # own `g` beside the record


def test_noised_figures_are_marked_as_such():
    assert noised({"weighted_f1": 0.5}) == {"weighted_f1": 0.5, "kind": NOISED}
