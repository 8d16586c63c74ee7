"""nvdp/datasets.py: the GLUE task loaders, GLUE files as shipped, OSHA = the release pipeline's split, the sector attribute."""

from pathlib import Path

import pandas as pd

from dprelease.core.data.sectors import UNKNOWN
from dprelease.core.data.stages import stratify
from dprelease.mechanisms.nvdp.datasets import glue_task, osha_task
from tests.conftest import ROOT, make_root
from tests.mechanisms.nvdp.conftest import nvdp_params


def test_glue_files_load_with_the_canonical_sizes():
    glue = ROOT / "data" / "glue"
    tr, dev, classes = glue_task(glue, "mrpc", max_train=None, seed=0)
    assert (len(tr), len(dev), classes) == (3668, 408, ["0", "1"]) and tr.text_b is not None
    tr, dev, classes = glue_task(glue, "rte", max_train=None, seed=0)
    assert (len(tr), len(dev)) == (2490, 277) and classes == ["entailment", "not_entailment"]
    tr, dev, _ = glue_task(glue, "sst2", max_train=500, seed=1)
    assert (len(tr), len(dev)) == (500, 872) and tr.text_b is None
    again, _, _ = glue_task(glue, "sst2", max_train=500, seed=1)
    assert again.text_a == tr.text_a


def test_osha_split_is_the_release_split(tmp_path):
    params = nvdp_params()
    root = make_root(tmp_path)
    train, test, codes = osha_task(params, root)
    stratify(params, root)
    ref_train = pd.read_csv(root / params.artifacts / "data" / "train.csv", dtype=str, keep_default_na=False)
    ref_test = pd.read_csv(root / params.artifacts / "data" / "test.csv", dtype=str, keep_default_na=False)
    assert train.text_a == ref_train.text.tolist() and test.text_a == ref_test.text.tolist()
    assert [codes[i] for i in train.labels] == ref_train.label.tolist()
    assert len(train.attribute) == len(train) and all(len(s) == 2 or s == UNKNOWN for s in train.attribute)
    assert Path(root / params.data.path).is_file()
