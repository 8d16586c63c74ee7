"""The public proxy (``proxy:``; docs/frontier.md): reports up to ``proxy.until`` are the proxy, the private sample is
drawn from later reports only; the proxy's splits are written beside the private ones with their coverage of the
private sample; DP-SGD's release then takes the proxy's best configuration of the declared grid (zero ε)."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import DATA, compare_raw, make_root, slice_raw

from dprelease.core.config import parse_params
from dprelease.core.errors import ConfigError, DataError
from dprelease.core.io import read_json
from dprelease.pipeline import registry

UNTIL = "2015-12-31"


def _params(**overrides):  # the slice's DP-SGD grid: batches no larger than its ~24 training records
    return parse_params(
        compare_raw(
            released__mechanism="dpsgd",
            dpsgd__grid__batch_sizes=[0, 8],
            dpsgd__grid__epochs=[2, 4],
            dpsgd__head__hidden=0,
            **overrides,
        )
    )


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    root = make_root(tmp_path_factory.mktemp("proxy"))
    params = _params()
    for name in ("secret", "stratify", "featurize"):
        registry.run_stage(name, params, root)
    return root, params


def test_the_private_sample_comes_from_the_later_period_and_the_proxy_from_the_earlier(proxied):
    root, params = proxied
    source = pd.read_csv(DATA, dtype=str, keep_default_na=False)
    date = pd.to_datetime(source["EventDate"])
    early = set(source.loc[date <= UNTIL, "Final Narrative"].str.strip())
    late = set(source.loc[date > UNTIL, "Final Narrative"].str.strip())
    data = root / params.artifacts / "data"
    private = pd.concat([pd.read_csv(data / f"{s}.csv", dtype=str) for s in ("train", "validation", "test")])
    proxy = pd.concat(
        [pd.read_csv(data / f"{s}.csv", dtype=str) for s in ("proxy_train", "proxy_validation", "public_rest")]
    )
    assert set(private["text"]) <= late and set(proxy["text"]) <= early  # never the other period
    codes = read_json(data / "labels.json")["codes"]
    assert set(proxy["label"]) <= set(codes) and set(private["label"]) <= set(codes)  # the public label space
    assert codes == sorted(params.data.codes, key=int)  # the declared label space, in OIICS order
    summary = read_json(root / "metrics" / "data.json")["public"]
    assert summary["until"] == UNTIL and summary["classes"] == 4
    assert summary["expected_train_size"] == read_json(data / "public.json")["expected_train_size"]
    assert not set(read_json(data / "labels.json")) - {"codes", "titles"}  # no private count in the label map
    assert {"proxy_train.safetensors", "proxy_validation.safetensors", "public_rest.safetensors"} <= {
        p.name for p in (root / params.artifacts / "features").iterdir()
    }


def test_dpsgd_releases_the_proxys_choice(proxied, tmp_path):
    import shutil

    from dprelease.contracts.layout import Layout
    from dprelease.mechanisms.dpsgd.search import configurations, proxy_ranking

    root = tmp_path / "root"
    shutil.copytree(proxied[0], root)
    params = proxied[1]
    lay = Layout.from_params(params, root)
    from dprelease.mechanisms.dpsgd import warm

    sim = warm.simulation_start(params, lay)
    start = (sim.weight, sim.bias)
    ranked = proxy_ranking(params, lay, epsilon=8.0, delta=1e-3, init=start)
    grid = configurations(
        params.dpsgd.grid, n=read_json(root / params.artifacts / "data" / "public.json")["expected_train_size"]
    )
    assert sorted(i for i, _ in ranked) == list(range(len(grid)))  # every configuration scored, best first
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    registry.run_stage("dpsgd_release", params, root)
    registry.run_stage("publish", params, root)
    manifest = read_json(root / params.release / "release.json")
    c = manifest["configuration"]
    assert manifest["tuning"] == "public proxy" and "zero ε" in c["source"] and "public model" in c["source"]
    assert manifest["start"].startswith("the public model")
    n_hat = read_json(root / params.artifacts / "data" / "public.json")["expected_train_size"]
    best = configurations(params.dpsgd.grid, n=n_hat)[
        proxy_ranking(params, lay, epsilon=params.released.epsilon, delta=manifest["guarantee"]["delta"], init=start)[
            0
        ][0]
    ]
    assert (c["epochs"], c["lr"], c["max_grad_norm"], c["optimizer"]) == (
        best["epochs"],
        best["lr"],
        best["max_grad_norm"],
        best["optimizer"],
    )
    assert read_json(root / "metrics" / "released.json")["tuning"] == "public proxy"


def test_a_bad_proxy_date_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="proxy.until: an ISO date"):
        parse_params(slice_raw(proxy__until="end of 2015"))
    root = make_root(tmp_path)
    params = parse_params(slice_raw(proxy__until="2030-01-01"))
    with pytest.raises(DataError, match="every report falls on one side of it"):
        registry.run_stage("stratify", params, root)
