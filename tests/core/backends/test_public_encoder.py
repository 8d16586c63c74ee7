"""The public encoder (core/backends/public_encoder.py, docs/encoder.md): the shipped fine-tuned layers are what the
recipe makes from the project's public corpus (the corpus's content ids and a re-run of the recipe on a slice),
they replace exactly the declared top layers of the wheel's encoder, the corpus reads no private report, and a
configuration whose private period would include the corpus is refused in one line."""

from __future__ import annotations

import math
import shutil
from dataclasses import asdict

import pandas as pd
import pytest
import torch

from dprelease.core.backends import minilm
from dprelease.core.backends import public_encoder as pe
from dprelease.core.backends.encoder import encoder_reference
from dprelease.core.backends.head import embed
from dprelease.core.config import load_params
from dprelease.core.data.public_corpus import corpus
from dprelease.core.encoder_recipe import WEIGHTS, recipe
from dprelease.core.io import file_hash
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def project_corpus():
    return corpus(load_params(ROOT / "params.yaml"), ROOT)


def test_the_shipped_corpus_is_this_projects_public_corpus(project_corpus):
    texts, labels, meta = project_corpus
    shipped = recipe()["corpus"]
    assert meta == shipped  # the same reports (sha256 over their content ids), period, label space and parts
    assert len(texts) == len(labels) == shipped["reports"] and max(labels) < shipped["classes"]


def test_the_recipe_reproduces_the_shipped_slice_check(project_corpus):
    """The recipe's code is the one that made the shipped layers: re-run on the recorded slice (the corpus's first
    reports, smaller batches), it moves the layers by the recorded amount (float32 on any CPU: 1e-3 relative)."""
    texts, labels, meta = project_corpus
    shipped = recipe()
    check, settings = shipped["slice_check"], pe.Recipe(**shipped["recipe"])
    n = check["reports"]
    layers = pe.tune(
        texts[:n],
        labels[:n],
        n_classes=meta["classes"],
        recipe=pe.Recipe(**(asdict(settings) | {"batch_size": check["batch_size"]})),
    )
    got = pe.slice_fingerprint(layers)
    assert math.isclose(got["moved_l2"], check["moved_l2"], rel_tol=1e-3), (got, check)
    assert math.isclose(got["norm_l2"], check["norm_l2"], rel_tol=1e-4), (got, check)
    # and another seed moves them elsewhere: the check can fail
    other = pe.tune(
        texts[:n],
        labels[:n],
        n_classes=meta["classes"],
        recipe=pe.Recipe(**(asdict(settings) | {"batch_size": check["batch_size"], "seed": 1})),
    )
    assert not math.isclose(pe.slice_fingerprint(other)["moved_l2"], check["moved_l2"], rel_tol=1e-3)


def test_the_shipped_layers_replace_exactly_the_top_layers():
    shipped = recipe()
    assert file_hash(WEIGHTS) == shipped["weights_sha256"]
    base, tuned = minilm.build(tuned=False).state_dict(), minilm.build(tuned=True).state_dict()
    changed = {k for k in base if not torch.equal(base[k], tuned[k])}
    top = {f"layers.{i}." for i in shipped["changed_layers"]}
    assert changed and all(k.startswith(tuple(top)) for k in changed)
    assert len(shipped["changed_layers"]) == shipped["recipe"]["layers"]
    assert all(i >= 6 - shipped["recipe"]["layers"] for i in shipped["changed_layers"])
    x = embed(["caught his hand in a conveyor belt", "fell from a ladder"], torch.device("cpu"), encoder="public_tuned")
    y = embed(["caught his hand in a conveyor belt", "fell from a ladder"], torch.device("cpu"))
    assert x.shape == y.shape and not torch.allclose(x, y, atol=1e-3)
    torch.testing.assert_close(x.norm(dim=1), torch.ones(2))


def test_a_release_records_which_encoder_embeds():
    assert "public_tuning" not in encoder_reference()
    ref = encoder_reference("public_tuned")
    assert ref["public_tuning"]["weights_sha256"] == recipe()["weights_sha256"]
    assert "2015-12-31" in ref["public_tuning"]["corpus"]
    with pytest.raises(ValueError, match="encoder 'other'"):
        embed(["x"], torch.device("cpu"), encoder="other")


def test_the_corpus_reads_no_private_report(tmp_path, project_corpus):
    """A private-period report changed and another removed (neighbouring extracts): the same corpus."""
    frame = pd.read_csv(ROOT / "data/osha_sir_2015_2016.csv.gz", dtype=str, keep_default_na=False)
    late = frame.index[pd.to_datetime(frame["EventDate"]) > pd.Timestamp("2015-12-31")]
    frame.loc[late[0], "Final Narrative"] = "A report the encoder must never read."
    frame = frame.drop(index=late[1])
    (tmp_path / "data").mkdir()
    frame.to_csv(tmp_path / "data/osha_sir_2015_2016.csv.gz", index=False)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    assert corpus(load_params(tmp_path / "params.yaml"), tmp_path) == project_corpus


def test_the_shipped_public_features_are_the_tuned_encoders_embeddings(project_corpus):
    """The table of the public period's embeddings holds what the shipped encoder computes (fp16), for every
    narrative of the corpus; a narrative it lacks is embedded, in input order; another window uses no table."""
    texts, _, _ = project_corpus
    sample = [texts[i] for i in range(0, len(texts), len(texts) // 12)][:12]
    computed = embed(sample, torch.device("cpu"), encoder="public_tuned")
    calls = []

    def fresh(batch):
        calls.append(list(batch))
        return embed(batch, torch.device("cpu"), encoder="public_tuned")

    got, hits = pe.public_features(sample, fresh, max_length=128)
    assert hits == len(sample) and not calls
    torch.testing.assert_close(got, computed, atol=2e-3, rtol=0)  # fp16 rounding of unit vectors
    new = "a forklift ran over the employee's foot, fracturing two toes"
    got, hits = pe.public_features([sample[0], new, sample[1]], fresh, max_length=128)
    assert hits == 2 and calls == [[new]]
    torch.testing.assert_close(got[1], fresh([new])[0].half().float())
    torch.testing.assert_close(got[[0, 2]], computed[:2], atol=2e-3, rtol=0)
    _, hits = pe.public_features(sample[:2], fresh, max_length=64)
    assert hits == 0
