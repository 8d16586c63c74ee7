"""`full` backend: θ = every transformer parameter, fine-tuned end to end (the paper's setting).

Meant for GPU workers. With ``tiny: true`` the model is a randomly initialised one-layer transformer
built from the MiniLM config and tokenizer, which is how the path is exercised on CPU.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from dprelease.core.backends import full_curvature
from dprelease.core.backends.base import (
    Backend,
    Features,
    eval_autocast,
    length_sorted_batches,
    n_records,
    save_state,
    set_flat,
    trainable,
)
from dprelease.core.backends.encoder import encoder_dir, encoder_reference, load_tokenizer
from dprelease.core.errors import ReleaseError
from dprelease.core.untrusted import BOUNDS, bounded, fit_state, load_weights, module_shapes, read_json_object

if TYPE_CHECKING:  # the typed config (pydantic) is not needed to load a release
    from dprelease.core.config import FullParams

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
TINY = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}
# Records per evaluation forward pass (per-record CE over draws, predict_proba) when the caller gives none:
# large on a GPU (MiniLM at 128 tokens, bf16: a few GiB of activations at 512), small elsewhere.
EVAL_BATCH = {"cuda": 512}
EVAL_BATCH_DEFAULT = 64
EVAL_BATCH_ENV = "DPRELEASE_FULL_EVAL_BATCH"  # overrides the default (a worker's deployment knob)
AMP_ENV = "DPRELEASE_FULL_AMP"  # "0": no bf16 autocast on CUDA either


class SequenceClassifier(nn.Module):
    """HF BERT classifier called with explicit ``position_ids`` and ``token_type_ids`` (Opacus needs them)."""

    def __init__(self, hf_model: nn.Module) -> None:
        super().__init__()
        self.model = hf_model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if input_ids.shape[0] == 0:
            return self._no_rows(input_ids)
        width = int(attention_mask.sum(1).max()) if attention_mask.numel() else 1  # drop all-padding columns
        # contiguous: Opacus's per-sample embedding norms call .view() on these
        input_ids, attention_mask = input_ids[:, :width].contiguous(), attention_mask[:, :width].contiguous()
        position_ids = torch.arange(width, device=input_ids.device).expand_as(input_ids).contiguous()
        token_type_ids = torch.zeros_like(input_ids)
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, token_type_ids=token_type_ids
        ).logits

    def _no_rows(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[0, C] logits for an empty batch (e.g. an empty Poisson batch of DP-SGD). The HF encoder cannot run
        0 rows (its attention reshapes with -1), so one all-padding placeholder row runs through every layer
        and is sliced away: the output stays attached to every parameter (backward gives exactly zero
        gradients, per-sample hooks see one zero-gradient sample: the same step as an empty batch)."""
        ids = torch.full((1, 1), self.model.config.pad_token_id or 0, dtype=input_ids.dtype, device=input_ids.device)
        mask = torch.ones_like(ids)
        logits = self.model(
            input_ids=ids, attention_mask=mask, position_ids=torch.zeros_like(ids), token_type_ids=torch.zeros_like(ids)
        ).logits
        return logits[:0]


def build_config(n_classes: int, tiny: bool):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(encoder_dir()), local_files_only=True, num_labels=n_classes)
    if tiny:
        for key, value in TINY.items():
            setattr(config, key, value)
    return config


