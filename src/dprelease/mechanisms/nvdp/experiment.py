"""One task's experiment: the non-private classifier, unconstrained NVDP and clipped NVDP over the λ grid,
each trained on the task's training split and evaluated on its test (GLUE: dev) split — utility, RD max/avg
(unfiltered and the reference's filtered) and the BDP ε. Same code for both backends."""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from dprelease.contracts.layout import Layout
from dprelease.core.io import atomic_dir, read_json, skip_marker, write_json
from dprelease.core.seeds import stage_seed
from dprelease.core.threads import torch_threads
from dprelease.mechanisms.nvdp.datasets import Split, is_pair, load
from dprelease.mechanisms.nvdp.nvib import NO_CLIP, Clip, NVDPModule
from dprelease.mechanisms.nvdp.states import DIM, EncoderNVDP, Packed, Tokens, load_states, nvdp_dir
from dprelease.mechanisms.nvdp.train import TrainOptions, evaluate, train

VARIANTS = ("nonprivate", "unconstrained", "clipped")


def clip_for(params, task: str, variant: str) -> Clip:
    if variant != "clipped":
        return NO_CLIP
    c_mu, a_min, a_max = params.nvdp.clip[task]
    return Clip(mu=c_mu, sigma_order=params.nvdp.renyi_order, alpha_min=a_min, alpha_max=a_max)


def grid(params) -> list[tuple[str, float | None]]:
    """(variant, λ) cells: the non-private classifier once, both NVDP variants at every λ."""
    return [("nonprivate", None)] + [(v, lam) for v in VARIANTS[1:] for lam in params.nvdp.lambdas]


