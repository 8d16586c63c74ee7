"""How the OSHA clip values (nvdp.clip.osha) were chosen: on the release pipeline's VALIDATION split, never the
test split. Each (C_μ, C_α,min, C_α,max) triple of S000 Table 4 trains the clipped NVDP module on the cached OSHA
training states at λ = 0.001 and is scored (weighted F1, RD max, BDP ε) on the validation narratives.
Needs the token-state cache (``dprelease stage nvdp_states``).

    python benchmarks/nvdp_osha_clip.py
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from dprelease.core.config import load_params
from dprelease.core.data import records
from dprelease.core.seeds import stage_seed
from dprelease.mechanisms.nvdp.datasets import Split
from dprelease.mechanisms.nvdp.nvib import Clip, NVDPModule
from dprelease.mechanisms.nvdp.states import DIM, Packed, encode, load_states, nvdp_dir
from dprelease.mechanisms.nvdp.train import TrainOptions, evaluate, train

TABLE4 = [(2.0, 0.0, 0.5), (3.0, 0.0, 0.7), (6.0, 0.0, 0.5), (6.0, 0.0, 0.6), (7.0, 0.0, 1.0), (10.0, 0.0, 1.0)]


def validation_split(params) -> tuple[list[str], list[str]]:
    d = params.data
    df = records.read_records(d.path, d.text_column, d.label_column, d.encoding)
    sample = records.stratified_sample(
        df, cap=d.cap, min_class_size=d.min_class_size, seed=params.seed, limit_classes=d.limit_classes
    )
    _, test = records.split(sample, test_size=d.test_size, seed=params.seed)
    val = test.sample(frac=d.validation_size, random_state=params.seed)
    codes = sorted(sample["label"].unique(), key=lambda c: (not c.isdigit(), int(c) if c.isdigit() else 0, c))
    return val["text"].tolist(), [codes.index(c) for c in val["label"]]


def main() -> None:
    params = load_params()
    n = params.nvdp
    torch.set_num_threads(max(1, n.torch_threads))
    tr = load_states(nvdp_dir(params, ".", "states") / "osha_train.safetensors")
    n_classes = len(pd.read_json(nvdp_dir(params, ".", "states") / "osha.json").classes)
    texts, y_val = validation_split(params)
    packed = encode(
        Split(texts, None, np.array(y_val)),
        max_length=n.max_length,
        batch_size=n.encode_batch,
        device=torch.device("cpu"),
    )
    val = Packed(packed["states"], packed["offsets"], torch.device("cpu"))
    train_data, y_tr = Packed(tr["states"], tr["offsets"], torch.device("cpu")), tr["labels"].numpy()
    rows = []
    for lam in (0.001,):
        for triple in [None, *TABLE4]:
            clip = Clip() if triple is None else Clip(triple[0], n.renyi_order, triple[1], triple[2])
            torch.manual_seed(stage_seed(params.seed, f"osha-clip-{triple}-{lam}", 1))
            model = NVDPModule(DIM, n.dim, n_classes, heads=n.heads, clip=clip)
            train(
                model,
                train_data,
                y_tr,
                TrainOptions(n.epochs, n.lr, n.batch_size, lam),
                seed=stage_seed(params.seed, "oc", 2),
            )
            res = evaluate(
                model, val, np.array(y_val), "osha", seed=stage_seed(params.seed, "oc", 3), eval_batch=n.eval_batch
            )
            rows.append(
                {
                    "lambda": lam,
                    "clip": "none" if triple is None else str(triple),
                    "val_weighted_f1": res["score"],
                    "rd_max": res["rd_max"],
                    "rd_max_filtered": res["rd_max_filtered"],
                    "bdp_epsilon": res["bdp_epsilon"],
                }
            )
            print(rows[-1], flush=True)
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".3f"))


if __name__ == "__main__":
    main()
