"""A tiny NVDP root: the OSHA slice plus the first rows of the shipped GLUE files, run once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, make_root, slice_raw, trace_package

GLUE_ROWS = 40


def nvdp_root(path: Path) -> Path:
    root = make_root(path)
    for task in ("MRPC", "RTE", "SST-2"):
        (root / "data" / "glue" / task).mkdir(parents=True, exist_ok=True)
        for split in ("train", "dev"):
            lines = (ROOT / "data" / "glue" / task / f"{split}.tsv").read_text(encoding="utf-8-sig").splitlines()
            (root / "data" / "glue" / task / f"{split}.tsv").write_text(
                "\n".join(lines[: GLUE_ROWS + 1]) + "\n", encoding="utf-8"
            )
    return root


def nvdp_params(**nvdp):
    from dprelease.core.config import parse_params

    raw = slice_raw("head")
    raw["nvdp"] = {
        "tasks": ["mrpc", "osha"],
        "lambdas": [0.01, 1.0],
        "dim": 8,
        "heads": 2,
        "epochs": 2,
        "max_length": 32,
        "batch_size": 8,
        "eval_batch": 8,
        "sst2_max_train": 30,
        "release_lambda": 0.01,
        **nvdp,
    }
    return parse_params(raw)


@pytest.fixture(scope="session")
def nvdp_run(tmp_path_factory):
    from dprelease.pipeline import registry

    params = nvdp_params()
    root = nvdp_root(tmp_path_factory.mktemp("nvdp"))
    used = {}  # package files each stage ran code in (checked against its declaration)
    for stage in registry.group(params, "nvdp"):
        used[stage.name] = trace_package(lambda: stage.run(params, root))
    return params, root, used
