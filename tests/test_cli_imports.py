"""The commands that compute nothing — ``dprelease verify``, ``dprelease key …``, ``dprelease secret …`` and every
``--help`` — import no torch, sklearn or transformers (issue 54: ``verify`` spent about 10 s importing them). Each
case runs the real command's ``main`` in a fresh interpreter on a small project and reads which modules it loaded;
each module those commands import is checked on its own too, so that a failure names the module that brought one
in. No timing here: benchmarks/bench_cli.py measures the commands. (``stage``, ``predict``, ``sanitize``,
``track``, ``dvc-yaml`` and ``plugin-index`` compute, or read every plug-in's stages: not checked here, except that
``predict`` loads only what scoring needs: torch, but neither transformers, sklearn, scipy, the typed config's
pydantic, Prefect nor MLflow.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, slice_raw
from release_helpers import tiny_release

from dprelease.core.io import write_json
from dprelease.core.release.check import MANIFEST, file_digests
from dprelease.core.release.signing import KEY_ENV, PUBLIC, key_folder, load_signer, sign_folder

HEAVY = ("torch", "sklearn", "transformers")
WAIT_S = 900  # a fresh interpreter on a loaded machine: generous, returned from as soon as it ends
REPORT = "import json, sys; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})))"
RUN = f"""
import sys
from dprelease.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:  # --help
    rc = e.code
print("rc", rc)
{REPORT.format(heavy=set(HEAVY))}
"""
# what the commands above import (dprelease.cli dispatches to these): each alone, in a fresh interpreter
MODULES = (
    "dprelease.cli",
    "dprelease.core.release.verify",
    "dprelease.core.release.keys_cli",
    "dprelease.core.release.key_transfer",
    "dprelease.core.release.signing",
    "dprelease.core.release.classifier",
    "dprelease.core.release.sanitizer",
    "dprelease.core.release.check",
    "dprelease.core.untrusted",
    "dprelease.core.architecture",
    "dprelease.core.privacy.secret",
    "dprelease.core.privacy.key_guard",
)


def _fresh(code: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, "DPRELEASE_PARAMS")}
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=WAIT_S
    )


def dprelease(cwd: Path, *argv: str) -> tuple[int, list[str], list[str]]:
    """(exit code, stdout lines, heavy modules loaded) of ``dprelease ARGV`` run by a fresh interpreter in ``cwd``."""
    proc = _fresh(RUN, *argv, cwd=cwd)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and len(lines) >= 2 and lines[-2].startswith("rc "), (proc.stdout, proc.stderr[-2000:])
    return int(lines[-2].split()[1]), lines[:-2], json.loads(lines[-1])


@pytest.mark.parametrize("module", MODULES)
def test_importing_the_module_imports_nothing_heavy(module):
    proc = _fresh(f"import {module}; " + REPORT.format(heavy=set(HEAVY)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", f"{module} imports {proc.stdout.strip()}"


@pytest.mark.parametrize(
    "argv", [["--help"], ["verify", "--help"], ["key", "--help"], ["secret", "--help"]], ids=lambda argv: " ".join(argv)
)
def test_help_imports_nothing_heavy(argv):
    rc, out, heavy = dprelease(ROOT, *argv)
    assert rc == 0 and any("usage: dprelease" in line for line in out)
    assert heavy == []


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project root with its params file (nothing else: the commands make their keys)."""
    root = tmp_path_factory.mktemp("cli-imports")
    (root / "params.yaml").write_text(yaml.safe_dump(slice_raw()), encoding="utf-8")
    return root


def test_key_and_secret_commands_and_verify_import_nothing_heavy(project):
    """The agency key's life (init, show, export, a release verified with it, rotate: which re-signs the release,
    verify again with the new key) and the randomness key's (init, show, rotate), each a fresh ``dprelease``."""

    def run(*argv: str) -> list[str]:
        rc, out, heavy = dprelease(project, *argv)
        assert rc == 0, (argv, out)
        assert heavy == [], f"dprelease {' '.join(argv)} imports {heavy}"
        return out

    assert run("key", "init", "--signer", "CLI Test Agency")[0].startswith("made agency key")
    assert "signer CLI Test Agency" in run("key", "show")[0]
    run("key", "export", "--output", "agency.pub")
    params = _params(project)
    release = tiny_release(project / params.release, signer=load_signer(key_folder(params, project)))
    assert (
        "classifier release signed by CLI Test Agency"
        in run("verify", "--release", str(release), "--key", "agency.pub")[0]
    )
    assert f"re-signed: {params.release}" in run("key", "rotate")  # the project's release folder, checked first
    run("key", "export", "--output", "agency2.pub")
    assert "signed by CLI Test Agency" in run("verify", "--release", str(release), "--key", "agency2.pub")[0]
    assert run("secret", "init")[0].startswith("randomness key id")
    assert run("secret", "show")[0].startswith("randomness key id")
    assert run("secret", "rotate")[0].startswith("randomness key rotated")


