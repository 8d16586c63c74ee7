"""The GPP sanitizer release: the fitted OSHA encoder (narrative → MiniLM embedding → one Gaussian draw
z) with its model card, and :func:`sanitize_texts`, which applies it to new narratives.

The folder follows the sanitizer contract shared with NVDP: ``release.json`` (``"kind": "sanitizer"``,
``"mechanism": "gpp"``, public config, the audit's aggregate figures, the sha256 of every other file),
``model.json`` (architecture + the public encoder reference), ``model.safetensors`` and ``README.md``;
the release allow-list (:mod:`dprelease.core.release.check`) is enforced on write and on read. No DP ε is
claimed: the guarantee is empirical (the probe) plus S003's mutual-information statement.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors.torch import save_file

from dprelease import __version__
from dprelease.contracts.source import code_hash
from dprelease.core.backends.encoder import encoder_reference
from dprelease.core.config import Params
from dprelease.core.errors import ReleaseError
from dprelease.core.io import atomic_dir, read_json, skip_marker, write_json
from dprelease.core.privacy.guarantee import Guarantee, empirical_probe
from dprelease.core.release.check import MANIFEST, check_release_folder, file_digests, verify_release_folder
from dprelease.core.release.check import SANITIZER as KIND
from dprelease.core.release.path import check_release_path
from dprelease.core.release.signing import agency_signer, sign_folder
from dprelease.core.untrusted import bounded, fit_state, load_weights, module_shapes
from dprelease.mechanisms.gpp.model import Encoder
from dprelease.mechanisms.gpp.train import TrainConfig

MECHANISM = "gpp"
BOUNDS = {"d_in": (1, 4096), "d_z": (1, 4096)}
GUARANTEE = (
    "empirical: no differential-privacy epsilon is claimed. A fresh probe (MLP 256-128) trained on "
    "sanitized training representations predicts the industry sector from sanitized test "
    "representations with the adversary AUC recorded here; S003 Prop. 2 bounds leakage by "
    "I(Z;S) + I(U;S|Z) only under its assumptions (independent clients, honest-but-curious "
    "aggregator, a training adversary as strong as any attacker)."
)


def save_encoder(folder: Path, encoder: Encoder, *, d_in: int, config: TrainConfig) -> None:
    """The fitted encoder and its architecture, into a (private) artifacts folder."""
    save_file({k: v.contiguous() for k, v in encoder.state_dict().items()}, str(folder / "model.safetensors"))
    write_json(
        folder / "model.json",
        {"mechanism": MECHANISM, "d_in": d_in, "d_z": config.d_z, "hidden": list(config.encoder_hidden)},
    )


def _build(arch: dict, path: Path) -> Encoder:
    dims = bounded(path, arch, BOUNDS)
    hidden = arch.get("hidden")
    if (
        not isinstance(hidden, list)
        or not 1 <= len(hidden) <= 8
        or not all(isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= 16384 for h in hidden)
    ):
        raise ReleaseError(f"{path}: hidden must be a list of 1 to 8 integers in [1, 16384]")
    with torch.device("meta"):
        return Encoder(dims["d_in"], dims["d_z"], tuple(hidden))


def card(params: Params, manifest: dict) -> str:
    a = manifest["audit"]
    return "\n".join(
        [
            "# GPP sanitizer release (Gaussian Privacy Protector, S003)",
            "",
            "Turns an injury narrative into a sanitized representation z (one Gaussian draw per narrative) meant",
            "to keep the injury's Nature code predictable and the establishment's industry sector hidden.",
            "",
            "## Guarantee",
            "",
            "**No differential-privacy ε.** The guarantee is empirical: a fresh probe (MLP 256-128) trained on",
            "sanitized training representations and tested on sanitized held-out representations reached",
            f"industry-sector AUC {a['adversary_auc']:.3f} (0.5 = chance; the deterministic No-Privacy encoder's",
            f"probe reached {a['noprivacy_adversary_auc']:.3f}). A stronger or differently built attacker may do",
            "better. S003's mutual-information statement (Prop. 2) bounds leakage by I(Z;S) + I(U;S|Z) only under",
            "its assumptions; it is not a worst-case bound. Releasing the Nature code with z discloses what the",
            "code itself says about the industry.",
            "",
            "## What no guarantee covers",
            "",
            "The encoder in this folder was trained WITHOUT any privacy guarantee on the confidential narratives, their",
            "Nature codes and their establishments' industry sectors (the adversary head's labels). Its weights may",
            "carry information about those training records; neither the probe above nor S003's statement says",
            "anything about what the weights themselves reveal about them.",
            "",
            "## Utility",
            "",
            f"Nature-code probe on z: AUC {a['utility_auc']:.3f}, top-1 accuracy {a['utility_accuracy']:.3f}",
            f"(No-Privacy: AUC {a['noprivacy_utility_auc']:.3f}, accuracy {a['noprivacy_utility_accuracy']:.3f}).",
            "",
            "## Model",
            "",
            f"Input: the public MiniLM-L6 sentence embedding ({manifest['input']['package']} "
            f"{manifest['input']['version']}); encoder MLP {manifest['config']['encoder_hidden']} → (μ, log σ²) of",
            f"dimension {manifest['config']['d_z']}; β = {manifest['config']['beta']}, λ = {manifest['config']['lam']},",
            f"k = {manifest['config']['k']}, {manifest['config']['epochs']} epochs. Trained on the OSHA Severe Injury",
            "Reports split of this project. Each call draws fresh noise: keep one draw per record.",
            "",
            "This folder holds the encoder only (no narratives, labels, representations or losses), but see",
            '"What no guarantee covers": the encoder\'s weights are themselves a function of the private training data.',
            "",
        ]
    )


def write_sanitizer_release(params: Params, root: str | Path, source: Path, *, code: list[str]) -> dict:
    folder = check_release_path(params, root, params.gpp.release)
    if (source / "skipped.json").is_file():  # DVC runs every stage: leave a marker, release nothing
        return skip_marker(folder, "gpp.osha.enabled is false: no OSHA encoder was fitted")
    metrics = read_json(Path(root) / "metrics" / "gpp_osha.json")
    rows = {(r["method"], r["experiment"], r["setting"]): r for r in metrics["rows"]}
    gpp, nop = rows[("gpp", "baseline", "centralized")], rows[("noprivacy", "baseline", "centralized")]
    arch = read_json(source / "model.json")
    g = params.gpp
    audit = {k: gpp[k] for k in ("utility_auc", "utility_accuracy", "adversary_auc")} | {
        f"noprivacy_{k}": nop[k] for k in ("utility_auc", "utility_accuracy", "adversary_auc")
    }
    manifest = {
        "kind": KIND,
        "mechanism": MECHANISM,
        "guarantee": guarantee(audit),
        "audit": audit,
        "input": encoder_reference(),
        "config": {
            "d_z": arch["d_z"],
            "encoder_hidden": arch["hidden"],
            "beta": g.beta,
            "lam": g.lam,
            "k": g.k,
            "epochs": g.epochs,
            "sensitive": "industry sector (NAICS 2-digit)",
            "utility": "OIICS Nature code",
        },
        "code_version": f"{__version__}+{code_hash(code)[:16]}",
    }
    with atomic_dir(folder) as tmp:
        (tmp / "model.safetensors").write_bytes((source / "model.safetensors").read_bytes())
        write_json(tmp / "model.json", arch)
        (tmp / "README.md").write_text(card(params, manifest), encoding="utf-8")
        write_json(tmp / MANIFEST, manifest | {"files": file_digests(tmp)})
        sign_folder(tmp, agency_signer(params, root))
        check_release_folder(tmp)
    return {"release": str(Path(params.gpp.release)), **audit}


def guarantee(audit: dict) -> dict:
    """The release's guarantee record (:class:`dprelease.core.privacy.guarantee.Guarantee`, kind ``empirical_probe``)."""
    return empirical_probe(
        "GPP", audit["adversary_auc"], statement=GUARANTEE, noprivacy_adversary_auc=audit["noprivacy_adversary_auc"]
    ).as_dict()


