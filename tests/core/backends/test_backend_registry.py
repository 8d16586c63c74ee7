"""The backend registry (BACKENDS / backend_class / make_backend) and each backend's release round trip:
write_release_model → model.json → release_scorer gives the model's own probabilities."""

from __future__ import annotations

import json

import pytest
import torch

from dprelease.core.backends import BACKENDS, backend_class, make_backend
from dprelease.core.backends.base import Backend, get_flat, set_flat
from dprelease.core.backends.encoder import encoder_reference
from dprelease.core.backends.full import FullBackend
from dprelease.core.backends.head import HeadBackend, embed
from dprelease.core.config import HeadParams, parse_params
from dprelease.core.errors import ReleaseError

CPU = torch.device("cpu")

TEXTS = [
    "Employee slipped on a wet floor in the kitchen and fractured her right hip.",
    "A laborer was struck by a swinging crane load and sustained a head injury.",
    "Worker's finger was caught in a press brake, resulting in amputation of the fingertip.",
]


def perturbed(model: torch.nn.Module, seed: int, scale: float) -> torch.nn.Module:
    """Move θ₀ so the release does not just reproduce the seed's initialisation."""
    theta = get_flat(model)
    set_flat(model, theta + scale * torch.randn(theta.numel(), generator=torch.Generator().manual_seed(seed)))
    return model


# registry -------------------------------------------------------------------------------------
def test_backends_are_head_and_full():
    assert set(BACKENDS) == {"head", "full"} and len(BACKENDS) == 2
    assert BACKENDS["head"] is HeadBackend and BACKENDS["full"] is FullBackend
    for name, cls in BACKENDS.items():
        assert issubclass(cls, Backend) and cls.name == name
        assert backend_class(name) is cls


def test_unknown_backend_is_a_one_line_release_error():
    with pytest.raises(ReleaseError) as info:
        backend_class("nope")
    msg = str(info.value)
    assert "\n" not in msg
    assert "'nope'" in msg and "head" in msg and "full" in msg
    assert info.value.__suppress_context__  # no chained KeyError traceback


@pytest.mark.parametrize("name,cls", [("head", HeadBackend), ("full", FullBackend)])
def test_make_backend_takes_everything_from_params(name, cls):
    params = parse_params(
        {
            "seed": 11,
            "features": {"max_length": 24, "batch_size": 5},
            "model": {"backend": name, "device": "cpu", "head": {"hidden": 7, "dropout": 0.25}, "full": {"tiny": True}},
        }
    )
    backend = make_backend(params, 6)
    assert type(backend) is cls
    assert backend.n_classes == 6 and backend.seed == 11 and backend.device == CPU
    assert backend.max_length == 24
    assert backend.params == getattr(params.model, name)
    if name == "head":
        assert backend.params.hidden == 7 and backend.params.dropout == 0.25
        assert backend.batch_size == 5
    else:
        assert backend.params.tiny is True


def test_make_backend_auto_device():
    params = parse_params({"model": {"backend": "head", "device": "auto"}})
    backend = make_backend(params, 3)
    assert backend.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert backend.seed == params.seed == 2025


# release round trips --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def head_release(tmp_path_factory):
    backend = HeadBackend(
        n_classes=4, device=CPU, seed=3, params=HeadParams(hidden=16, dropout=0.3), max_length=32, batch_size=2
    )
    model = perturbed(backend.build_model(384), seed=1, scale=0.2)
    folder = tmp_path_factory.mktemp("head-release")
    arch = backend.write_release_model(model, folder)
    return backend, model, folder, arch


def test_head_release_files_and_arch(head_release):
    backend, model, folder, arch = head_release
    assert (folder / "model.safetensors").is_file()
    on_disk = json.loads((folder / "model.json").read_text())
    assert on_disk == arch
    assert arch["backend"] == "head" and arch["dim"] == 384 and arch["hidden"] == 16
    assert arch["n_classes"] == 4 and arch["max_length"] == 32
    assert arch["encoder"] == encoder_reference()


def test_head_release_scorer_matches_model(head_release):
    backend, model, folder, _ = head_release
    arch = json.loads((folder / "model.json").read_text())
    scorer = backend.release_scorer(folder, arch, CPU)
    probs = scorer(TEXTS)
    assert probs.shape == (3, 4) and probs.dtype == torch.float32 and probs.device.type == "cpu"
    torch.testing.assert_close(probs.sum(1), torch.ones(3))
    x = embed(TEXTS, CPU, max_length=32)
    model.train()  # predict_proba must switch dropout off itself
    expected = backend.predict_proba(model, {"x": x})
    torch.testing.assert_close(probs, expected, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        torch.testing.assert_close(probs, torch.softmax(model.eval()(x), -1), rtol=1e-5, atol=1e-6)
    assert (probs.max(1).values - probs.min(1).values).min() > 1e-3  # not a flat, uninformative output
    # the static method is reachable from the class (predict has no backend instance)
    torch.testing.assert_close(
        HeadBackend.release_scorer(folder, arch, CPU)(TEXTS[:1]), probs[:1], rtol=1e-5, atol=1e-6
    )


def test_head_release_refuses_a_different_encoder(head_release):
    _, _, folder, _ = head_release
    arch = json.loads((folder / "model.json").read_text())
    arch["encoder"]["weights_sha256"] = "0" * 64
    with pytest.raises(ReleaseError, match="encoder"):
        HeadBackend.release_scorer(folder, arch, CPU)
