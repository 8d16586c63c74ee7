"""backends.minilm (and head.embed on it): the plain-torch MiniLM gives transformers' ids and hidden states; a
narrative's vector is the same (numpy reference, within 1e-5) whether it is embedded alone or in a sorted, padded
batch with narratives of very different lengths; outputs come back in input order; the encoder loads once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dprelease.core.backends import minilm
from dprelease.core.backends.head import embed

CPU = torch.device("cpu")
TEXTS = [  # very different lengths, not in length order; the last is truncated at 128 tokens
    "An employee was struck in the head by a falling pallet while unloading a trailer at the dock and was "
    "hospitalized with a fractured skull and a concussion.",
    "Cut finger.",
    "A worker fell from a ladder.",
    "While operating a forklift in the warehouse, an employee turned sharply, the load shifted, the forklift "
    "tipped over and pinned the employee's left leg, fracturing the femur; he was taken to the hospital.",
    "Burn.",
    "The employee was cleaning the rollers of a printing press when his glove was caught. " * 12,
]


def _reference(texts: list[str], max_length: int = 128) -> np.ndarray:
    """Each text alone (no padding at all), mean over its tokens and L2-normalised in numpy."""
    enc = minilm.load(CPU)
    out = []
    for ids in minilm.token_ids(texts, max_length):
        with torch.inference_mode():
            hidden = enc(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))[0].double().numpy()
        v = hidden.mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.stack(out)


@pytest.mark.parametrize("batch_size", [1, 2, 4, 64])
def test_sorted_padded_batches_equal_one_at_a_time(batch_size):
    got = embed(TEXTS, CPU, batch_size=batch_size).numpy()
    assert got.shape == (len(TEXTS), 384) and got.dtype == np.float32
    np.testing.assert_allclose(got, _reference(TEXTS), atol=1e-5, rtol=0)  # input order, padding-invariant
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_order_is_the_inputs_and_duplicates_agree():
    texts = TEXTS[::-1] + TEXTS[:2]
    got = embed(texts, CPU, batch_size=3)
    np.testing.assert_allclose(got[: len(TEXTS)].numpy(), embed(TEXTS, CPU).numpy()[::-1], atol=1e-5)
    np.testing.assert_allclose(got[-2:].numpy(), got[len(TEXTS) - 2 : len(TEXTS)].numpy()[::-1], atol=1e-5)


def test_same_ids_and_hidden_states_as_transformers():
    from dprelease.core.backends.encoder import load_encoder, load_tokenizer

    tok, model = load_tokenizer(), load_encoder(CPU)
    for max_length in (16, 128):
        batch = tok(TEXTS, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        ids = minilm.token_ids(TEXTS, max_length)
        assert [row[mask.bool()].tolist() for row, mask in zip(batch["input_ids"], batch["attention_mask"])] == ids
        assert max(map(len, ids)) == min(max_length, batch["input_ids"].shape[1])
        mine, mask = minilm.padded(ids)
        with torch.inference_mode():
            theirs = model(**batch).last_hidden_state
            ours = minilm.load(CPU)(mine, mask)
        real = mask.bool()
        torch.testing.assert_close(ours[real], theirs[real], atol=1e-5, rtol=0)


def test_batches_sort_by_length_and_cover_every_position():
    lengths = [5, 1, 9, 1, 3, 7, 2]
    groups = minilm.batches(lengths, 3)
    assert [len(g) for g in groups] == [3, 3, 1]
    flat = [i for g in groups for i in g]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)
    assert flat[:2] == [1, 3]  # ties keep input order
    assert minilm.batches([], 4) == []


def test_padded_pads_with_zeros_only_to_the_longest():
    ids, mask = minilm.padded([[101, 7, 102], [101, 102]])
    assert ids.tolist() == [[101, 7, 102], [101, 102, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 1, 0]]


def test_encoder_and_tokenizer_load_once():
    assert minilm.load(CPU) is minilm.load(CPU)
    assert minilm.tokenizer(128) is minilm.tokenizer(128)
    assert minilm.tokenizer(16) is not minilm.tokenizer(128)  # one per length: never re-configured under a thread


def test_every_file_tensor_has_a_place():
    from safetensors import safe_open

    from dprelease.core.architecture import encoder_dir

    with safe_open(str(encoder_dir() / "model.safetensors"), "pt") as f:
        names = {n: f.get_slice(n) for n in f.keys()}
    state = minilm._state({n: torch.empty(0) for n in names})
    assert set(state) == set(
        minilm.MiniLM(minilm._config()).state_dict()
    )  # strict load: nothing missing, nothing extra


def test_an_unsupported_config_is_refused(monkeypatch):
    monkeypatch.setattr(minilm, "SUPPORTED", minilm.SUPPORTED | {"hidden_act": "relu"})
    with pytest.raises(RuntimeError, match="hidden_act"):
        minilm._config()


def test_empty_input_gives_an_empty_matrix():
    assert embed([], CPU).shape == (0, 384)