def public_meta(g: dict) -> dict:
    """What ``dprelease sanitize`` writes into the output's metadata from the release's guarantee record."""
    record = Guarantee.from_dict(g)
    return {
        "epsilon": record.epsilon,
        "delta": record.delta,
        "guarantee": record.kind,
        "mechanism": record.mechanism,
        "meaning": f"{record.meaning}: {record.delta_text}",
        "adversary_auc": record.quantities["adversary_auc"],
        "statement": record.quantities["statement"],
        "draws_per_input": 1,
    }


def load_sanitizer(folder: Path) -> tuple[dict, Encoder]:
    """A verified GPP sanitizer release: the shared release checks (:func:`dprelease.core.release.check.
    verify_release_folder`: manifest, kind and mechanism, allow-list, sha256 of every file, tensor shapes
    from the header against the bounded architecture), the public encoder reference, then finite weights."""
    manifest, arch = verify_release_folder(folder, kind=KIND, mechanism=MECHANISM, architecture=_shapes)
    reference = encoder_reference()
    recorded = manifest.get("input")
    if not isinstance(recorded, dict) or recorded.get("weights_sha256") != reference["weights_sha256"]:
        raise ReleaseError(
            f"{folder / MANIFEST}: made with a different public encoder than the installed "
            f"{reference['package']} {reference['version']}"
        )
    enc = _build(arch, folder / "model.json").to_empty(device="cpu")
    weights = folder / "model.safetensors"
    fit_state(enc, load_weights(weights), weights)
    return manifest, enc.eval()


def _shapes(folder: Path, arch: dict) -> tuple[dict, str]:
    path = folder / "model.json"
    return module_shapes(path, _build(arch, path)), "model.json"


def sanitize_texts(folder: Path, texts: list[str], *, seed: int) -> tuple[pd.DataFrame, dict]:
    """One sanitized draw per text (column ``z``: a list of d_z floats), and the public guarantee."""
    from dprelease.core.backends.head import embed

    manifest, enc = load_sanitizer(folder)
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ReleaseError("sanitize: texts must be a list of strings")
    gen = torch.Generator().manual_seed(seed)
    if texts:
        x = embed(texts, torch.device("cpu"))
        with torch.no_grad():
            z = enc.release(x, gen).numpy().astype(np.float32)
    else:
        z = np.zeros((0, manifest["config"]["d_z"]), np.float32)
    return pd.DataFrame({"z": [row.tolist() for row in z]}), public_meta(manifest["guarantee"])
