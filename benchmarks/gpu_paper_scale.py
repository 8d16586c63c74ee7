"""The SWAG-PPM release on the ``full`` backend at paper scale, stage by stage, in one process: what the
``gpu`` work pool's deployment would run (issue 33).

    python benchmarks/gpu_paper_scale.py                  # one H100: the default data sample, within ~8 min
    python benchmarks/gpu_paper_scale.py --budget-s 1800  # more of the configured epochs / draws
    python benchmarks/gpu_paper_scale.py --tiny           # CPU check: tiny random transformer, tiny sample

It copies params.yaml and the data into a temporary project root (``--root`` to choose it, ``--keep`` to
keep it), sets ``model.backend: full`` and runs every stage of the release group through the project's
own stage functions (``dprelease.pipeline.registry.run_stage``, as tests/conftest.py ``run_stages`` does), under a
fresh secret key. It prints per stage: wall time, GPU memory peak (torch.cuda.max_memory_allocated) and
mean GPU utilisation (``nvidia-smi`` sampled in a thread, else "n/a"); the draws per second of every
posterior pass; test F1 of the round-1 (non-private) fine-tune, of the released draw and over the
evaluation's draws; and ε and T_min from metrics/swag_ppm_draw.json.

Budget: before the fits, a probe times training steps and one evaluation pass on this machine; from them a
cost model predicts the release's time. If it exceeds ``--budget-s``, the fine-tune and SWAG epochs, the
posterior draws and the re-weighting refits are scaled down together until it fits, and the output SAYS SO
(the figures are then for the scaled run, not the paper's settings; below 100 draws ``ppm.smoke_test`` is
set and ε is not meaningful). The prediction is printed beside the measured total.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpu_cost_model import MIN_DRAWS_EPSILON, SAFETY, plan, probe, sync  # noqa: E402  (this folder)

TINY = {  # the tiny random transformer on a tiny slice (as tests/conftest.py's full-tiny run)
    "data": {"limit_classes": 4, "cap": 12},
    "features": {"max_length": 32},
    "model": {
        "full": {
            "tiny": True,
            "finetune": {"epochs": 2, "lr": 0.001, "batch_size": 8, "weight_decay": 0.01},
            "swag": {"epochs": 3, "lr": 0.01, "batch_size": 8, "rank": 3},
        }
    },
    "ppm": {"draws": 20, "draw_batch": 10, "smoke_test": True, "max_refits": 1},
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--budget-s",
        type=float,
        default=420.0,
        help="time the release may take (default 420 s: with setup, under 8 min on one H100); "
        "epochs/draws are scaled down to fit, and the output says so",
    )
    ap.add_argument("--tiny", action="store_true", help="tiny random transformer, tiny sample (CPU check)")
    ap.add_argument("--root", type=Path, help="project root to run in (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary project root")
    ap.add_argument(
        "--eval-batch",
        type=int,
        help="records per evaluation forward pass (DPRELEASE_FULL_EVAL_BATCH; default 512 on CUDA)",
    )
    ap.add_argument("--no-amp", action="store_true", help="no bf16 autocast of evaluation passes on CUDA")
    return ap.parse_args(argv)


def merge(raw: dict, extra: dict) -> dict:
    for k, v in extra.items():
        raw[k] = merge(raw.get(k) or {}, v) if isinstance(v, dict) else v
    return raw


# GPU utilisation ---------------------------------------------------------------------------------------
class Utilisation:
    """``nvidia-smi`` sampled every ``period`` s in a thread: (time, GPU %) pairs; unavailable: None."""

    def __init__(self, period: float = 0.5) -> None:
        self.samples: list[tuple[float, float]] = []
        self.exe = shutil.which("nvidia-smi")
        self.period = period
        self._stop = threading.Event()
        index = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
        self.cmd = (
            [self.exe, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", index]
            if self.exe
            else None
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Utilisation":
        if self.cmd:
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(self.cmd, capture_output=True, text=True, timeout=5).stdout.strip()
                self.samples.append((time.perf_counter(), float(out.splitlines()[0])))
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                pass
            self._stop.wait(self.period)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def mean(self, start: float, end: float) -> str:
        if not self.cmd:
            return "n/a"
        vals = [u for t, u in self.samples if start <= t <= end]
        return f"{sum(vals) / len(vals):.0f}" if vals else "-"


# posterior passes ---------------------------------------------------------------------------------------
PASSES: list[tuple[str, int, float]] = []


def instrument_passes() -> None:
    """Time every posterior pass (``passes.draw_pass``, wherever it is called from): draws and seconds."""
    from dprelease.mechanisms.swag_ppm import passes, reweighting

    inner = passes.draw_pass

    def timed(*args, **kwargs):
        start = time.perf_counter()
        record_max, max_deltas = inner(*args, **kwargs)
        sync()
        done = len(max_deltas) if max_deltas is not None else kwargs["draws"]
        PASSES.append((kwargs.get("desc", "pass"), done, time.perf_counter() - start))
        return record_max, max_deltas

    passes.draw_pass = timed
    reweighting.draw_pass = timed


# the run ---------------------------------------------------------------------------------------------------
@contextmanager
def project_root(args):
    if args.root:
        args.root.mkdir(parents=True, exist_ok=True)
        yield args.root.resolve()
        return
    tmp = Path(tempfile.mkdtemp(prefix="dprelease-gpu-bench-"))
    try:
        yield tmp
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.eval_batch:
        os.environ["DPRELEASE_FULL_EVAL_BATCH"] = str(args.eval_batch)
    if args.no_amp:
        os.environ["DPRELEASE_FULL_AMP"] = "0"
    import yaml

    from dprelease.core import offline

    offline.apply()
    import torch
    from safetensors.torch import load_file
    from sklearn.metrics import f1_score

    from dprelease.contracts.layout import Layout
    from dprelease.core.backends.base import set_flat
    from dprelease.core.config import parse_params
    from dprelease.core.data.splits import backend_for, features
    from dprelease.pipeline import registry

    began = time.perf_counter()
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["model"]["backend"] = "full"
    raw.setdefault("tracking", {})["mlflow_uri"] = "sqlite:///mlflow.db"  # inside the temporary root
    if args.tiny:
        merge(raw, TINY)
    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if cuda else "CPU (no CUDA device)"
    util = Utilisation().start()
    with project_root(args) as root:
        data = Path(raw["data"]["path"])
        (root / data).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / data, root / data)
        params = parse_params(raw)
        (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        lay = Layout.from_params(params, root)
        instrument_passes()
        names = [s.name for s in registry.group(params, "release")]
        first_fit = names.index("finetune_r1")
        rows: list[tuple[str, float, str, str]] = []

        def run(name, params):
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            registry.run_stage(name, params, root)
            sync()
            end = time.perf_counter()
            peak = f"{torch.cuda.max_memory_allocated() / 2**30:.2f}" if cuda else "n/a"
            rows.append((name, end - start, peak, util.mean(start, end)))
            print(f"  {name:<16} {end - start:8.1f} s", flush=True)

        print(
            f"gpu_paper_scale{' --tiny' if args.tiny else ''}: backend full{' (tiny random transformer)' if args.tiny else ''}"
            f", device {device}, torch {torch.__version__}"
        )
        for name in names[:first_fit]:
            run(name, params)
        t = time.perf_counter()
        pr = probe(params, lay)
        t_probe = time.perf_counter() - t
        overrides, changes, full_cost, cost = plan(params, pr, args.budget_s)
        scaled = dict(overrides)
        if "finetune.epochs" in scaled:
            raw["model"]["full"]["finetune"]["epochs"] = scaled.pop("finetune.epochs")
        if "swag.epochs" in scaled:
            raw["model"]["full"]["swag"]["epochs"] = scaled.pop("swag.epochs")
        for key, value in scaled.items():
            raw["ppm"][key.split(".")[1]] = value
        if raw["ppm"]["draws"] < MIN_DRAWS_EPSILON:
            raw["ppm"]["smoke_test"] = True
        params = parse_params(raw)
        backend = backend_for(params, lay)
        print(
            f"data: {pr['n_train']} training records, {backend.n_classes} classes, max_length "
            f"{params.features.max_length}; θ: {pr['dim']:,} parameters; eval batch {backend.eval_batch_size}, "
            f"bf16 eval autocast {'on' if cuda and backend.amp else 'off (CPU: float32)' if not cuda else 'off'}"
        )
        print(
            f"probe ({t_probe:.1f} s): {pr['t_step'] * 1e3:.1f} ms per training step (batch "
            f"{params.backend.finetune.batch_size}), {pr['t_pass']:.3f} s per evaluation pass over the training "
            f"records ({pr['t_pass32']:.3f} s in float32)"
        )
        predicted = sum(cost.values())
        if changes:
            print(
                f"BUDGET {args.budget_s:.0f} s: predicted {sum(full_cost.values()):.0f} s at the configured settings, "
                f"so SCALED DOWN: {', '.join(changes)} (predicted {predicted:.0f} s, ×{SAFETY} margin); the figures below are for "
                "these settings, NOT the paper's"
            )
        else:
            print(f"budget {args.budget_s:.0f} s: predicted {predicted:.0f} s at the configured settings (not scaled)")
        if SAFETY * predicted > args.budget_s:
            print(
                f"WARNING: even the least settings are predicted at {predicted:.0f} s (×{SAFETY} margin): over the "
                f"{args.budget_s:.0f} s budget"
            )
        if params.ppm.smoke_test:
            print(
                f"NOTE: {params.ppm.draws} posterior draws (< {MIN_DRAWS_EPSILON}): ppm.smoke_test is on, "
                "the ε below is NOT meaningful"
            )
        print(
            f"settings: fine-tune {params.backend.finetune.epochs} epochs, SWAG {getattr(params.swag, params.model.backend).epochs} epochs "
            f"(rank {getattr(params.swag, params.model.backend).rank}), {params.ppm.draws} draws, calibration {params.ppm.calibration}, "
            f"re-weighting {params.ppm.reweight_mode if params.ppm.reweighting else 'off'} "
            f"(≤ {params.ppm.max_refits} refits)"
        )
        t_stages = time.perf_counter()
        for name in names[first_fit:]:
            run(name, params)
        measured = time.perf_counter() - t_stages

        # figures ------------------------------------------------------------------------------------------
        feats, y = features(lay, "test")
        model = backend.new_model(feats)
        set_flat(model, load_file(str(lay.finetune(1) / "theta.safetensors"))["theta"])
        pred = backend.predict_proba(model, feats).argmax(1).numpy()
        r1 = (
            f1_score(y.numpy(), pred, average="weighted", zero_division=0),
            f1_score(y.numpy(), pred, average="macro", zero_division=0),
        )
        ev = json.loads((lay.metrics / "evaluation.json").read_text())
        rel = json.loads((lay.metrics / "swag_ppm_draw.json").read_text())
        g, q = rel["guarantee"], rel["guarantee"]["quantities"]
    util.stop()

    print(f"\n{'stage':<16} {'wall s':>8} {'GPU peak GiB':>13} {'GPU util %':>11}")
    for name, secs, peak, u in rows:
        print(f"{name:<16} {secs:8.1f} {peak:>13} {u:>11}")
    print(f"{'probe':<16} {t_probe:8.1f}")
    print(
        f"stages from finetune_r1: {measured:.0f} s measured, {predicted:.0f} s predicted "
        f"(fits {cost['fits']:.0f}, calibration {cost['calibration']:.0f}, passes {cost['passes']:.0f}, "
        f"stage overhead {cost['overhead']:.0f})"
    )
    print("\nposterior passes (draws sampled on the device, per-record CE of every training record):")
    for desc, n, secs in PASSES:
        print(f"  {desc:<24} {n:5d} draws {secs:8.2f} s  {n / secs:8.1f} draws/s")
    if PASSES:
        n, secs = sum(p[1] for p in PASSES), sum(p[2] for p in PASSES)
        print(f"  {'all':<24} {n:5d} draws {secs:8.2f} s  {n / secs:8.1f} draws/s")
    print("\ntest F1 (weighted / macro):")
    print(f"  round-1 fine-tune (non-private)  {r1[0]:.3f} / {r1[1]:.3f}")
    print(
        f"  released draw (round {ev['released_round']})         {ev['released_weighted_f1']:.3f} / "
        f"{ev['released_macro_f1']:.3f}"
    )
    print(
        f"  {ev['draws']} draws, mean ± sd           {ev['weighted_f1_mean']:.3f} ± {ev['weighted_f1_sd']:.3f} / "
        f"{ev['macro_f1_mean']:.3f} ± {ev['macro_f1_sd']:.3f}"
    )
    eps = g["epsilon"]
    print(
        f"\nε = {'none claimed' if eps is None else f'{eps:.4g}'} ({g['kind']}); 2Δ̂ at T = 1: "
        f"{q.get('epsilon_at_temperature_one', float('nan')):.4g}; T_min (subspace) = "
        f"{q.get('temperature_min', float('nan')):.4g}, T_min over all {q.get('parameters', 0):,} directions = "
        f"{q.get('temperature_min_all', float('nan')):.4g}; {q.get('posterior_draws')} posterior draws"
    )
    import resource

    print(
        f"total wall {time.perf_counter() - began:.0f} s; host peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