class FullBackend(Backend):
    name = "full"

    def __init__(
        self,
        n_classes: int,
        device: torch.device,
        seed: int,
        params: FullParams,
        max_length: int = 128,
        batch_size: int = 64,
        *,
        eval_batch_size: int | None = None,
        amp: bool | None = None,
    ) -> None:
        """``eval_batch_size``: records per evaluation forward pass (None: ``$DPRELEASE_FULL_EVAL_BATCH``, else
        512 on CUDA and 64 elsewhere). ``amp``: bf16 autocast of evaluation passes, CUDA only (None:
        on unless ``$DPRELEASE_FULL_AMP`` is "0"); training and curvature always run in float32."""
        super().__init__(n_classes, device, seed)
        self.params = params
        self.max_length = max_length
        env = os.environ.get(EVAL_BATCH_ENV)
        self.eval_batch_size = int(
            eval_batch_size or (env and int(env)) or EVAL_BATCH.get(self.device.type, EVAL_BATCH_DEFAULT)
        )
        if self.eval_batch_size < 1:
            raise ValueError(f"eval batch size must be >= 1, got {self.eval_batch_size}")
        self.amp = (os.environ.get(AMP_ENV, "1") != "0") if amp is None else bool(amp)

    def featurize(self, texts: list[str], progress: bool = False) -> Features:
        enc = load_tokenizer()(
            texts, padding="longest", truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        return {"input_ids": enc["input_ids"].to(torch.int32), "attention_mask": enc["attention_mask"].to(torch.int8)}

    @staticmethod
    def forward(model: nn.Module, batch: Features) -> torch.Tensor:
        return model(batch["input_ids"].long(), batch["attention_mask"].long())

    # evaluation passes (fast path; the base class's one-draw, one-batch-at-a-time loop is the reference) ------
    def autocast(self):
        """bf16 autocast on CUDA when ``amp`` (eval passes only), else a no-op: CPU stays float32."""
        return eval_autocast(self.device, self.amp)

    @torch.no_grad()
    def per_record_ce(
        self,
        model: nn.Module,
        thetas: torch.Tensor,
        features: Features,
        labels: torch.Tensor,
        batch_size: int | None = None,
    ) -> torch.Tensor:
        """[S, n] cross-entropy (float32, CPU) as :meth:`Backend.per_record_ce`, fast: the records are moved to the
        device once per call in length-sorted batches of ``eval_batch_size``, each draw (``thetas`` may stay on
        the device, where the passes generate them) is loaded in place, the forward runs under
        :meth:`autocast`, the logits are upcast to float32 before the cross-entropy, and the [S, n] result
        stays on the device until its one copy to the host."""
        model.eval()
        n = n_records(features)
        plan = length_sorted_batches(features, batch_size or self.eval_batch_size, self.device)
        y = labels.to(self.device)
        out = torch.empty(thetas.shape[0], n, device=self.device, dtype=torch.float32)
        for s, theta in enumerate(thetas):
            set_flat(model, theta)
            for idx, batch in plan:
                with self.autocast():
                    logits = self.forward(model, batch)
                out[s, idx] = F.cross_entropy(logits.float(), y[idx], reduction="none")
        return out.cpu()

    @torch.no_grad()
    def predict_proba(self, model: nn.Module, features: Features, batch_size: int | None = None) -> torch.Tensor:
        """[n, C] class probabilities (float32, CPU) in length-sorted batches under :meth:`autocast`, softmax in
        float32, one host copy."""
        model.eval()
        n = n_records(features)
        out = torch.empty(n, self.n_classes, device=self.device, dtype=torch.float32)
        for idx, batch in length_sorted_batches(features, batch_size or self.eval_batch_size, self.device):
            with self.autocast():
                logits = self.forward(model, batch)
            out[idx] = torch.softmax(logits.float(), -1)
        return out.cpu()

    # curvature on the device (backends/curvature.py dispatches here; equal to its autograd reference) --------
    def ggn_diagonal(
        self, model, theta, features, weights, *, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        return full_curvature.ggn_diagonal(model, theta, features, weights, generator=generator)

    def ggn_subspace(self, model, theta, features, weights, basis) -> torch.Tensor:
        return full_curvature.ggn_subspace(model, theta, features, weights, basis)

    def ggn_operator(self, model, theta, features, weights):
        return full_curvature.ggn_operator(model, theta, features, weights)

    def gradient_noise(self, model, theta, features, labels, weights) -> tuple[float, float]:
        return full_curvature.gradient_noise(model, theta, features, labels, weights)

    def build_model(self, feature_dim: int | None = None, *, seed: int | None = None) -> nn.Module:
        from transformers import AutoModelForSequenceClassification

        torch.manual_seed(self.seed if seed is None else seed)  # the classification head's initialisation
        config = build_config(self.n_classes, self.params.tiny)
        if self.params.tiny:
            hf = AutoModelForSequenceClassification.from_config(config)
        else:
            hf = AutoModelForSequenceClassification.from_pretrained(
                str(encoder_dir()), config=config, local_files_only=True
            )
        return SequenceClassifier(hf).to(self.device)

    def prior_center(self, model: nn.Module) -> list[torch.Tensor]:
        """The public base model's weights: the pretrained encoder and the classification head as initialised
        from the public seed (never the secret-seeded initialisation the fit starts from)."""
        if getattr(self, "_public_centre", None) is None:  # built once per backend (the replay audit fits 22 times)
            cuda = [self.device.index or 0] if self.device.type == "cuda" else []
            with torch.random.fork_rng(devices=cuda):  # build_model seeds the global RNG: the fit's stream stays
                self._public_centre = [p.detach().clone() for p in trainable(self.build_model())]
        public, mine = self._public_centre, trainable(model)
        if [p.shape for p in public] != [p.shape for p in mine]:
            raise ValueError("the prior centre does not match the model's parameters")
        return [c.to(p.device, p.dtype) for c, p in zip(public, mine)]

    @staticmethod
    def release_scorer(folder: Path, arch: dict, device: torch.device):
        model, tok = load_release_full(folder, device)

        def score(texts: list[str]) -> torch.Tensor:
            out = []
            with torch.no_grad():
                for start in range(0, len(texts), 64):
                    enc = tok(
                        texts[start : start + 64],
                        padding=True,
                        truncation=True,
                        max_length=arch["max_length"],
                        return_tensors="pt",
                    ).to(device)
                    out.append(torch.softmax(model(enc["input_ids"], enc["attention_mask"]), -1).cpu())
            return torch.cat(out) if out else torch.empty(0, model.model.config.num_labels)  # no narratives: [0, C]

        return score

    @staticmethod
    def release_shapes(folder: Path, arch: dict) -> dict:
        return full_shapes(Path(folder), arch)

    @staticmethod
    def load_release_model(folder: Path, arch: dict, device: torch.device) -> nn.Module:
        return load_release_full(Path(folder), device)[0]

    def write_release_model(self, model: nn.Module, folder: Path) -> dict:
        save_state(folder / "model.safetensors", model)
        model.model.config.to_json_file(str(folder / "config.json"))
        tok_dir = folder / "tokenizer"
        tok_dir.mkdir()
        for name in TOKENIZER_FILES:
            shutil.copy2(encoder_dir() / name, tok_dir / name)
        arch = {
            "backend": "full",
            "tiny": self.params.tiny,
            "n_classes": self.n_classes,
            "max_length": self.max_length,
            "tokenizer_from": encoder_reference(),
        }
        (folder / "model.json").write_text(json.dumps(arch, indent=2) + "\n", encoding="utf-8")
        return arch


def full_shapes(folder: Path, arch: dict) -> dict[str, tuple[tuple[int, ...], bool]]:
    dims = bounded(folder / "model.json", arch, BOUNDS["full"])
    config, shapes = check_full_config(folder)
    if config.num_labels != dims["n_classes"]:
        raise ReleaseError(
            f"{folder / 'config.json'}: {config.num_labels} labels but model.json says n_classes={dims['n_classes']}"
        )
    if dims["max_length"] > config.max_position_embeddings:
        raise ReleaseError(
            f"{folder / 'model.json'}: max_length={dims['max_length']} exceeds config.json's "
            f"max_position_embeddings={config.max_position_embeddings}"
        )
    return shapes


def check_full_config(folder: Path):
    """``config.json``'s dimensions bounded, then the transformer it describes built on the meta device:
    the parsed config and the state-dict shapes it implies (the loader calls it too, before building)."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    path = folder / "config.json"
    raw = read_json_object(path)
    limits = BOUNDS["config.json"]
    bounded(path, raw, limits, [k for k in limits if k != "num_labels"])
    labels = raw.get("id2label")
    bounded(
        path,
        {"num_labels": len(labels) if isinstance(labels, dict) else raw.get("num_labels", 2)},
        limits,
        ["num_labels"],
    )
    kind = json.loads((encoder_dir() / "config.json").read_text(encoding="utf-8"))["model_type"]
    if raw.get("model_type") != kind:
        raise ReleaseError(f"{path}: model_type {raw.get('model_type')!r}, expected {kind!r}")
    try:
        config = AutoConfig.from_pretrained(str(path), local_files_only=True)
        with torch.device("meta"):
            model = SequenceClassifier(AutoModelForSequenceClassification.from_config(config))
    except Exception as e:  # noqa: BLE001 - any failure to build from an edited config is a bad release
        raise ReleaseError(f"{path}: cannot build the model it describes ({type(e).__name__}: {e})") from None
    return config, module_shapes(path, model)


def load_release_full(folder: Path, device: torch.device) -> tuple[SequenceClassifier, object]:
    """The released transformer and tokenizer. config.json's dimensions are bounded before the model is
    built, the weights must be finite and every token id the tokenizer can produce must have an embedding
    (one-line :class:`ReleaseError` otherwise); `predict` has verified the whole folder before this."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = Path(folder)
    config, _ = check_full_config(folder)
    state = load_weights(folder / "model.safetensors")  # before the model is built: a bad file fails fast
    model = SequenceClassifier(AutoModelForSequenceClassification.from_config(config))
    fit_state(model, state, folder / "model.safetensors")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder / "tokenizer"), local_files_only=True)
    except Exception as e:  # noqa: BLE001 - tokenizers raise many types for an edited file
        raise ReleaseError(f"{folder / 'tokenizer'}: cannot load the tokenizer ({type(e).__name__}: {e})") from None
    if len(tokenizer) > config.vocab_size:
        raise ReleaseError(
            f"{folder / 'tokenizer'}: {len(tokenizer)} tokens but config.json's vocab_size is {config.vocab_size}"
        )
    return model.to(device).eval(), tokenizer
