"""params.yaml validation: defaults, one-line errors naming the key, overrides."""

import re
from pathlib import Path

import pytest
import yaml

from dprelease.core.config import ConfigError, Params, load_params, parse_params

PARAMS_YAML = Path(__file__).parents[2] / "params.yaml"


def _error(raw, overrides=None) -> str:
    with pytest.raises(ConfigError) as info:
        parse_params(raw, overrides)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


def test_repo_params_yaml_loads_with_expected_values():
    p = load_params(PARAMS_YAML)
    assert isinstance(p, Params)
    assert p.model.backend == "head"
    assert p.backend is p.model.head
    assert p.ppm.draws == 500
    assert p.ppm.c == 1.0 and p.ppm.g == 0.0
    assert p.ppm.k == 0.95
    assert p.ppm.reweight_form == "power" and p.ppm.risk_norm == "minmax"
    assert p.data.cap == 200
    assert p.swag.head.rank == 20 and p.swag.head.epochs == 20
    assert p.ppm.rounds == [1, 2, 3] and p.ppm.reweighting and p.ppm.mechanism == "asymptotic"


def test_repo_params_yaml_equals_defaults_for_shared_sections():
    p = load_params(PARAMS_YAML)
    d = Params()
    for section in ("data", "features", "ppm", "evaluation", "tracking"):
        assert getattr(p, section) == getattr(d, section), section
    assert p.model.backend == d.model.backend
    assert p.seed == d.seed


def test_empty_mapping_gives_defaults():
    assert parse_params(None) == Params()
    assert parse_params({}) == Params()


@pytest.mark.parametrize(
    "raw,key",
    [
        ({"colour": 1}, "colour"),
        ({"ppm": {"cc": 1.0}}, "ppm.cc"),
        ({"swag": {"head": {"rnak": 5}}}, "swag.head.rnak"),
    ],
)
def test_unknown_key_is_one_line_error_naming_it(raw, key):
    msg = _error(raw)
    assert key in msg
    assert "unknown key" in msg


@pytest.mark.parametrize(
    "dotted,value",
    [
        ("ppm.c", 0),
        ("ppm.c", -1),
        ("ppm.c", 3),
        ("ppm.g", 1.5),
        ("ppm.g", -1.5),
        ("ppm.k", 1.5),
        ("ppm.k", -0.1),
        ("ppm.draws", 0),
        ("ppm.draws", 1),
        ("data.cap", 0),
        ("data.test_size", 1.0),
        ("data.test_size", 0.0),
        ("swag.head.epochs", 1),
        ("seed", -1),
    ],
)
def test_out_of_range_is_one_line_error_naming_key(dotted, value):
    msg = _error({}, {dotted: value})
    assert msg.startswith(f"params.yaml: {dotted}:"), msg


@pytest.mark.parametrize(
    "raw,key",
    [
        ({"ppm": {"draws": "many"}}, "ppm.draws"),
        ({"ppm": {"draws": 2.5}}, "ppm.draws"),
        ({"ppm": {"c": "high"}}, "ppm.c"),
        ({"model": {"backend": "gpu"}}, "model.backend"),
        ({"ppm": {"risk_norm": "zscore"}}, "ppm.risk_norm"),
        ({"ppm": 5}, "ppm"),
    ],
)
def test_wrong_type_is_one_line_error_naming_key(raw, key):
    msg = _error(raw)
    assert msg.startswith(f"params.yaml: {key}:"), msg


def test_several_errors_reported_on_one_line_with_count():
    msg = _error({"ppm": {"c": 0, "k": 2}})
    assert "ppm.c" in msg and "(and 1 more)" in msg


@pytest.mark.parametrize("backend", ["head", "full"])
def test_swag_rank_above_epochs_is_rejected(backend):
    msg = _error({}, {f"swag.{backend}.rank": 25})
    assert f"swag.{backend}.rank" in msg
    # rank == epochs is fine
    assert parse_params({}, {f"swag.{backend}.rank": 20}).swag.head.epochs == 20


def test_missing_file_raises(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_params(tmp_path / "nope.yaml")


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_non_mapping_yaml_raises(tmp_path, text):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="mapping"):
        load_params(path)


