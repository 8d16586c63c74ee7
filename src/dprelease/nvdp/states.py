"""Encoder token states. CPU backend: the frozen public MiniLM's last-layer token states, computed once per
dataset and cached packed (only real tokens, float16, with offsets), then padded per batch. GPU backend: token
ids, the encoder fine-tuned inside :class:`EncoderNVDP` with the same NVDP module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ..backends.encoder import load_encoder, load_tokenizer
from ..io import atomic_dir, write_json
from ..stage import skip_marker
from .nvib import NVDPModule
from .tasks import Split, load

DIM = 384  # MiniLM-L6 hidden width


def tokenize(split: Split, max_length: int, start: int = 0, stop: int | None = None) -> dict:
    tok = load_tokenizer()
    a = split.text_a[start:stop]
    b = None if split.text_b is None else split.text_b[start:stop]
    return tok(a, b, truncation=True, max_length=max_length, padding=True, return_tensors="pt")


@torch.no_grad()
def encode(split: Split, *, max_length: int, batch_size: int, device: torch.device, encoder=None) -> dict:
    """Packed token states of every text: ``states`` (tokens, 384) float16 and ``offsets`` (n + 1)."""
    encoder = encoder if encoder is not None else load_encoder(device)
    chunks, lengths = [], []
    order = np.argsort([len(t) + len(split.text_b[i]) if split.text_b else len(t) for i, t in enumerate(split.text_a)])
    packed: list[torch.Tensor | None] = [None] * len(split)
    for s in range(0, len(split), batch_size):
        idx = order[s:s + batch_size]
        sub = Split([split.text_a[i] for i in idx], None if split.text_b is None else [split.text_b[i] for i in idx],
                    split.labels[idx])
        enc = tokenize(sub, max_length)
        hidden = encoder(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device))
        hidden = hidden.last_hidden_state.float().cpu()
        for k, i in enumerate(idx):
            n = int(enc["attention_mask"][k].sum())
            packed[i] = hidden[k, :n].to(torch.float16)
    for t in packed:
        chunks.append(t)
        lengths.append(t.shape[0])
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.long)
    return {"states": torch.cat(chunks), "offsets": offsets}


def save_states(path: Path, packed: dict, labels: np.ndarray) -> None:
    save_file({**packed, "labels": torch.as_tensor(labels, dtype=torch.long)}, str(path))


def load_states(path: Path) -> dict:
    return load_file(str(path))


class Packed:
    """Batches of padded token states from a packed cache (float32 on ``device``)."""

    def __init__(self, states: torch.Tensor, offsets: torch.Tensor, device: torch.device):
        self.states, self.offsets, self.device = states, offsets, device

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def batch(self, idx) -> tuple[torch.Tensor, torch.Tensor]:
        lens = [int(self.offsets[i + 1] - self.offsets[i]) for i in idx]
        x = torch.zeros(len(idx), max(lens), self.states.shape[1])
        mask = torch.zeros(len(idx), max(lens))
        for k, i in enumerate(idx):
            x[k, :lens[k]] = self.states[self.offsets[i]:self.offsets[i + 1]].float()
            mask[k, :lens[k]] = 1.0
        return x.to(self.device), mask.to(self.device)


class EncoderNVDP(nn.Module):
    """The whole encoder fine-tuned with the NVIB block on top (the paper's setting; GPU workers)."""

    def __init__(self, encoder: nn.Module, nvdp: NVDPModule):
        super().__init__()
        self.encoder, self.nvdp = encoder, nvdp

    def states(self, ids: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=ids, attention_mask=attn).last_hidden_state

    def represent(self, ids, attn, gen):
        return self.nvdp.represent(self.states(ids, attn), attn.float(), gen)

    def forward(self, ids, attn, gen):
        return self.nvdp(self.states(ids, attn), attn.float(), gen)


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
        return enc["input_ids"].to(self.device), enc["attention_mask"].to(self.device)


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
                packed = encode(split, max_length=params.nvdp.max_length, batch_size=params.nvdp.encode_batch,
                                device=torch.device("cpu"), encoder=encoder)
                save_states(tmp / f"{task}_{name}.safetensors", packed, split.labels)
                summary[f"{task}_{name}"] = {"rows": len(split), "tokens": int(packed["offsets"][-1])}
            write_json(tmp / f"{task}.json", {"classes": classes})
            if train.attribute is not None:  # private: the probe's target, per record
                write_json(tmp / f"{task}_sectors.json", {"train": train.attribute, "test": test.attribute})
    return summary
