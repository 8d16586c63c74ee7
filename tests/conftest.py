"""Shared fixtures: a tiny OSHA slice run end to end once per session (head, full-tiny, no re-weighting).

Everything is written under pytest's tmp roots; Prefect gets its own throw-away home so tests never
touch the project's ``.prefect/`` (or contend with a flow running there). The audit's fits run in the test
process unless a test asks for worker processes (``DPRELEASE_AUDIT_WORKERS``, set here when unset).
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

# the suite's order (longest modules first) and `make test-durations`: tests/longest_first.py
from longest_first import (  # noqa: F401
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_runtest_logreport,
    pytest_sessionfinish,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "osha_sir_2015_2016.csv.gz"
SLICE_DATA = "data/sir.csv.gz"  # where each test root gets its copy (relative: resolved against the root)

if str(ROOT) not in sys.path:  # `flows` and `tasks` live at the repository root
    sys.path.insert(0, str(ROOT))

_OPT = {"epochs": 2, "lr": 0.001, "batch_size": 8, "weight_decay": 0.01}
_SWAG = {"epochs": 3, "lr": 0.01, "batch_size": 8, "rank": 3}
SLICE = {
    "seed": 7,
    # a declared label space of four codes frequent in both periods (public counts 441 to 2,728); cap 12: about 12
    # private reports per code at the public rates, about 24 training records
    "data": {"path": SLICE_DATA, "codes": ["111", "132", "1311", "1972"], "cap": 12},
    "features": {"max_length": 32},
    "model": {
        "backend": "head",
        "head": {"hidden": 16, "finetune": _OPT},
        "full": {"tiny": True, "finetune": _OPT},
    },
    "swag": {"head": _SWAG, "full": _SWAG},
    "ppm": {"draws": 6, "draw_batch": 4, "smoke_test": True, "max_refits": 2},  # 6 draws: ε not meaningful, tests only
    "evaluation": {"draws": 3},
    "privacy_audit": {"replay_targets": 4},  # the replay audit's re-fits: 2 × (4 + 1) on the slice
    "tracking": {"mlflow_uri": "sqlite:///mlflow.db"},
    # the suite's release fixtures release SWAG-PPM (the chain most tests examine); the declared default, DP-SGD,
    # has its own end-to-end tests (tests/core/release/test_stages.py, tests/test_quickstart.py)
    "released": {"mechanism": "swag_ppm"},
    # the public period (reports up to 2015-12-31) fixes the rates; 2 % of the rest of it trains the public model
    "proxy": {"rest_rate": 0.02},
}

# the privacy audit's sizes where a test checks that the audit ran and what it attached, not its power (the
# defaults embed a 6,000-row population pool and fit 16 reference models: about 30 s on the slice)
SMALL_AUDIT = {
    "pool_size": 300,
    "references": 3,
    "canaries": 40,
    "input_canaries": 200,
    "guess_grid": [10, 40],
    "replay_targets": SLICE["privacy_audit"]["replay_targets"],
}

_PREFECT_TMP: str | None = None


def pytest_configure(config):
    """Point Prefect at a throw-away home before anything imports it: tests must neither write into the
    project's .prefect/ nor share its sqlite DB with a running flow. Every other Prefect setting comes
    from prefect.toml (its database and results paths follow the home)."""
    global _PREFECT_TMP
    from dprelease.core import offline

    offline.apply()
    _PREFECT_TMP = tempfile.mkdtemp(prefix="dprelease-test-prefect-")
    os.environ["PREFECT_HOME"] = _PREFECT_TMP
    # the audit's fits in the test process (and in the flows the tests start): on the tiny slice, starting worker
    # processes costs more than the fits; tests/compare/mia/test_workers.py runs the audit stages with two worker
    # processes and checks their outputs are the one-worker outputs, byte for byte
    os.environ.setdefault("DPRELEASE_AUDIT_WORKERS", "1")


def pytest_unconfigure(config):
    if _PREFECT_TMP:
        shutil.rmtree(_PREFECT_TMP, ignore_errors=True)


# helpers ------------------------------------------------------------------------------------------
# A release whose certified ε is finite at a usable size, for the tests of what happens downstream of a claim (gates,
# promotion, tuning): the sampler widened to the prior in every direction. With the default calibration the ε
# certified over all directions is ~10⁹ on the slice and no ε gate could pass (docs/guarantees.md, K.9).
GATED = {"ppm__calibration": "prior"}


def slice_raw(backend: str = "head", **overrides) -> dict:
    """The tiny-slice params mapping; ``overrides`` are dotted keys with '__' for '.', e.g. ppm__c=0.8."""
    raw = copy.deepcopy(SLICE)
    raw["model"]["backend"] = backend
    return _override(raw, overrides)


def _override(raw: dict, overrides: dict) -> dict:
    for dotted, value in overrides.items():
        node = raw
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return raw


# The suite runs under one fixed randomness key, so a CI run is reproducible (a release's training, draws and
# canaries all come from the key: privacy/secret.py); the tests that vary the key on purpose delete it or
# rotate it (tests/core/privacy/test_secret*.py). Never a key outside tests: it is public by construction.
TEST_KEY = hashlib.sha256(b"dprelease: the test suite's fixed, public randomness key").hexdigest()


def install_test_key(root: Path, artifacts: str = "artifacts") -> Path:
    """Give ``root`` the suite's fixed key (0600 in a 0700 folder, as ``secret.init`` makes it)."""
    folder = root / artifacts / "secret"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    (root / artifacts).chmod(0o700)
    folder.chmod(0o700)
    key = folder / "key"
    key.write_text(TEST_KEY + "\n", encoding="ascii")
    key.chmod(0o600)
    return root


