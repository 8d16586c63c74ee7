"""Neighbours stay neighbours (docs/guarantees.md, "The boundary"): the real stages — stratify, featurize, the
DP-SGD release and publish — run on extracts that differ by ONE report. The mechanism's training set differs by at
most that report, the public label map and the proxy's splits are byte-identical, the configuration chosen on the
public proxy is identical, and the release record differs only in the weights, the noised figures and the ids.

The extract: a small copy of the bundled data (two large codes capped by their public rates, mid-size codes, a code
with exactly two private reports) so that the six neighbours run in about a minute."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import DATA, compare_raw, install_test_key

from dprelease.core.config import parse_params
from dprelease.pipeline import registry

UNTIL = pd.Timestamp("2015-12-31")


def _source() -> pd.DataFrame:
    df = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    df["_date"] = pd.to_datetime(df["EventDate"])
    return df


def _extract(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """A few codes of the bundled data; which code plays which part is chosen from the data's own counts."""
    pub, priv = df[df["_date"] <= UNTIL], df[df["_date"] > UNTIL]
    pc, qc = pub["Nature"].value_counts(), priv["Nature"].value_counts()
    large = list(pc.index[:2])
    mid = [c for c in pc.index if 15 <= pc[c] <= 40 and 15 <= qc.get(c, 0) <= 40][:2]
    two = next(c for c in pc.index if pc[c] >= 3 and qc.get(c, 0) == 2)
    once = next(
        c
        for c in df["Nature"].value_counts().index[::-1]
        if (df["Nature"] == c).sum() == 1 and c not in large + mid + [two]
    )
    parts = [pub[pub["Nature"] == c].head(60) for c in large] + [priv[priv["Nature"] == c].head(60) for c in large]
    parts += [df[df["Nature"] == c] for c in [*mid, two, once]]
    out = pd.concat(parts).sort_values(["_date", "row"]).reset_index(drop=True)
    return out, {"large": large[0], "mid": mid[0], "two": two, "once": once}


def _write(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = frame.drop(columns="_date").to_csv(index=False)
    path.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))


def _params():
    return parse_params(
        compare_raw(
            released__mechanism="dpsgd",
            data__limit_classes=None,
            data__codes=None,
            data__cap=12,
            proxy__rest_rate=1.0,
            dpsgd__grid__batch_sizes=[0],
            dpsgd__grid__epochs=[2, 4],
            dpsgd__grid__max_grad_norms=[0.1],
            dpsgd__grid__sgd_lrs=[20.0],
            dpsgd__grid__adamw_lrs=[0.03],
            dpsgd__head__hidden=0,
        )
    )


def _run(root: Path, frame: pd.DataFrame) -> Path:
    install_test_key(root)
    _write(frame, root / "data" / "sir.csv.gz")
    params = _params()
    for name in ("secret", "stratify", "featurize", "dpsgd_release", "publish"):
        registry.run_stage(name, params, root)
    return root


def _rows(root: Path, split: str) -> Counter:
    frame = pd.read_csv(root / "artifacts" / "data" / f"{split}.csv", dtype=str, keep_default_na=False)
    return Counter(zip(frame["text"], frame["label"]))


def _release(root: Path) -> dict:
    return json.loads((root / "release" / "release.json").read_text(encoding="utf-8"))


# the fields a release record may change between neighbours: the weights' digests, the noised figures, the ids
VARIES = {"files", "test_f1", "signature", "signed_by", "signed_at", "created"}


@pytest.fixture(scope="module")
def extracts(tmp_path_factory):
    source = _source()
    base, roles = _extract(source)
    base_root = _run(tmp_path_factory.mktemp("base"), base)
    test = pd.read_csv(base_root / "artifacts" / "data" / "test.csv", dtype=str, keep_default_na=False)
    private = base[base["_date"] > UNTIL]
    in_test = private[private["Final Narrative"].str.strip().isin(set(test["text"]))].iloc[0]

    def removal(code: str) -> pd.DataFrame:
        row = private[private["Nature"] == code].index[0]
        return base.drop(index=row)

    def addition(code: str) -> pd.DataFrame:
        new = private.iloc[[0]].copy()
        new["Nature"] = code
        new["Final Narrative"] = f"Employee was injured while handling a pallet (added report, code {code})."
        return pd.concat([base, new]).reset_index(drop=True)

    cases = {
        "remove from a large code": removal(roles["large"]),
        "remove from a mid-size code": removal(roles["mid"]),
        "remove from a two-report code": removal(roles["two"]),
        "remove a test report": base.drop(index=in_test.name),
        "add to a one-report code": addition(roles["once"]),
        "add a code the data never had": addition("9999"),
    }
    runs = {name: _run(tmp_path_factory.mktemp(f"n{i}"), frame) for i, (name, frame) in enumerate(cases.items())}
    return base_root, runs