def test_verify_of_a_sanitizer_release_imports_nothing_heavy(project, tmp_path):
    from safetensors.torch import save_file

    from dprelease.core.backends.encoder import encoder_reference
    from dprelease.mechanisms.gpp.model import Encoder
    from dprelease.mechanisms.gpp.sanitizer import guarantee

    folder = tmp_path / "release-gpp"
    folder.mkdir()
    save_file(Encoder(384, 4, (8,)).state_dict(), str(folder / "model.safetensors"))
    write_json(folder / "model.json", {"mechanism": "gpp", "d_in": 384, "d_z": 4, "hidden": [8]})
    write_json(
        folder / MANIFEST,
        {
            "kind": "sanitizer",
            "mechanism": "gpp",
            "input": encoder_reference(),
            "guarantee": guarantee({"adversary_auc": 0.62, "noprivacy_adversary_auc": 0.8}),
            "files": file_digests(folder),
        },
    )
    keys = key_folder(_params(project), project)
    if not (keys / PUBLIC).is_file():  # run alone: the key test above has not made it
        from dprelease.core.release.signing import ensure_key

        ensure_key(keys, signer="CLI Test Agency")
    sign_folder(folder, load_signer(keys))
    rc, out, heavy = dprelease(project, "verify", "--release", str(folder), "--key", str(keys / PUBLIC))
    assert rc == 0 and "gpp sanitizer release" in out[0], out
    assert heavy == []


def test_a_refused_verify_imports_nothing_heavy(project, tmp_path):
    """A release the key did not sign: the one-line refusal, without the heavy imports either."""
    from dprelease.core.release.signing import ensure_key

    other, _ = ensure_key(tmp_path / "other-keys", signer="Someone Else")
    release = tiny_release(tmp_path / "release", signer=other)
    keys = key_folder(_params(project), project)
    if not (keys / PUBLIC).is_file():
        ensure_key(keys, signer="CLI Test Agency")
    rc, out, heavy = dprelease(project, "verify", "--release", str(release), "--key", str(keys / PUBLIC))
    assert rc == 2 and out == []
    assert heavy == []


def _params(root: Path):
    from dprelease.core.config import load_params

    return load_params(root / "params.yaml")


SCORING_ONLY = ("sklearn", "transformers", "scipy", "pydantic", "prefect", "mlflow")


def test_predict_loads_only_what_scoring_needs(tmp_path):
    """The real ``dprelease predict`` of a tiny signed head release, in a fresh interpreter (issue 54: 5 narratives
    took 23 s, most of it imports)."""
    from dprelease.core.release.signing import ensure_key

    signer, _ = ensure_key(tmp_path / "keys", signer="CLI Test Agency")
    release = tiny_release(tmp_path / "release", signer=signer)
    report = REPORT.format(heavy={"torch", *SCORING_ONLY})
    code = RUN.replace(REPORT.format(heavy=set(HEAVY)), report)
    proc = _fresh(
        code,
        "predict",
        "--release",
        str(release),
        "--key",
        str(tmp_path / "keys" / PUBLIC),
        "--input",
        str(ROOT / "data" / "example_narratives.csv"),
        "--output",
        str(tmp_path / "coded.csv"),
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines[-2] == "rc 0", (proc.stdout, proc.stderr[-2000:])
    loaded = {m.split(".")[0] for m in json.loads(lines[-1])}
    assert "torch" in loaded  # not vacuous: it scored
    assert loaded & set(SCORING_ONLY) == set(), f"predict imports {sorted(loaded & set(SCORING_ONLY))}"
    assert len((tmp_path / "coded.csv").read_text(encoding="utf-8").splitlines()) == 6