def device_for(params) -> torch.device:
    if params.nvdp.backend == "full" and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def seeded_init(core: NVDPModule, seed: int) -> NVDPModule:
    """Re-draw every random initial weight from an explicit generator: construction draws from torch's global
    RNG, which task stages running in parallel threads share (their interleaving would change the init)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, mod in core.named_modules():
            if isinstance(mod, torch.nn.Linear) and name not in ("nvib.logvar", "nvib.alpha"):
                bound = 1.0 / math.sqrt(mod.in_features)  # torch's default Linear init, U(−1/√fan_in, 1/√fan_in)
                mod.weight.uniform_(-bound, bound, generator=g)
                mod.bias.uniform_(-bound, bound, generator=g)
        core.nvib.alpha.weight.normal_(0.0, 1e-3, generator=g)  # logvar: zero weights, constant bias (no draw)
    return core


def new_model(params, task: str, variant: str, n_classes: int, device: torch.device, seed: int):
    n = params.nvdp
    core = seeded_init(
        NVDPModule(
            DIM,
            n.dim,
            n_classes,
            heads=n.heads,
            clip=clip_for(params, task, variant),
            stochastic=variant != "nonprivate",
            pair=is_pair(task),
        ),
        seed,
    )
    if n.backend == "full":
        from dprelease.core.backends.encoder import load_encoder

        return EncoderNVDP(load_encoder(device), core).to(device)
    return core.to(device)


def sources(params, states_dir: Path, task: str, splits: tuple[Split, Split] | None, device: torch.device):
    """(train batches, train labels, test batches, test labels) for the configured backend."""
    if params.nvdp.backend == "full":
        tr, te = splits
        return (
            Tokens(tr, params.nvdp.max_length, device),
            tr.labels,
            Tokens(te, params.nvdp.max_length, device),
            te.labels,
        )
    out = []
    for split in ("train", "test"):
        s = load_states(states_dir / f"{task}_{split}.safetensors")
        out += [Packed(s["states"], s["offsets"], device, first=s.get("first")), s["labels"].numpy()]
    return tuple(out)


def run_task(
    params, task: str, states_dir: Path, n_classes: int, *, splits=None, model_dir: Path | None = None, progress=print
) -> list[dict]:
    """Every (variant, λ) cell of one task; public aggregates only. ``model_dir``: keep the trained NVDP
    modules (OSHA: the sanitizer release and the probe read them)."""
    n = params.nvdp
    device = device_for(params)
    tr, y_tr, te, y_te = sources(params, states_dir, task, splits, device)
    rows = []
    with torch_threads(n.torch_threads):
        for variant, lam in grid(params):
            tag = f"nvdp-{task}-{variant}-{lam}"
            model = new_model(params, task, variant, n_classes, device, stage_seed(params.seed, tag, 1))
            opts = TrainOptions(
                epochs=n.epochs, lr=n.lr, batch_size=n.batch_size, lam=lam or 0.0, encoder_lr=n.encoder_lr
            )
            start = time.perf_counter()
            losses = train(model, tr, y_tr, opts, seed=stage_seed(params.seed, tag, 2))
            trained = time.perf_counter()
            res = evaluate(
                model,
                te,
                y_te,
                task,
                seed=stage_seed(params.seed, tag, 3),
                eval_batch=n.eval_batch,
                privacy=variant != "nonprivate",
                n_vectors=n.max_length + 1,
                lam=n.renyi_order,
                delta=n.delta,
                clip=clip_for(params, task, "clipped"),
            )
            row = {
                "task": task,
                "variant": variant,
                "lambda": lam,
                "backend": n.backend,
                **res,
                "final_loss": losses[-1],
                "n_train": len(y_tr),
                "n_test": len(y_te),
                "train_seconds": round(trained - start, 2),
                "eval_seconds": round(time.perf_counter() - trained, 2),
            }
            rows.append(row)
            progress(
                f"nvdp {task} {variant} λ={lam}: score {res['score']:.3f}"
                + (f", BDP ε {res['bdp_epsilon']:.3f}, RD max {res['rd_max']:.3f}" if "bdp_epsilon" in res else "")
                + f" ({row['train_seconds']:.0f} s + {row['eval_seconds']:.0f} s)"
            )
            if model_dir is not None and (lam is None or lam == n.release_lambda):
                save_model(
                    model_dir / f"{variant}",
                    model,
                    task=task,
                    variant=variant,
                    lam=lam,
                    n_classes=n_classes,
                    params=params,
                )
    return rows


def architecture(params, task: str, variant: str, lam: float | None, n_classes: int) -> dict:
    c = clip_for(params, task, variant)
    return {
        "task": task,
        "variant": variant,
        "lambda": lam,
        "dim_in": DIM,
        "dim": params.nvdp.dim,
        "heads": params.nvdp.heads,
        "n_classes": n_classes,
        "pair": is_pair(task),
        "max_length": params.nvdp.max_length,
        "backend": params.nvdp.backend,
        "clip": {"mu": c.mu, "sigma_order": c.sigma_order, "alpha_min": c.alpha_min, "alpha_max": c.alpha_max},
    }


def save_model(folder: Path, model, *, task, variant, lam, n_classes, params) -> None:
    """The trained NVDP module (private artifact: it was fitted to private records)."""
    folder.mkdir(parents=True, exist_ok=True)
    core = model.nvdp if isinstance(model, EncoderNVDP) else model
    save_file(
        {k: v.detach().cpu().contiguous() for k, v in core.state_dict().items()}, str(folder / "model.safetensors")
    )
    write_json(folder / "model.json", architecture(params, task, variant, lam, n_classes))


def module_from(arch: dict) -> NVDPModule:
    c = arch["clip"]
    clip = Clip(mu=c["mu"], sigma_order=c["sigma_order"], alpha_min=c["alpha_min"], alpha_max=c["alpha_max"])
    return NVDPModule(
        int(arch["dim_in"]),
        int(arch["dim"]),
        int(arch["n_classes"]),
        heads=int(arch["heads"]),
        clip=clip,
        stochastic=arch["variant"] != "nonprivate",
        pair=bool(arch.get("pair", False)),
    )


def summary_rows(rows: list[dict]) -> dict:
    """The metrics file's content: one entry per cell (aggregates only)."""
    return {
        f"{r['variant']}@{r['lambda']}": {k: v for k, v in r.items() if isinstance(v, (int, float)) or v is None}
        for r in rows
    }


def task_stage(task: str, params, root: str | Path = ".") -> dict:
    """Stage ``nvdp_<task>``: every cell of one task; rows (aggregates) and, for OSHA, the fitted modules."""
    lay = Layout.from_params(params, root)
    if task not in params.nvdp.tasks:
        write_json(lay.metrics / f"nvdp_{task}.json", {"skipped": "not in nvdp.tasks"})
        return skip_marker(nvdp_dir(params, root, "runs", task), "not in nvdp.tasks")
    sdir = nvdp_dir(params, root, "states")
    splits = None
    if params.nvdp.backend == "full":
        train, test, classes = load(task, Path(root), params)
        splits = (train, test)
    else:
        classes = read_json(sdir / f"{task}.json")["classes"]
    with atomic_dir(nvdp_dir(params, root, "runs", task), private=True) as tmp:
        rows = run_task(params, task, sdir, len(classes), splits=splits, model_dir=tmp if task == "osha" else None)
        write_json(tmp / "rows.json", rows)
    summary = summary_rows(rows)
    write_json(lay.metrics / f"nvdp_{task}.json", summary)
    return summary