def test_invalid_yaml_is_one_line_error(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("ppm: {c: [1, 2\n")
    with pytest.raises(ConfigError) as info:
        load_params(path)
    assert "not valid YAML" in str(info.value) and "\n" not in str(info.value)


def test_empty_file_gives_defaults(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("# only a comment\n")
    assert load_params(path) == Params()


def test_overrides():
    p = parse_params({"ppm": {"k": 0.5}}, {"ppm.c": 0.8, "swag.head.rank": 10, "seed": 7})
    assert p.ppm.c == 0.8
    assert p.ppm.k == 0.5  # untouched sibling keeps its value
    assert p.swag.head.rank == 10
    assert p.seed == 7
    assert parse_params({}, {"ppm.reweight": False}).ppm.rounds == [1, 2]


def test_overrides_via_load_params(tmp_path):
    raw = yaml.safe_load(PARAMS_YAML.read_text())
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    p = load_params(path, {"ppm.c": 0.8, "model.backend": "full"})
    assert p.ppm.c == 0.8
    assert p.backend is p.model.full
    with pytest.raises(ConfigError, match="ppm.c"):
        load_params(path, {"ppm.c": 3})


def test_override_below_a_scalar_is_rejected():
    msg = _error({"ppm": 5}, {"ppm.c": 0.8})
    assert "ppm.c" in msg


def test_params_are_frozen():
    p = Params()
    with pytest.raises(Exception):
        p.seed = 3  # type: ignore[misc]


def test_overrides_do_not_mutate_the_input():
    raw = {"ppm": {"c": 1.0}}
    parse_params(raw, {"ppm.c": 0.8})
    assert raw == {"ppm": {"c": 1.0}}


def test_too_few_posterior_draws_for_an_epsilon_are_refused():
    """Δ̂ is a max over S draws; a fresh draw exceeds it with probability 1/(S+1) (TRUST.md O)."""
    with pytest.raises(ConfigError, match="ppm.draws: at least 100") as info:
        parse_params({"ppm": {"draws": 2}})
    assert "\n" not in str(info.value) and "1/(S+1)" in str(info.value)
    assert parse_params({"ppm": {"draws": 100}}).ppm.draws == 100
    assert parse_params({"ppm": {"draws": 2, "smoke_test": True}}).ppm.draws == 2


def test_data_encoding_choices():
    assert parse_params({}).data.encoding == "auto"
    assert parse_params({"data": {"encoding": "cp1252"}}).data.encoding == "cp1252"
    with pytest.raises(ConfigError, match="data.encoding"):
        parse_params({"data": {"encoding": "latin-9"}})


def test_a_renamed_section_names_its_new_name():
    with pytest.raises(
        ConfigError, match=r"^params\.yaml: section 'audit' is now 'evaluation' \(the release's utility"
    ):
        parse_params({"audit": {"draws": 3}})
    assert parse_params({"evaluation": {"draws": 3}}).evaluation.draws == 3


@pytest.mark.parametrize(
    "raw, old, new",
    [
        ({"model": {"head": {"swag": {"epochs": 5}}}}, "model.head.swag", "swag.head"),
        ({"compare": {"nonprivate_epochs": 5}}, "compare.nonprivate_epochs", "nonprivate.epochs"),
        ({"frontier": {"dpsgd": {"epochs": [5]}}}, "frontier.dpsgd", "dpsgd.grid"),
        ({"frontier": {"ppm": {"c": [0.5]}}}, "frontier.ppm", "ppm.frontier"),
    ],
)
def test_a_moved_key_names_its_new_place(raw, old, new):
    """A key a package moved into its own section (its params module's ``MOVED``): one line naming the new place."""
    with pytest.raises(ConfigError, match=rf"^params\.yaml: '{re.escape(old)}' is now '{re.escape(new)}' \("):
        parse_params(raw)


def test_the_core_configuration_names_no_mechanism():
    """config.py holds the shared sections only: each mechanism's section, level checks and moved keys are in its
    own package's params module (read through the plug-in list), so no mechanism's name or section key is here."""
    from dprelease.contracts import code_scope, plugins

    mechanisms = sorted(
        p.name for p in (code_scope.PACKAGE_DIR / "mechanisms").iterdir() if (p / "params.py").is_file()
    )
    keys = {
        key
        for module in plugins._params_modules()
        if ".mechanisms." in module.__name__
        for key, _ in ((module.SECTION,) if hasattr(module, "SECTION") else ()) + tuple(getattr(module, "SECTIONS", ()))
    }
    assert {"dpsgd", "swag_ppm", "ncm"} <= set(mechanisms) and {"ppm", "swag", "dpsgd", "tune"} <= keys
    text = (code_scope.PACKAGE_DIR / "core" / "config.py").read_text(encoding="utf-8")
    found = {w for w in {*mechanisms, *keys, "swag_ppm_censored"} if re.search(rf"\b{w}\b", text, re.IGNORECASE)}
    assert not found, found
    assert set(keys) <= set(parse_params({}).model_fields_set | set(type(parse_params({})).model_fields))


def test_a_mechanism_grid_is_in_its_own_section():
    """DP-SGD's grid and SWAG-PPM's frontier trace are their own sections' (the frontier keeps what is shared)."""
    p = parse_params({"dpsgd": {"grid": {"epochs": [5]}}, "ppm": {"frontier": {"c": [0.5, 1.0]}}})
    assert p.dpsgd.grid.epochs == [5] and p.ppm.frontier.c == [0.5, 1.0]
    assert not {"dpsgd", "ppm"} & set(type(p.frontier).model_fields)
    with pytest.raises(ConfigError, match=r"^params\.yaml: dpsgd\.grid: .*must not be empty"):
        parse_params({"dpsgd": {"grid": {"epochs": []}}})
