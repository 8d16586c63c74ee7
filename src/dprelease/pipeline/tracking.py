"""MLflow: one run per pipeline run with public params, ε per round, Δ̂, utility, plots and the release manifest.
Only aggregates from ``metrics/`` are read; per-record artifacts are never touched.

Tracking never endangers a release: bounded HTTP timeouts and retries; the store is initialised under a file lock
(two runs creating ``mlflow.db`` at once would race); a copied project logs into its own ``mlartifacts/``; a run
killed mid-logging is closed as KILLED by the next tracking call (id in ``.mlflow-pending.json``): none stays RUNNING.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from pathlib import Path

from dprelease.contracts.layout import Layout
from dprelease.contracts.stage import flat
from dprelease.core.config import Params
from dprelease.core.headline import released_record
from dprelease.core.io import read_json, write_json
from dprelease.core.locks import file_lock
from dprelease.core.privacy.guarantee import Guarantee

PUBLIC_METRIC_FILES = ("data", "released")
HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}
PENDING = ".mlflow-pending.json"
EXPERIMENT_KIND, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"


def tracking_uri(params: Params, root: str | Path = ".") -> str:
    """The configured URI; a relative ``sqlite:///file`` is anchored at the project root."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or params.tracking.mlflow_uri
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri[len(prefix) :].startswith("/"):
        uri = prefix + str((Path(root) / uri[len(prefix) :]).resolve())
    return uri


def _setup(params: Params, root: str | Path):
    import logging

    for key, value in HTTP_LIMITS.items():
        os.environ.setdefault(key, value)
    import mlflow

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # retry chatter; a failure is reported once, by the caller
    uri = tracking_uri(params, root)
    artifacts = (Path(root) / "mlartifacts").resolve()
    with file_lock(Path(root) / ".mlflow.lock"):
        if uri.startswith("sqlite:///"):
            _relocate(Path(uri[len("sqlite:///") :]), artifacts)
        user_uri = os.environ.get("MLFLOW_TRACKING_URI")
        mlflow.set_tracking_uri(uri)
        # MLflow also exports the URI to the environment; keep the user's value (or none), or a later
        # run for another project root in this process would log into this root's store
        os.environ.pop("MLFLOW_TRACKING_URI", None) if user_uri is None else os.environ.update(
            MLFLOW_TRACKING_URI=user_uri
        )
        name = params.tracking.experiment
        if mlflow.get_experiment_by_name(name) is None:
            # marked as model training, so MLflow 3's UI opens it on its runs, not on the GenAI overview
            mlflow.create_experiment(name, artifact_location=artifacts.as_uri(), tags={EXPERIMENT_KIND: MODEL_TRAINING})
        exp = mlflow.set_experiment(name)
        if exp.tags.get(EXPERIMENT_KIND) != MODEL_TRAINING:  # an experiment created by an earlier version
            mlflow.set_experiment_tag(EXPERIMENT_KIND, MODEL_TRAINING)
        _close_abandoned(mlflow, Path(root))
    return mlflow


def open_store(params: Params, root: str | Path = "."):
    """The ``mlflow`` module pointed at the project's store (experiment set, abandoned runs closed)."""
    return _setup(params, root)


def _relocate(db: Path, artifacts: Path) -> None:
    """A project copied (or moved) elsewhere keeps an ``mlflow.db`` whose experiments point at the old
    project's ``mlartifacts/``: point them (and their runs) at this project's instead."""
    if not db.is_file():
        return
    new = artifacts.as_uri()
    with contextlib.closing(sqlite3.connect(db)) as con:
        try:
            rows = con.execute("SELECT experiment_id, artifact_location FROM experiments").fetchall()
        except sqlite3.DatabaseError:
            return  # not initialised yet, or not an MLflow store: MLflow will say so
        for exp_id, old in rows:
            if old and old != new and old.rstrip("/").endswith("/mlartifacts") and old.startswith("file:"):
                con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (new, exp_id))
                con.execute(
                    "UPDATE runs SET artifact_uri = ? || substr(artifact_uri, ?) "
                    "WHERE experiment_id = ? AND artifact_uri LIKE ? || '%'",
                    (new, len(old) + 1, exp_id, old),
                )
        con.commit()


