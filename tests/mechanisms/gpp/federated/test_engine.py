"""gpp.federated.engine: a small real Flower run (2 clients, digits) and the message-content audit.

The audit (``leaks``) checks every message that crossed the client/aggregator boundary by names AND
values: only ``batch/z``, ``batch/u`` (and the final ``release/z_*``) go up, only ``Q_ψ``'s weights go
down; no array holds a raw input row; each uploaded ``u`` is exactly the utility labels of the rows the
schedule says that client encoded (so sensitive labels sent under the name ``u`` are caught too).
Deliberately leaking copies of the real log prove that the audit fails when it should.
"""

from __future__ import annotations

import copy
from collections import defaultdict

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from dprelease.core.errors import DataError
from dprelease.mechanisms.gpp.federated import DistributedResult, run_distributed
from dprelease.mechanisms.gpp.federated.local import batch_rows
from dprelease.mechanisms.gpp.model import head

SEED, B, D_Z, HEAD = 5, 64, 16, (32, 16)
EPOCHS = 4  # 4 × 12 batches of 64 per client = 48 rounds; the time is Flower's messages through Ray, not the maths
UP = {"batch/z", "batch/u", "release/z_train", "release/z_test"}


@pytest.fixture(scope="module")
def run():
    digits = load_digits()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(digits.target))
    x = (digits.data[order] / 16.0).astype(np.float32)
    u = digits.target[order].astype(np.int64)
    s = rng.integers(0, 2, len(u))  # a sensitive bit independent of u: values tell them apart
    client = rng.integers(0, 2, len(u))
    tr, te = slice(0, 1497), slice(1497, None)
    log: list = []
    res = run_distributed(
        x_train=x[tr],
        u_train=u[tr],
        s_train=s[tr],
        client_train=client[tr],
        x_test=x[te],
        client_test=client[te],
        n_u=10,
        n_s=2,
        betas=[1.0, 2.0],
        lams=[0.01, 0.01],
        d_z=D_Z,
        encoder_hidden=(64, 32),
        head_hidden=HEAD,
        k=2,
        epochs=EPOCHS,
        batch_size=B,
        lr=3e-3,
        seed=SEED,
        message_log=log,
    )
    data = {
        "x": x[tr],
        "u": u[tr],
        "s": s[tr],
        "client": client[tr],
        "x_test": x[te],
        "u_test": u[te],
        "client_test": client[te],
    }
    return res, log, data


def leaks(log: list, *, x: np.ndarray, u: np.ndarray, s: np.ndarray, client: np.ndarray) -> list[str]:
    """Every reason a message log shows a raw input or a sensitive label crossing the boundary."""
    problems: list[str] = []
    x_rows = {row.tobytes() for row in x.astype(np.float32)}
    down = {f"psi/{k}" for k in head(D_Z, 10, HEAD).state_dict()}
    uploads: dict[int, int] = defaultdict(int)
    for i, msg in enumerate(log):
        where = f"message {i} ({msg['direction']}, round {msg['round']}, client {msg['client']})"
        extra = set(msg["arrays"]) - (UP if msg["direction"] == "up" else down)
        if extra:
            problems.append(f"{where}: arrays not allowed across the boundary: {sorted(extra)}")
        for name, arr in msg["arrays"].items():
            value = np.asarray(arr["value"])
            if value.size and value.shape[-1] == x.shape[1]:
                flat = value.reshape(-1, x.shape[1]).astype(np.float32)
                if any(r.tobytes() in x_rows for r in flat):
                    problems.append(f"{where}: {name} holds raw input rows")
            m = msg["client"]
            own_s = s[client == m]
            if m >= 0 and value.ndim == 1 and len(value) == len(own_s) and np.array_equal(value, own_s):
                problems.append(f"{where}: {name} equals the client's sensitive labels")
        for key, value in {**msg["configs"], **msg["metrics"]}.items():
            if isinstance(value, (list, tuple, bytes)) and len(value) > 1:
                problems.append(f"{where}: {key} is a sequence, not a scalar")
        if msg["direction"] == "up" and "batch/u" in msg["arrays"]:
            m = msg["client"]
            rows = batch_rows(seed=SEED, client=m, step=uploads[m], n=int((client == m).sum()), batch_size=B)
            uploads[m] += 1
            if not np.array_equal(msg["arrays"]["batch/u"]["value"], u[client == m][rows]):
                problems.append(f"{where}: batch/u is not the utility labels of the encoded rows")
    return problems


