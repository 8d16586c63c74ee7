"""Is the frozen-MiniLM NVDP backend's chance-level MRPC / RTE a bug or the representation's limit? Sanity
references on the same data (GLUE train → dev, aggregates only):

1. linear probes (logistic regression) on the cached pair token states of ``nvdp_states`` — mean-pooled and the
   [CLS] state of the jointly encoded "[CLS] a [SEP] b [SEP]" input (what the NVDP head sees);
2. the classic sentence-pair baseline: each sentence embedded on its own (mean-pooled, L2-normalised MiniLM,
   the way the encoder was trained), features [u, v, |u−v|, u⊙v], logistic regression.

The regularisation C is chosen by 5-fold cross-validation on the training split (the dev score is not used to
pick it). Needs the token-state cache (``dprelease stage nvdp_states``).

    python benchmarks/nvdp_pair_baseline.py
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LogisticRegressionCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dprelease.core import offline  # noqa: F401
from dprelease.core.backends.encoder import load_encoder, load_tokenizer
from dprelease.core.config import load_params
from dprelease.mechanisms.nvdp.datasets import glue_task
from dprelease.mechanisms.nvdp.states import load_states, nvdp_dir

CS = [1e-3, 1e-2, 1e-1, 1.0]


def fit_score(x_tr, y_tr, x_te, y_te, seed: int) -> float:
    lr = LogisticRegressionCV(Cs=CS, cv=5, max_iter=3000, random_state=seed)
    return float(make_pipeline(StandardScaler(), lr).fit(x_tr, y_tr).score(x_te, y_te))


def pooled_states(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = load_states(path)
    st, off = s["states"].float(), s["offsets"]
    mean = torch.stack([st[off[i] : off[i + 1]].mean(0) for i in range(len(off) - 1)]).numpy()
    cls = st[off[:-1]].numpy()
    return mean, cls, s["labels"].numpy()


@torch.no_grad()
def sentence_embeddings(texts: list[str], encoder, tok, *, max_length: int, batch: int = 64) -> np.ndarray:
    order = np.argsort([len(t) for t in texts])
    out = np.zeros((len(texts), 384), np.float32)
    for s in range(0, len(texts), batch):
        idx = order[s : s + batch]
        enc = tok([texts[i] for i in idx], truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        h = encoder(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).float()
        out[idx] = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1).numpy()
    return out


def main() -> None:
    params = load_params()
    n = params.nvdp
    torch.set_num_threads(2)
    encoder, tok = load_encoder(torch.device("cpu")), load_tokenizer()
    for task in ("mrpc", "rte"):
        sdir = nvdp_dir(params, ".", "states")
        m_tr, c_tr, y_tr = pooled_states(sdir / f"{task}_train.safetensors")
        m_te, c_te, y_te = pooled_states(sdir / f"{task}_test.safetensors")
        majority = max(np.mean(y_te), 1 - np.mean(y_te))
        train, dev, _ = glue_task(params.nvdp.glue_dir, task, max_train=None, seed=params.seed)
        feats = []
        for split in (train, dev):
            u = sentence_embeddings(split.text_a, encoder, tok, max_length=n.max_length)
            v = sentence_embeddings(split.text_b, encoder, tok, max_length=n.max_length)
            feats.append(np.hstack([u, v, np.abs(u - v), u * v]))
        print(
            f"{task}: dev majority class {majority:.3f}; "
            f"probe on cached pair states mean-pooled {fit_score(m_tr, y_tr, m_te, y_te, params.seed):.3f}, "
            f"[CLS] {fit_score(c_tr, y_tr, c_te, y_te, params.seed):.3f}; "
            f"sentence LR [u, v, |u−v|, u⊙v] {fit_score(feats[0], train.labels, feats[1], dev.labels, params.seed):.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
