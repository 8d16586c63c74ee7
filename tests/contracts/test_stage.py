"""dprelease.contracts.stage: the Stage declaration, pick() of dotted params keys and skip markers."""

from __future__ import annotations

import functools

import pytest

from dprelease.contracts.stage import Stage, pick
from dprelease.core.config import parse_params
from dprelease.core.data import stages as data_stages


def run_fn(params, root):
    return {"ran": True}


def _stage(**kw) -> Stage:
    base = dict(name="demo", run=run_fn, params=["seed"], deps=["in.csv"], outs=["artifacts/out"])
    return Stage(**(base | kw))


# pick ---------------------------------------------------------------------------------------------
def test_pick_dotted_keys_and_sections():
    params = parse_params({"seed": 11, "ppm": {"c": 0.8}, "data": {"cap": 5}})
    got = pick(params, ["seed", "ppm.c", "data.cap", "model.head.finetune.lr", "tracking"])
    assert list(got) == ["seed", "ppm.c", "data.cap", "model.head.finetune.lr", "tracking"]
    assert got["seed"] == 11
    assert got["ppm.c"] == 0.8
    assert got["data.cap"] == 5
    assert got["model.head.finetune.lr"] == params.model.head.finetune.lr
    # a whole section comes back as its JSON dump
    assert got["tracking"] == params.tracking.model_dump(mode="json")
    assert got["tracking"] == {"mlflow_uri": "sqlite:///mlflow.db", "experiment": "dprelease"}


def test_pick_empty_and_unknown():
    params = parse_params({})
    assert pick(params, []) == {}
    with pytest.raises(KeyError):
        pick(params, ["ppm.nope"])


def test_active_without_when_is_always_true():
    s = _stage()
    assert s.when is None
    assert s.active(parse_params({})) is True
    assert s.active(parse_params({"ppm": {"reweight": False}})) is True


def test_active_with_when_follows_params():
    s = _stage(when=lambda p: p.ppm.reweight)
    assert s.active(parse_params({"ppm": {"reweight": True}})) is True
    assert s.active(parse_params({"ppm": {"reweight": False}})) is False


def test_stage_is_keyword_only():
    with pytest.raises(TypeError):
        Stage("demo", run_fn, ["seed"], ["in.csv"], ["artifacts/out"])  # noqa - positional: refused


def test_code_is_the_import_closure_of_the_run_module():
    s = _stage(run=data_stages.stratify)
    code = s.code
    assert code == sorted(set(code))
    # its own module, what it imports (and what those import), the package inits, the data it reads
    assert {
        "core/data/stages.py",
        "core/data/records.py",
        "core/data/__init__.py",
        "__init__.py",
        "core/config.py",
        "core/io.py",
        "core/resources/oiics_201_nature.csv",
    } <= set(code)
    # nothing of a mechanism it cannot run: only their params sections (Params is built from them) and inits
    assert not [
        c
        for c in code
        if c.startswith(("mechanisms/swag_ppm/", "mechanisms/gpp/", "mechanisms/nvdp/"))
        and not c.endswith(("/params.py", "/__init__.py"))
    ]
    assert "core/plots.py" not in code


def test_extra_code_adds_paths_and_dot_means_the_whole_package():
    s = _stage(run=data_stages.stratify, extra_code=["core/plots.py"])
    assert "core/plots.py" in s.code and set(_stage(run=data_stages.stratify).code) < set(s.code)
    assert _stage(run=data_stages.stratify, extra_code=["."]).code == ["."]


def test_inputs_are_deps_then_evidence_without_repeats():
    s = _stage(deps=["a", "b"], evidence=["b", "c"])
    assert s.inputs == ["a", "b", "c"]
    assert _stage().inputs == ["in.csv"]


def test_produced_is_outs_metrics_plots_in_order():
    s = _stage(outs=["artifacts/a", "artifacts/b"], metrics=["metrics/m.json"], plots=["plots/p.png"])
    assert s.produced == ["artifacts/a", "artifacts/b", "metrics/m.json", "plots/p.png"]
    assert _stage(outs=[]).produced == []
    assert _stage().group == "release"


def test_module_of_function_and_partial():
    assert _stage().module == __name__
    part = functools.partial(pick, dotted=[])
    assert _stage(run=part).module == "dprelease.contracts.stage"
    assert _stage(run=functools.partial(run_fn)).module == __name__


def test_stage_is_frozen():
    s = _stage()
    with pytest.raises(AttributeError):
        s.name = "other"  # type: ignore[misc]


def test_flat_flattens_keys_to_their_leaves():
    from pydantic import BaseModel

    from dprelease.contracts.stage import flat

    class D(BaseModel):
        e: str = "x"

    class B(BaseModel):
        c: int = 2
        d: D = D()

    class P(BaseModel):
        a: int = 1
        b: B = B()
        f: list[int] = [1, 2]

    assert flat(P(), ["a", "b", "f"]) == {
        "a": 1,
        "b.c": 2,
        "b.d.e": "x",
        "f": [1, 2],
    }
    assert flat(P(), ["b.d", "a"], drop=("a",)) == {"b.d.e": "x"}