def _pending(root: Path) -> list[str]:
    try:
        return json.loads((root / PENDING).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


def _close_abandoned(mlflow, root: Path) -> None:
    """Runs a killed process left RUNNING are closed as KILLED."""
    client = mlflow.MlflowClient()
    for run_id in _pending(root):
        with contextlib.suppress(Exception):
            if client.get_run(run_id).info.status == "RUNNING":
                client.set_terminated(run_id, "KILLED")
    write_json(root / PENDING, [])


@contextlib.contextmanager
def _run(mlflow, root: str | Path, **kwargs):
    """``mlflow.start_run`` whose id waits in the pending list until the run is closed."""
    root = Path(root)
    if not kwargs.get("nested"):
        kwargs["tags"] = _source_tags(root) | kwargs.get("tags", {})
    with mlflow.start_run(**kwargs) as run:
        write_json(root / PENDING, [*_pending(root), run.info.run_id])
        try:
            yield run
        finally:
            write_json(root / PENDING, [r for r in _pending(root) if r != run.info.run_id])


def _source_tags(root: Path) -> dict:
    """The code version a run ran (MLflow fills these only when started from a script inside a git
    checkout, not from the ``dprelease`` console script or a Prefect worker)."""
    import subprocess

    try:  # one call: the commit, then the branch name
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD", "--abbrev-ref", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return {}
    commit, branch = (out + ["", ""])[:2]
    tags = {"mlflow.source.git.commit": commit} if len(commit) == 40 else {}
    return tags | ({"mlflow.source.git.branch": branch} if tags and branch and branch != "HEAD" else {})


def release_run_name(params: Params, g: Guarantee) -> str:
    """What ran, in the runs table: mechanism, backend, the claim and the release's key settings (its
    ``ReleaseSpec.run_name``; by default its kind and δ)."""
    from dprelease.pipeline import registry

    q = g.quantities
    claim = (
        f"ε={g.epsilon:.3f}"
        if g.epsilon is not None
        else f"index={q['uncertified_index']:.3f} (not DP)"
        if g.kind == "ppm_uncertified"
        else "no ε"
    )
    own = registry.release_spec(params).run_name
    rest = own(params, g, claim) if own is not None else None
    if rest is None:  # the claim, its kind and δ
        rest = [claim, g.kind] + ([f"δ={g.delta:.2g}"] if g.delta is not None else [])
    return " · ".join([g.mechanism, params.model.backend, *rest])


# the shared params sections a release run's MLflow params hold (output paths left out); each mechanism whose release
# runs adds its own settings (its ReleaseSpec's ``settings``): tests/pipeline/test_tracking.py checks the union against
# what the release's stages read
SHARED_SECTIONS = ("data", "features", "model", "proxy", "public_model", "released", "seed")


def _released(lay: Layout) -> tuple[Guarantee, dict]:
    """The released guarantee and the declared release's record (``metrics/released.json``, the publish step's)."""
    rec = released_record(lay.metrics)
    if rec is None:
        raise FileNotFoundError(f"{lay.metrics / 'released.json'}: no release was published (stage publish)")
    return Guarantee.from_dict(rec["guarantee"]), rec


def staged_releases(params: Params) -> list:
    """The ReleaseSpecs staged in the release run, the declared one first (:func:`dprelease.pipeline.registry.staged_releases`)."""
    from dprelease.pipeline import registry

    return registry.staged_releases(params)


def mechanism_params(params: Params) -> dict:
    """The settings the release's stages read, flattened: the shared sections (of ``model`` only the backend in use)
    and each staged release's own (:attr:`ReleaseSpec.settings <dprelease.contracts.mechanism.ReleaseSpec.settings>`)."""
    other = ({"head", "full"} - {params.model.backend}).pop()
    out = flat(params, list(SHARED_SECTIONS), drop=(f"model.{other}.",))
    for spec in staged_releases(params):
        out |= spec.settings(params)
    return dict(sorted(out.items()))


def details(params: Params, lay: Layout, timings: dict | None = None) -> dict:
    """Every public aggregate of the run beyond the headline figures (logged as ``details.json``): the data and
    release records' numbers, the released guarantee, the record's figures and diagnostics, what the released
    mechanism's plug-in put in the record (its ``details``: SWAG-PPM's released round) and the timed stages'
    durations. No statistic of a round that was not released is logged."""
    out: dict = {}
    for stem in PUBLIC_METRIC_FILES:
        path = lay.metrics / f"{stem}.json"
        if path.is_file():
            out[stem] = {k: v for k, v in read_json(path).items() if _is_number(v)}
    g, rec = _released(lay)
    out["guarantee"] = _guarantee_metrics(g)
    out["released"] = {k: v for k, v in rec.items() if k in ("weighted_f1", "macro_f1") and _is_number(v)} | {
        f"diagnostics.{k}": v for k, v in (rec.get("diagnostics") or {}).items() if _is_number(v)
    }
    out |= rec.get("details") or {}
    out["timings_s"] = {k: v for k, v in (timings or {}).items() if _is_number(v)}
    return out


def log_pipeline_run(
    params: Params,
    root: str | Path = ".",
    run_name: str | None = None,
    store_root: str | Path | None = None,
    timings: dict | None = None,
) -> str:
    """One run of the release at ``root``, logged into the MLflow store of ``store_root`` (default: the
    same root; a retrain's run folder logs into its project's store). Metrics: the headline figures only
    (:mod:`dprelease.core.headline`, the names the registry's version tags use); params: the settings the
    release's stages read; everything else in ``details.json``."""
    from dprelease.core.headline import INTERVAL_NOTE, headline

    lay = Layout.from_params(params, root)
    (lay.metrics / "mlflow_run.json").unlink(missing_ok=True)  # never name an older run if this one fails
    store_root = root if store_root is None else store_root
    mlflow = _setup(params, store_root)
    name = params.tracking.experiment
    g, rec = _released(lay)
    if run_name is None:
        run_name = release_run_name(params, g)
    with _run(mlflow, store_root, run_name=run_name) as run:
        mlflow.log_params(mechanism_params(params))
        figures = headline(lay.metrics)
        mlflow.log_metrics(figures)
        mlflow.log_dict(details(params, lay, timings), "details.json")
        diag_path = lay.metrics / "diagnostics.json"
        if diag_path.is_file():
            mlflow.set_tags(
                {
                    f"verdict_{k.replace(' ', '')}": d["verdict"]
                    for k, d in read_json(diag_path).items()
                    if k == f"round {g.quantities.get('round')}"
                }
            )  # the released round's only
        for png in sorted(lay.plots.glob("*.png")):
            mlflow.log_artifact(str(png), "plots")
        for csv in sorted(lay.evaluation.glob("*.csv")):
            mlflow.log_artifact(str(csv), "reports")
        _log_datasets(mlflow, params, root, lay)
        if (lay.release / "README.md").is_file():  # the model card, readable on the run page
            mlflow.log_artifact(str(lay.release / "README.md"), "release")
        mlflow.log_artifact(str(lay.release / "release.json"), "release")
        _guarantee_tags(mlflow, g)
        if "epsilon_ci_high" in figures:  # what the interval is (and is not): beside the metrics it labels
            mlflow.set_tag("epsilon_interval", INTERVAL_NOTE)
        mlflow.set_tag("released.mechanism", rec["mechanism"])
        mlflow.set_tag("mlflow.note.content", note(params, lay, g, rec))
        run_id = run.info.run_id
    write_json(lay.metrics / "mlflow_run.json", {"run_id": run_id, "experiment": name})
    return run_id


def note(params: Params, lay: Layout, g: Guarantee, rec: dict) -> str:
    """The run's description: what was released, in one line (from the release's record only)."""
    what = "".join(f"{k} {v} of " for k, v in (rec.get("tags") or {}).items()) + g.mechanism
    return (
        f"Released {what} ({params.model.backend} backend): "
        f"{g.claim_text} ({g.kind}; δ {g.delta_text}); released model weighted F1 "
        f"{rec['weighted_f1']:.4f}, macro F1 {rec['macro_f1']:.4f}; "
        f"{read_json(lay.metrics / 'data.json')['public']['expected_train_size']} expected training records "
        "(public n̂). Metrics: the headline figures; everything else in details.json."
    )


SPLIT_CONTEXT = {"train": "training", "validation": "validation", "test": "testing"}


def _log_datasets(mlflow, params: Params, root: str | Path, lay: Layout) -> None:
    """The extract and each split as MLflow dataset inputs: name and schema only; the digest names the declaration
    (path, release id), never the content (a private file's digest is a membership test given D∖{x} and x)."""
    import warnings

    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.types import ColSpec, Schema

    extract = Path(params.data.path).name
    inputs = [(Path(root) / params.data.path, f"{extract}", "source", None)]
    inputs += [
        (
            lay.data / f"{split}.csv",
            f"{extract} · {split}",
            SPLIT_CONTEXT[split],
            Schema([ColSpec("string", "text"), ColSpec("string", "label")]),
        )
        for split in SPLIT_CONTEXT
        if (lay.data / f"{split}.csv").is_file()
    ]
    for path, name, context, schema in (i for i in inputs if i[0].is_file()):
        with warnings.catch_warnings():  # "can be interpreted in multiple ways": both are the local-file source
            warnings.simplefilter("ignore")
            src = resolve_dataset_source(extract)
        declared = f"{params.data.path}\0{name}\0{params.released.release_id}".encode()
        ds = MetaDataset(src, name=name, digest=hashlib.sha256(declared).hexdigest()[:16], schema=schema)
        mlflow.log_input(ds, context=context)


_is_number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731 - a real number, not a bool


def _guarantee_metrics(g: Guarantee, prefix: str = "") -> dict:
    """ε, δ (when a number) and the mechanism's own numeric quantities under their own names."""
    out = {f"{prefix}{k}": v for k, v in g.quantities.items() if _is_number(v)}
    return out | {f"{prefix}{k}": v for k, v in (("epsilon", g.epsilon), ("delta", g.delta)) if v is not None}


def _guarantee_tags(mlflow, g: Guarantee) -> None:
    mlflow.set_tags({"mechanism": g.mechanism, "guarantee": g.kind, "delta": g.delta_text, "claim": g.claim_text})
