"""The comparison flow on Prefect's Dask task runner (prefect-dask, a local cluster of worker processes) on the
head slice: with 2 workers every private array, model and metric is byte for byte the in-process run's (the
reference is itself the one-process schedule; two workers split the chunks between processes). On Dask the
posterior passes of risk, sensitivity and the two SWAG-PPM variant arms run as seeded chunk tasks on the
workers, and the non-private arm runs as a stage task on a worker.

The reference runs the same stages in-process (no Prefect). The Dask run has a Prefect home of its own (an
empty stage store: every stage recomputed) and the code version is frozen, as in test_release_flow.py. One
temporary Prefect server serves the module; the flow run starts its own local cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import compare_raw, copy_key, make_root, run_stages

from dprelease.contracts import source
from dprelease.core.config import parse_params
from dprelease.pipeline import registry

pytestmark = pytest.mark.slow

ARMS = ["nonprivate", "swag_ppm", "swag_ppm_uncalibrated", "swag_ppm_censored"]
DRAWS, BATCH = 10, 3  # 4 chunks per pass (3 + 3 + 3 + 1)
PASSES = ["risk", "sensitivity_r2", "swag_ppm_uncalibrated", "swag_ppm_censored"]  # chunked on Dask
IGNORED = {"metrics/timings.json", "metrics/mlflow_run.json"}


def _params(workers: int, keys: Path):
    """``keys``: one agency key folder for every run (the release's signature is then byte-identical too)."""
    return parse_params(
        compare_raw(
            ppm__draws=DRAWS,
            ppm__draw_batch=BATCH,
            compare__arms=ARMS,
            dask={"enabled": True, "workers": workers},
            signing_key=str(keys),
        )
    )


def _without_code_version(obj):
    if isinstance(obj, dict):
        return {k: _without_code_version(v) for k, v in obj.items() if k != "code_version"}
    return [_without_code_version(v) for v in obj] if isinstance(obj, list) else obj


def _outputs(root: Path) -> dict[str, bytes]:
    """Every file the stages wrote (artifacts, metrics, reports, the release), by path. A manifest's
    ``code_version`` hashes the source files as they are when it is written (others may edit them while the
    suite runs; the worker processes hash the files themselves): left out."""
    files = {}
    for top in ("artifacts", "metrics", "reports", "release"):
        for p in sorted((root / top).rglob("*")):
            rel = p.relative_to(root).as_posix()
            if p.is_file() and "/.stamps/" not in f"/{rel}" and rel not in IGNORED:
                files[rel] = p.read_bytes()
                if p.suffix == ".json" and b'"code_version"' in files[rel]:
                    files[rel] = json.dumps(_without_code_version(json.loads(files[rel]))).encode()
    return files


@pytest.fixture(scope="module")
def env():
    import flows.compare as fc

    frozen = source.code_hash(["."])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(source, "code_hash", lambda paths: frozen)
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield SimpleNamespace(fc=fc)


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("agency") / "keys"


@pytest.fixture(scope="module")
def randomness(tmp_path_factory) -> Path:
    """One project randomness key for every run: the released draws are then the same wherever they ran."""
    from dprelease.core.privacy import secret

    artifacts = tmp_path_factory.mktemp("randomness") / "artifacts"
    secret.init(artifacts)
    return artifacts / "secret"


def _root(path: Path, randomness: Path) -> Path:
    return copy_key(randomness, make_root(path))


@pytest.fixture(scope="module")
def reference(env, keys, randomness, tmp_path_factory) -> dict[str, bytes]:
    params = _params(1, keys).model_copy(update={"dask": parse_params({}).dask})  # dask off: plain in-process
    root = _root(tmp_path_factory.mktemp("inprocess"), randomness)
    names = [s.name for s in registry.group(params, "release")] + ARMS + ["compare_report", "publish"]
    run_stages(params, root, names)
    return _outputs(root)


def _chunk_runs(flow_run_id) -> list:
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    return [r for r in runs if r.name.startswith("chunk ")]


@pytest.fixture(scope="module", params=[2], ids=["2-workers"])
def on_dask(request, env, keys, randomness, tmp_path_factory):
    from prefect.settings import PREFECT_HOME, temporary_settings

    from flows import runners

    params = _params(request.param, keys)
    runner = runners.task_runner(params)
    assert runners.is_dask(runner)
    root = _root(tmp_path_factory.mktemp(f"dask{request.param}"), randomness)
    # a Prefect home of its own: an empty stage store (every stage recomputed, on the workers too) that no
    # other test module sees; the temporary API server stays the module's
    with temporary_settings(updates={PREFECT_HOME: str(tmp_path_factory.mktemp("home"))}):
        state = env.fc.compare_flow.with_options(task_runner=runner)(
            params.model_dump(mode="json"), str(root), False, return_state=True
        )
    assert state.is_completed(), state
    return SimpleNamespace(root=root, outputs=_outputs(root), chunks=_chunk_runs(state.state_details.flow_run_id))


def test_outputs_are_bit_identical_to_the_in_process_run(reference, on_dask):
    assert sorted(on_dask.outputs) == sorted(reference)
    differ = [rel for rel in reference if on_dask.outputs[rel] != reference[rel]]
    assert not differ, differ
    # not vacuous: the private arrays of the passes are among them
    assert {
        "artifacts/round2/weights/weights.npy",
        "artifacts/round2/sensitivity/record_max_loss.npy",
        "artifacts/round2/sensitivity/max_deltas.npy",
        "metrics/sensitivity_r2.json",
        "release/release.sig",
    } <= set(reference)


def test_passes_ran_as_chunk_tasks(on_dask):
    chunks = on_dask.chunks
    assert len(chunks) == len(PASSES) * -(-DRAWS // BATCH)
    assert all(r.state.is_completed() for r in chunks)
    assert sorted({r.name for r in chunks}) == [f"chunk {i}" for i in range(-(-DRAWS // BATCH))]
