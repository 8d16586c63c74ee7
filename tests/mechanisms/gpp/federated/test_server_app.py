"""gpp.federated.server_app: message descriptions for the log and the measured payload size."""

from __future__ import annotations

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

import dprelease.mechanisms.gpp.federated  # noqa: F401,I001  (sets Flower's offline switches before flwr first loads)
from dprelease.mechanisms.gpp.federated.server_app import describe, payload_bytes


def _content(b=64, d_z=8):
    z = np.ones((b, d_z), np.float32)
    u = np.arange(b, dtype=np.int64)
    return RecordDict(
        {
            "batch": ArrayRecord({"z": Array(z), "u": Array(u)}),
            "metrics": MetricRecord({"compute_s": 0.5}),
            "client": ConfigRecord({"partition": 3}),
        }
    )


def test_describe_lists_every_array_with_its_values():
    d = describe(_content(), direction="up", rnd=4, client=3)
    assert (d["direction"], d["round"], d["client"]) == ("up", 4, 3)
    assert set(d["arrays"]) == {"batch/z", "batch/u"}
    assert d["arrays"]["batch/z"]["shape"] == (64, 8) and d["arrays"]["batch/z"]["dtype"] == "float32"
    assert np.array_equal(d["arrays"]["batch/u"]["value"], np.arange(64))
    assert d["configs"] == {"client/partition": 3} and d["metrics"] == {"metrics/compute_s": 0.5}


def test_payload_bytes_grow_with_the_arrays_and_frame_them_tightly():
    small, big = payload_bytes(_content(b=8)), payload_bytes(_content(b=64))
    raw_small, raw_big = 8 * (8 * 4 + 8), 64 * (8 * 4 + 8)
    assert raw_small < small < raw_small + 600 and raw_big < big < raw_big + 600
    assert big - small == raw_big - raw_small