CASES = [
    "remove from a large code",
    "remove from a mid-size code",
    "remove from a two-report code",
    "remove a test report",
    "add to a one-report code",
    "add a code the data never had",
]


@pytest.mark.parametrize("case", CASES)
def test_the_training_set_differs_by_at_most_the_one_report(extracts, case):
    base, other = extracts[0], extracts[1][case]
    a, b = _rows(base, "train"), _rows(other, "train")
    assert sum(((a - b) + (b - a)).values()) <= 1
    for split in ("test", "validation"):  # every other role too
        a, b = _rows(base, split), _rows(other, split)
        assert sum(((a - b) + (b - a)).values()) <= 1


@pytest.mark.parametrize("case", CASES)
def test_public_outputs_are_byte_identical(extracts, case):
    base, other = extracts[0], extracts[1][case]
    for name in ("labels.json", "public.json", "proxy_train.csv", "proxy_validation.csv", "public_rest.csv"):
        assert (base / "artifacts" / "data" / name).read_bytes() == (other / "artifacts" / "data" / name).read_bytes()
    assert (base / "release" / "labels.json").read_bytes() == (other / "release" / "labels.json").read_bytes()


@pytest.mark.parametrize("case", CASES)
def test_the_release_record_differs_only_in_weights_noised_figures_and_ids(extracts, case):
    a, b = _release(extracts[0]), _release(extracts[1][case])
    assert a["configuration"] == b["configuration"] and a["tuning"] == b["tuning"]
    assert a["guarantee"] == b["guarantee"]  # ε, δ, σ, steps, q: public inputs only
    assert a["training"] == b["training"]
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} <= VARIES
    assert a["test_f1"].keys() == b["test_f1"].keys()
    assert "records" not in b["training"] and not any(n in json.dumps(b) for n in ("train_rows", "test_rows"))


def test_no_private_count_reaches_the_release(extracts):
    base = extracts[0]
    release = (base / "release" / "release.json").read_text(encoding="utf-8")
    card = (base / "release" / "README.md").read_text(encoding="utf-8")
    data = json.loads((base / "metrics" / "data.json").read_text(encoding="utf-8"))
    for private in (data["train_rows"], data["test_rows"], data["source_rows"]):
        assert f'"records": {private}' not in release and f"{private} training records" not in card
    assert "## What the guarantee covers" in card and "one report of the agency's extract" in card


def test_a_reports_role_does_not_depend_on_its_position(tmp_path):
    from dprelease.core.data import roles

    frame = pd.DataFrame(
        {"text": ["a", "b", "c", "d"], "label": ["1", "1", "2", "2"], "date": pd.to_datetime(["2016-01-01"] * 4)}
    )
    ids = roles.report_ids(frame)
    shuffled = roles.report_ids(frame.iloc[[2, 0, 3, 1]])
    assert dict(zip(frame["text"], ids)) == dict(zip(frame["text"].iloc[[2, 0, 3, 1]], shuffled))
    u = roles.public_uniforms(ids, seed=1, purpose="t")
    r = roles.assign(u, frame["label"].tolist(), rates={"1": 1.0, "2": 1.0}, shares=(0.5, 0.2, 0.3))
    r2 = roles.assign(u[1:], frame["label"].tolist()[1:], rates={"1": 1.0, "2": 1.0}, shares=(0.5, 0.2, 0.3))
    assert list(r[1:]) == list(r2)  # removing a report leaves every other role as it was
    assert roles.assign(u, ["9", "9", "9", "9"], rates={"1": 1.0}, shares=(0.5, 0.2, 0.3)).tolist() == ["unused"] * 4