def make_root(path: Path, *, test_key: bool = True) -> Path:
    """A project root holding a copy of the bundled data at ``SLICE_DATA`` and (unless ``test_key`` is false)
    the suite's fixed randomness key."""
    (path / SLICE_DATA).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA, path / SLICE_DATA)
    return install_test_key(path) if test_key else path


def written(root: Path, top: str = "artifacts") -> list[str]:
    """Files under ``root/top`` that a run wrote (the suite's test key, installed before any run, aside)."""
    folder = root / top
    key = folder / "secret" / "key"
    return (
        sorted(p.relative_to(root).as_posix() for p in folder.rglob("*") if p.is_file() and p != key)
        if folder.exists()
        else []
    )


def copy_key(secret_dir: Path, root: Path, artifacts: str = "artifacts") -> Path:
    """Give ``root`` the randomness key folder ``secret_dir`` (the operator's key: the same releases expected)."""
    (root / artifacts).mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.rmtree(root / artifacts / "secret", ignore_errors=True)
    shutil.copytree(secret_dir, root / artifacts / "secret")
    return root


def trace_package(fn) -> set[str]:
    """Package-relative source files in which a function ran while ``fn`` ran (this thread): what a stage's
    code declaration is checked against."""
    from dprelease.contracts import source

    pkg = str(source.PACKAGE_DIR) + "/"
    seen: set[str] = set()

    def calls(frame, event, arg):  # a global trace function sees each Python call; None: no line events
        if frame.f_code.co_filename.startswith(pkg):
            seen.add(frame.f_code.co_filename)

    sys.settrace(calls)  # not setprofile: that also fires on every C call (each torch op)
    try:
        fn()
    finally:
        sys.settrace(None)
    return {Path(f).relative_to(source.PACKAGE_DIR).as_posix() for f in seen}


def run_stages(params, root: Path, names: list[str]) -> dict:
    from dprelease.pipeline.registry import run_stage

    return {name: run_stage(name, params, root) for name in names}


class SliceRun:
    def __init__(self, params, root: Path, summaries: dict):
        self.params, self.root, self.summaries = params, root, summaries

    def path(self, rel: str) -> Path:
        return self.root / rel


def _slice_run(tmp_path_factory, name: str, backend: str, all_specs: bool = False, **overrides) -> SliceRun:
    from dprelease.core.config import parse_params
    from dprelease.pipeline import registry

    params = parse_params(slice_raw(backend, **overrides))
    root = make_root(tmp_path_factory.mktemp(name))
    stages = registry.group(params, "release", active_only=not all_specs)
    return SliceRun(params, root, run_stages(params, root, [s.name for s in stages]))


@pytest.fixture(scope="session")
def head_run(tmp_path_factory) -> SliceRun:
    """Every stage, in-process, on the head slice (re-weighting on)."""
    return _slice_run(tmp_path_factory, "head", "head")


@pytest.fixture(scope="session")
def full_run(tmp_path_factory) -> SliceRun:
    """Every stage, in-process, on the full backend with the tiny random transformer."""
    return _slice_run(tmp_path_factory, "full", "full")


@pytest.fixture(scope="session")
def noreweight_run(tmp_path_factory) -> SliceRun:
    """``ppm.reweight: false``; runs ALL release stages as DVC would, so round-3 stages (and ``select``,
    with no validation split) leave skip markers."""
    return _slice_run(tmp_path_factory, "noreweight", "head", all_specs=True, ppm__reweight=False)


# the comparison arms ---------------------------------------------------------------------------------
COMPARE = {  # tiny DP-SGD runs and a short δ sweep (the slice has 24 training records)
    "dpsgd": {
        "head": {"epochs": 2, "batch_size": 8},
        "full": {"epochs": 1, "batch_size": 8},
        "delta_sweep": [1e-3, 0.5],
    },
    "nonprivate": {"epochs": 3},
}


