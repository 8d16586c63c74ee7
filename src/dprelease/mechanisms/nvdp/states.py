"""Encoder token states. CPU backend: the frozen public MiniLM's last-layer token states, computed once per
dataset and cached packed (only real tokens, float16, with offsets), then padded per batch. GPU backend: token
ids, the encoder fine-tuned inside :class:`EncoderNVDP` with the same NVDP module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from dprelease.core.backends.encoder import load_encoder, load_tokenizer
from dprelease.core.io import atomic_dir, skip_marker, write_json
from dprelease.mechanisms.nvdp.datasets import Split, load
from dprelease.mechanisms.nvdp.nvib import NVDPModule

DIM = 384  # MiniLM-L6 hidden width


def tokenize(split: Split, max_length: int, start: int = 0, stop: int | None = None) -> dict:
    """Token ids of the joint input ("[CLS] a [SEP] b [SEP]" for a pair) and its segment mask ``segments``
    (0 padding, 1 first text, 2 second text), as the fine-tuned-encoder backend reads them."""
    tok = load_tokenizer()
    a = split.text_a[start:stop]
    b = None if split.text_b is None else split.text_b[start:stop]
    enc = tok(
        a, b, truncation=True, max_length=max_length, padding=True, return_tensors="pt", return_token_type_ids=True
    )
    enc["segments"] = enc["attention_mask"] * (1 + enc["token_type_ids"])
    return enc


@torch.no_grad()
def _token_states(texts: list[str], *, max_length: int, batch_size: int, device: torch.device, encoder) -> list:
    """Last-layer states of each text's real tokens (float16), each text encoded on its own."""
    tok = load_tokenizer()
    order = np.argsort([len(t) for t in texts], kind="stable")
    out: list[torch.Tensor | None] = [None] * len(texts)
    for s in range(0, len(texts), batch_size):
        idx = order[s : s + batch_size]
        enc = tok([texts[i] for i in idx], truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        hidden = encoder(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device))
        hidden = hidden.last_hidden_state.float().cpu()
        for k, i in enumerate(idx):
            out[i] = hidden[k, : int(enc["attention_mask"][k].sum())].to(torch.float16)
    return out


@torch.no_grad()
def encode(split: Split, *, max_length: int, batch_size: int, device: torch.device, encoder=None) -> dict:
    """Packed token states of every record: ``states`` (tokens, 384) float16, ``offsets`` (n + 1) and ``first``
    (n: how many of a record's tokens belong to its first text). A pair's two texts are encoded each on its
    own (the frozen sentence encoder was trained on single sentences; a linear probe on jointly encoded MRPC / RTE
    pairs is at chance) and its second text's tokens follow the first's."""
    encoder = encoder if encoder is not None else load_encoder(device)
    opts = {"max_length": max_length, "batch_size": batch_size, "device": device, "encoder": encoder}
    parts = _token_states(split.text_a, **opts)
    first = [t.shape[0] for t in parts]
    if split.text_b is not None:
        parts = [torch.cat([a, b]) for a, b in zip(parts, _token_states(split.text_b, **opts))]
    lengths = [t.shape[0] for t in parts]
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.long)
    return {"states": torch.cat(parts), "offsets": offsets, "first": torch.tensor(first, dtype=torch.long)}


def save_states(path: Path, packed: dict, labels: np.ndarray) -> None:
    save_file({**packed, "labels": torch.as_tensor(labels, dtype=torch.long)}, str(path))


def load_states(path: Path) -> dict:
    return load_file(str(path))


class Packed:
    """Batches of padded token states from a packed cache (float32 on ``device``) with their segment mask
    (0 padding, 1 first text, 2 second text; ``first``: first-text lengths, None for single texts)."""

    def __init__(
        self, states: torch.Tensor, offsets: torch.Tensor, device: torch.device, first: torch.Tensor | None = None
    ):
        self.states, self.offsets, self.device, self.first = states, offsets, device, first

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def batch(self, idx) -> tuple[torch.Tensor, torch.Tensor]:
        lens = [int(self.offsets[i + 1] - self.offsets[i]) for i in idx]
        x = torch.zeros(len(idx), max(lens), self.states.shape[1])
        mask = torch.zeros(len(idx), max(lens))
        for k, i in enumerate(idx):
            x[k, : lens[k]] = self.states[self.offsets[i] : self.offsets[i + 1]].float()
            mask[k, : lens[k]] = 1.0
            if self.first is not None:
                mask[k, int(self.first[i]) : lens[k]] = 2.0
        return x.to(self.device), mask.to(self.device)


class EncoderNVDP(nn.Module):
    """The whole encoder fine-tuned with the NVIB block on top (the paper's setting; GPU workers)."""

    def __init__(self, encoder: nn.Module, nvdp: NVDPModule):
        super().__init__()
        self.encoder, self.nvdp = encoder, nvdp

    def states(self, ids: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        return self.encoder(
            input_ids=ids, attention_mask=(segments > 0).long(), token_type_ids=(segments > 1).long()
        ).last_hidden_state

    def represent(self, ids, segments, gen):
        return self.nvdp.represent(self.states(ids, segments), segments.float(), gen)

    def forward(self, ids, segments, gen):
        return self.nvdp(self.states(ids, segments), segments.float(), gen)


class Tokens:
    """Batches of token ids for the fine-tuned-encoder backend."""

    def __init__(self, split: Split, max_length: int, device: torch.device):
        self.split, self.max_length, self.device = split, max_length, device

    def __len__(self) -> int:
        return len(self.split)

    def batch(self, idx) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.split
        sub = Split([s.text_a[i] for i in idx], None if s.text_b is None else [s.text_b[i] for i in idx], s.labels[idx])
        enc = tokenize(sub, self.max_length)
        return enc["input_ids"].to(self.device), enc["segments"].to(self.device)


def nvdp_dir(params, root, *parts) -> Path:
    """``<artifacts>/nvdp/…``: private (token states, per-record sectors, fitted modules)."""
    return Path(root) / params.artifacts / "nvdp" / Path(*parts)


def cache_stage(params, root: str | Path = ".") -> dict:
    """Stage ``nvdp_states``: frozen MiniLM token states of every task's train and test split, computed once
    and cached (packed, float16, real tokens only). The fine-tuned-encoder backend needs none."""
    out = nvdp_dir(params, root, "states")
    if params.nvdp.backend == "full":
        return skip_marker(out, "nvdp.backend: full fine-tunes the encoder (no cached states)")
    encoder = load_encoder(torch.device("cpu"))
    summary = {}
    with atomic_dir(out, private=True) as tmp:
        for task in params.nvdp.tasks:
            train, test, classes = load(task, Path(root), params)
            for name, split in (("train", train), ("test", test)):
                packed = encode(
                    split,
                    max_length=params.nvdp.max_length,
                    batch_size=params.nvdp.encode_batch,
                    device=torch.device("cpu"),
                    encoder=encoder,
                )
                save_states(tmp / f"{task}_{name}.safetensors", packed, split.labels)
                summary[f"{task}_{name}"] = {"rows": len(split), "tokens": int(packed["offsets"][-1])}
            write_json(tmp / f"{task}.json", {"classes": classes})
            if train.attribute is not None:  # private: the probe's target, per record
                write_json(tmp / f"{task}_sectors.json", {"train": train.attribute, "test": test.attribute})
    return summary
