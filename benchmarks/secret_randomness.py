"""Two fresh clones, the same data, params and seed: different released draws; one clone re-run: the same bytes.

Clones the repository's HEAD twice into a scratch folder, runs ``make run`` in each (with this checkout's
virtual environment, the clone's own code first on the path), then wipes clone A's outputs except its
private key and runs ``make run`` there again. Prints, for the SWAG-PPM release and (``--dpsgd``) the
DP-SGD arm: whether A and B differ (they must: each clone made its own key from OS entropy) and whether A
reproduced itself byte for byte (it must: same key). Then searches every file of each clone outside its
private key folder — the release, metrics/, reports/, mlflow.db, dvc.lock, .prefect/ results and the
captured logs — for the key's value (hex, upper-case hex and raw bytes). Exit 1 on any failure.

    python benchmarks/secret_randomness.py [--dpsgd] [--keep DIR]

Takes two cold ``make run``s and a warm-ish one (about 3 × 5 min on 2 cores; the embeddings are
recomputed in each clone).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
KEY = Path("artifacts/secret/key")
RELEASE_MODEL = Path("release/model.safetensors")
DPSGD_MODEL = Path("artifacts/arms/dpsgd/model/model.safetensors")


def sh(cmd: list[str], cwd: Path, log: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{cwd / 'src'}{os.pathsep}{cwd}", "PREFECT_HOME": str(cwd / ".prefect")}
    with open(log, "ab") as out:
        subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=True)


def make(target: str, clone: Path, log: Path, args: str = "") -> None:
    # the shared environment, never re-installed from a clone (-o: its stamp counts as up to date)
    stamp = VENV / ".installed"
    sh(["make", "-o", str(stamp), target, f"VENV={VENV}", f"ARGS={args}"], clone, log)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def clone(into: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(into)], check=True)
    return into


def leaks(root: Path) -> list[str]:
    key_hex = (root / KEY).read_text().strip()
    needles = [key_hex.encode(), key_hex.upper().encode(), bytes.fromhex(key_hex)]
    secret_dir = (root / KEY.parent).resolve()
    found, searched = [], 0
    for path in root.rglob("*"):
        if path.is_symlink() or not path.is_file() or secret_dir in path.resolve().parents or ".git" in path.parts:
            continue
        data = path.read_bytes()
        searched += 1
        if any(n in data for n in needles):
            found.append(str(path.relative_to(root)))
    print(
        f"  searched {searched} files of {root.name} (release/, metrics/, reports/, mlflow.db, dvc.lock, "
        f".prefect/, logs): {len(found)} hold the key"
    )
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpsgd", action="store_true", help="also run `make compare` (the DP-SGD arm) in each clone")
    ap.add_argument("--keep", type=Path, default=None, help="keep the clones in DIR (default: a temporary folder)")
    args = ap.parse_args()
    if not (VENV / "bin" / "python").exists():
        sys.exit("run `make env` first (this script borrows the checkout's virtual environment)")
    work = args.keep or Path(tempfile.mkdtemp(prefix="secret-randomness-"))
    work.mkdir(parents=True, exist_ok=True)
    a, b = clone(work / "a"), clone(work / "b")
    compare_args = "--set dpsgd.head.epochs=3 --set compare.arms=[dpsgd]"  # its weights are compared, not its F1
    for c in (a, b):
        make("run", c, c / "run.log")
        if args.dpsgd:
            make("compare", c, c / "run.log", compare_args)
    models = {"release": RELEASE_MODEL} | ({"DP-SGD arm": DPSGD_MODEL} if args.dpsgd else {})
    first = {name: sha(a / m) for name, m in models.items()}
    # A again from scratch, keeping only its key
    for name in ("artifacts", "release", "metrics", "reports", "plots", ".prefect", "mlflow.db"):
        p = a / name
        if name == "artifacts":
            for child in p.iterdir():
                if child.name != "secret":
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
        elif p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    make("run", a, a / "rerun.log")
    if args.dpsgd:
        make("compare", a, a / "rerun.log", compare_args)
    ok = True
    print(f"clones in {work}")
    for name, m in models.items():
        differ = sha(a / m) != sha(b / m)
        same = sha(a / m) == first[name]
        ok &= differ and same
        print(
            f"  {name}: clone A vs clone B differ: {differ} (must be True); "
            f"clone A re-run byte-identical: {same} (must be True)"
        )
    for c in (a, b):
        ok &= not leaks(c)
    print("OK" if ok else "FAILED")
    if args.keep is None and ok:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
