"""The NVDP sanitizer release: what a partner needs to privatize its own narratives, and nothing private.

A sanitizer folder holds ``model.safetensors`` (the NVIB layer and the denoising block only: no classifier
head, nothing per record), ``model.json`` (architecture, clipping, the public encoder's reference),
``README.md`` (the model card) and ``release.json`` (``"kind": "sanitizer"``, ``"mechanism": "nvdp"``, the
guarantee record and every other file's sha256). The same allow-list and hash checks as the classifier
release (:mod:`dprelease.core.release.check`) run before anything loads. :func:`privatize` encodes texts with the
installed public MiniLM and returns one privatized draw per text: the pooled output of the denoising block,
a function of the draw (z, π) alone, so the draw's guarantee carries over (post-processing).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from dprelease import __version__
from dprelease.core.backends.encoder import encoder_reference
from dprelease.core.errors import ReleaseError
from dprelease.core.io import atomic_dir, write_json
from dprelease.core.release.check import MANIFEST, SANITIZER, check_release_folder, file_digests, verify_release_folder
from dprelease.core.release.signing import Signer, sign_folder
from dprelease.core.untrusted import bounded, fit_state, load_weights, module_shapes
from dprelease.mechanisms.nvdp.datasets import Split
from dprelease.mechanisms.nvdp.experiment import module_from
from dprelease.mechanisms.nvdp.states import Packed, encode
from dprelease.mechanisms.nvdp.train import represent

CARD = "README.md"
MECHANISM = "nvdp"
PUBLIC = ("nvib.", "block.")  # the released tensors' prefixes
BOUNDS = {"dim_in": (1, 4096), "dim": (1, 4096), "heads": (1, 64), "n_classes": (1, 100_000), "max_length": (8, 512)}


def public_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors a partner needs: the NVIB layer and the block (the task head stays home)."""
    return {k: v for k, v in state.items() if k.startswith(PUBLIC)}


def write_sanitizer(
    folder: Path,
    state: dict[str, torch.Tensor],
    arch: dict,
    guarantee: dict,
    card: str,
    extra: dict | None = None,
    *,
    signer: Signer,
) -> dict:
    """Write the sanitizer release whole (atomic), allow-list checked, signed by ``signer``."""
    arch = arch | {"encoder": encoder_reference()}
    with atomic_dir(folder) as tmp:
        save_file({k: v.contiguous() for k, v in public_state(state).items()}, str(tmp / "model.safetensors"))
        write_json(tmp / "model.json", arch)
        (tmp / CARD).write_text(card, encoding="utf-8")
        manifest = {
            "kind": SANITIZER,
            "mechanism": MECHANISM,
            "dprelease_version": __version__,
            "guarantee": guarantee,
            **(extra or {}),
        }
        write_json(tmp / MANIFEST, manifest | {"files": file_digests(tmp)})
        sign_folder(tmp, signer)
        check_release_folder(tmp)
    return manifest


def verify_sanitizer(folder: str | Path) -> tuple[dict, dict]:
    """The shared release checks (:func:`dprelease.core.release.check.verify_release_folder`: manifest, kind and
    mechanism, allow-list, sha256 of every file) with the NVDP architecture: bounded dimensions, the
    installed public encoder, tensor shapes from the weights' header; (manifest, model.json)."""
    return verify_release_folder(folder, kind=SANITIZER, mechanism=MECHANISM, architecture=_shapes)


def _shapes(folder: Path, arch: dict) -> tuple[dict, str]:
    path = folder / "model.json"
    bounded(path, arch, BOUNDS)
    ref, here = arch.get("encoder"), encoder_reference()
    if not isinstance(ref, dict) or ref.get("weights_sha256") != here["weights_sha256"]:
        ref = ref if isinstance(ref, dict) else {}
        raise ReleaseError(
            f"{path}: made with encoder {ref.get('package')} {ref.get('version')}, "
            f"installed is {here['version']} with other weights; install the recorded version"
        )
    try:
        with torch.device("meta"):
            model = module_from(arch)
    except (KeyError, TypeError, ValueError) as e:
        raise ReleaseError(f"{path}: not an NVDP architecture ({type(e).__name__}: {e})") from None
    return {k: v for k, v in module_shapes(path, model).items() if k.startswith(PUBLIC)}, "model.json"


def load_sanitizer(folder: str | Path, device: torch.device = torch.device("cpu")):
    folder = Path(folder)
    manifest, arch = verify_sanitizer(folder)
    model = module_from(arch)
    state = load_weights(folder / "model.safetensors")
    full = model.state_dict()
    fit_state(
        model, {**{k: v for k, v in full.items() if k.startswith("head.")}, **state}, folder / "model.safetensors"
    )
    return manifest, arch, model.to(device).eval()


def privatize(folder: str | Path, texts: list[str], *, seed: int, batch_size: int = 64) -> tuple[np.ndarray, dict]:
    """One privatized draw per text (pooled representation, float32) and the release's manifest."""
    manifest, arch, model = load_sanitizer(folder)
    if not texts:
        return np.zeros((0, int(arch["dim"])), dtype=np.float32), manifest
    split = Split([str(t) for t in texts], None, np.zeros(len(texts), dtype=int))
    packed = encode(split, max_length=int(arch["max_length"]), batch_size=batch_size, device=torch.device("cpu"))
    reps = represent(
        model,
        Packed(packed["states"], packed["offsets"], torch.device("cpu")),
        len(texts),
        seed=seed,
        batch_size=batch_size,
    )
    return reps.astype(np.float32), manifest