@pytest.mark.slow  # one real Flower run (≈ 16 s, most of it starting Ray) shared by the module
def test_result_shapes_rows_and_accounting(run):
    res, log, d = run
    assert isinstance(res, DistributedResult)
    assert res.clients == 2 and res.z_train.shape == (len(d["x"]), D_Z) and res.z_test.shape == (len(d["x_test"]), D_Z)
    assert res.z_train.dtype == np.float32 and np.isfinite(res.z_train).all() and np.isfinite(res.z_test).all()
    counts = np.bincount(d["client"])
    assert res.steps_per_client == [EPOCHS * int(np.ceil(n / B)) for n in counts] and res.rounds == max(
        res.steps_per_client
    )
    assert len(res.history) == res.rounds and all(np.isfinite(h["utility_ce"]) for h in res.history)
    # each record's draw is the one its own client released (row order restored)
    released = {msg["client"]: msg["arrays"] for msg in log if "release/z_train" in msg["arrays"]}
    for m in (0, 1):
        assert np.array_equal(res.z_train[d["client"] == m], released[m]["release/z_train"]["value"])
        assert np.array_equal(res.z_test[d["client_test"] == m], released[m]["release/z_test"]["value"])
    # bytes: measured payloads cover the (z, u) arrays with little framing; FedAvg from |θ|
    raw_up = sum(
        a["value"].nbytes
        for msg in log
        if msg["direction"] == "up" and msg["round"] <= res.rounds
        for a in msg["arrays"].values()
    )
    assert raw_up / res.rounds <= res.bytes_up_per_round <= 1.1 * raw_up / res.rounds + 2000
    assert res.fedavg_bytes_per_round == 2 * 2 * res.encoder_params * 4
    assert res.bytes_down_per_round > 4 * res.head_params  # ψ to every participant
    assert res.train_s > 0 and res.engine_overhead_s > 0 and 0 <= res.engine_start_s <= res.wall_s
    assert set(res.summary()) >= {"bytes_up_per_round", "fedavg_bytes_per_round", "engine_overhead_s", "train_s"}


@pytest.mark.slow  # one real Flower run (≈ 16 s, most of it starting Ray) shared by the module
def test_sanitized_draws_keep_utility(run):
    res, _, d = run
    probe = LogisticRegression(max_iter=500).fit(res.z_train, d["u"])
    assert probe.score(res.z_test, d["u_test"]) > 0.4  # chance is 0.1 (10 digits); 0.547 measured (0.69 at 8 epochs)


@pytest.mark.slow  # one real Flower run (≈ 16 s, most of it starting Ray) shared by the module
def test_no_sensitive_label_or_raw_input_crosses(run):
    _, log, d = run
    assert {m["direction"] for m in log} == {"up", "down"} and len(log) > 20
    assert leaks(log, x=d["x"], u=d["u"], s=d["s"], client=d["client"]) == []


def _first(log, direction, name):
    return next(i for i, m in enumerate(log) if m["direction"] == direction and name in m["arrays"])


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["extra_s", "x_as_z", "s_as_u", "x_down", "s_vector"])
def test_the_audit_fails_on_a_leaking_log(run, variant):
    _, log, d = run
    bad = copy.deepcopy(log)
    i = _first(bad, "up", "batch/u")
    msg, m = bad[i], bad[i]["client"]
    rows = batch_rows(seed=SEED, client=m, step=0, n=int((d["client"] == m).sum()), batch_size=B)
    xm, sm = d["x"][d["client"] == m], d["s"][d["client"] == m]
    arr = lambda v: {"shape": v.shape, "dtype": str(v.dtype), "value": v}  # noqa: E731
    if variant == "extra_s":
        msg["arrays"]["batch/s"] = arr(sm[rows])
    elif variant == "x_as_z":
        msg["arrays"]["batch/z"] = arr(xm[rows])
    elif variant == "s_as_u":
        msg["arrays"]["batch/u"] = arr(sm[rows].astype(np.int64))
    elif variant == "x_down":
        bad[_first(bad, "down", "psi/0.weight")]["arrays"]["psi/0.weight"] = arr(xm[:3])
    else:
        j = next(j for j, g in enumerate(bad) if "release/z_train" in g["arrays"] and g["client"] == m)
        bad[j]["arrays"]["release/z_test"] = arr(sm)
    assert leaks(bad, x=d["x"], u=d["u"], s=d["s"], client=d["client"]) != []


def test_bad_inputs_fail_in_one_line():
    x, y = np.zeros((6, 3), np.float32), np.zeros(6, np.int64)
    ok = dict(
        x_train=x,
        u_train=y,
        s_train=y,
        client_train=np.array([0, 0, 0, 1, 1, 1]),
        x_test=x[:2],
        client_test=np.array([0, 1]),
        n_u=2,
        n_s=2,
        betas=[1.0, 1.0],
        lams=[0.0, 0.0],
        d_z=2,
    )
    for change, match in [
        ({"client_train": np.array([0, 0, 0, 2, 2, 2])}, "ids 0..t-1"),
        ({"betas": [1.0]}, "betas"),
        ({"client_test": np.array([0, 3])}, "client_test"),
        ({"u_train": np.full(6, 5)}, r"\[0, n_u\)"),
        ({"x_test": np.zeros((2, 4))}, "same width"),
    ]:
        with pytest.raises(DataError, match=match):
            run_distributed(**{**ok, **change})


@pytest.mark.slow
def test_a_failing_client_stops_the_run_with_its_reason(monkeypatch):
    from dprelease.mechanisms.gpp.federated import engine

    monkeypatch.setattr(engine, "_write_partitions", lambda *a, **k: None)  # clients find no private store
    x, y = np.zeros((20, 3), np.float32), np.zeros(20, np.int64)
    with pytest.raises(RuntimeError, match="a client failed"):
        run_distributed(
            x_train=x,
            u_train=y,
            s_train=y,
            client_train=np.arange(20) % 2,
            x_test=x[:4],
            client_test=np.arange(4) % 2,
            n_u=2,
            n_s=2,
            betas=[1.0, 1.0],
            lams=[0.0, 0.0],
            d_z=2,
            epochs=1,
        )