def compare_raw(backend: str = "head", **overrides) -> dict:
    """The slice params plus the short comparison settings; ``overrides`` as in :func:`slice_raw`."""
    raw = slice_raw(backend)
    raw.update(copy.deepcopy(COMPARE))
    return _override(raw, overrides)


def _arm_stages() -> list[str]:
    """The comparison group's arm stages in the registry's order (nonprivate, the SWAG-PPM arms, DP-SGD, …):
    derived from the listed packages, so a new mechanism's arm joins without an edit here."""
    from dprelease.core.config import parse_params
    from dprelease.pipeline import registry

    return [s.name for s in registry.group(parse_params(compare_raw()), "compare") if s.name != "compare_report"]


ARM_STAGES = _arm_stages()


def copy_root(src: Path, dst: Path) -> Path:
    """A private copy of a session run's root (session roots are shared: never write into them)."""
    shutil.copytree(src, dst, dirs_exist_ok=True)
    return dst


@pytest.fixture(scope="session")
def arms_run(head_run, tmp_path_factory) -> SliceRun:
    """The comparison arms (non-private, SWAG-PPM round 2, DP-SGD, δ sweep) on a copy of the head slice;
    the SWAG-PPM release there is reused, not re-run. Tests that write must copy this root too."""
    from dprelease.core.config import parse_params

    params = parse_params(compare_raw())
    root = copy_root(head_run.root, tmp_path_factory.mktemp("arms"))
    return SliceRun(params, root, run_stages(params, root, ARM_STAGES))


@pytest.fixture
def no_training(monkeypatch):
    """Any training (DP-SGD or ordinary fine-tuning) fails the test: input errors must come first."""
    import dprelease.core.training as training
    import dprelease.mechanisms.dpsgd.stages as dpsgd_stages
    import dprelease.mechanisms.dpsgd.train as dpsgd_train
    import dprelease.mechanisms.nonprivate.stages as nonprivate_stages
    import dprelease.mechanisms.swag_ppm.fit as fit

    def trained(*a, **k):  # pragma: no cover - only reached on failure
        raise AssertionError("training started despite invalid input")

    for mod, name in [
        (dpsgd_stages, "train_dpsgd"),
        (dpsgd_train, "train_dpsgd"),
        (nonprivate_stages, "finetune"),
        (fit, "run_finetune"),
        (training, "finetune"),
    ]:
        monkeypatch.setattr(mod, name, trained)


# tiny head problems for loop tests (training, SWAG) ---------------------------------------------------------------
@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny tensors: one intra-op thread is faster (and steadier on a busy machine); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_problem(n: int, classes: int = 3, seed: int = 0, dim: int = 384):
    """Unit-norm features with labels a (linear) function of them, so the problem is learnable."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(seed)
    x = F.normalize(torch.randn(n, dim, generator=g), dim=1)
    y = (x @ torch.randn(dim, classes, generator=g)).argmax(1)
    return {"x": x}, y


def tiny_head_backend(classes: int = 3, hidden: int = 8):
    import torch

    from dprelease.core.backends.head import HeadBackend
    from dprelease.core.config import HeadParams

    return HeadBackend(n_classes=classes, device=torch.device("cpu"), seed=1, params=HeadParams(hidden=hidden))


@contextmanager
def fresh_registry(folder: Path):
    """(mlflow, client, a model source) on a fresh SQLite registry in ``folder``; the tracking URI is restored
    after."""
    import mlflow

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.db'}")
    mlflow.set_experiment("registry-test")  # not an experiment id another test left active (absent here)
    source = folder / "model"
    source.mkdir()
    (source / "MLmodel").write_text("flavors: {}\n", encoding="utf-8")
    try:
        yield mlflow, mlflow.MlflowClient(), source.as_uri()
    finally:
        mlflow.set_tracking_uri(previous)


@contextmanager
def mlflow_globals():
    """Restore MLflow's globals and the env vars it exports (set_tracking_uri / set_experiment write them), so
    that a test's tracking URI or active experiment never leaks into the next test."""
    import mlflow.tracking._tracking_service.utils as tracking_utils
    import mlflow.tracking.fluent as fluent

    from dprelease.pipeline.tracking import HTTP_LIMITS

    names = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID", "MLFLOW_RUN_ID", *HTTP_LIMITS)
    env = {k: os.environ.get(k) for k in names}
    saved = (tracking_utils._tracking_uri, fluent._active_experiment_id)
    for k in names:
        os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        tracking_utils._tracking_uri, fluent._active_experiment_id = saved
