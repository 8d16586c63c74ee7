"""The OSHA setting re-draws exactly the release pipeline's split, and refuses a split it did not draw."""

import shutil

import pandas as pd
import pytest
from conftest import ROOT, make_root, run_stages, slice_raw

from dprelease.core.config import parse_params
from dprelease.core.errors import DataError
from dprelease.mechanisms.gpp.osha import osha_data, pipeline_split


@pytest.fixture(scope="module")
def stratified(tmp_path_factory):
    params = parse_params(slice_raw("head"))
    root = make_root(tmp_path_factory.mktemp("gpp-osha"))
    shutil.copyfile(ROOT / "data/osha_regions.csv", root / "data/osha_regions.csv")
    run_stages(params, root, ["stratify"])
    return params, root


def test_pipeline_split_is_the_stratify_stage_split(stratified):
    params, root = stratified
    train, test = pipeline_split(params, root)
    for split, ours in (("train", train), ("test", test)):
        theirs = pd.read_csv(root / params.artifacts / "data" / f"{split}.csv", dtype=str, keep_default_na=False)
        assert theirs["text"].tolist() == ours["text"].tolist() and theirs["label"].tolist() == ours["label"].tolist()
    assert train["sector"].str.fullmatch(r"\d\d|unknown").all() and train["region"].between(1, 10).all()


def test_a_split_drawn_otherwise_is_refused(stratified, tmp_path):
    params, root = stratified
    other = tmp_path / "root"
    shutil.copytree(root, other)
    path = other / params.artifacts / "data" / "train.csv"
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.iloc[::-1].to_csv(path, index=False)
    with pytest.raises(DataError, match="not the one these params draw"):
        osha_data(params, other)


def test_needs_the_head_backend(stratified):
    params, root = stratified
    with pytest.raises(DataError, match="head backend"):
        osha_data(parse_params(slice_raw("full")), root)
