"""Tests for dprelease.core.data: loading, D.1-D.2 sampling, stratified split, Gini, OIICS titles."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pandas as pd
import pytest

from dprelease.core.data.records import DataError, gini, load_titles, read_records, split, stratified_sample

ROOT = Path(__file__).resolve().parents[3]
BUNDLED = ROOT / "data" / "osha_sir_2015_2016.csv.gz"
FIXTURE = ROOT / "tests" / "fixtures" / "sir_2015_2017_first28_original_format.csv"


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    return read_records(BUNDLED)


@pytest.fixture(scope="module")
def sample(records) -> pd.DataFrame:
    return stratified_sample(records, seed=2025)


# ---------------------------------------------------------------- bundled file


def test_bundled_file_shape(records):
    assert len(records) == 19_947
    assert list(records.columns) == ["text", "label"]
    assert list(records.index) == list(range(len(records)))
    assert records["label"].nunique() == 147
    assert all(isinstance(v, str) for v in records["label"].head(50))
    assert (records["text"] == records["text"].str.strip()).all()
    assert (records["text"] != "").all() and (records["label"] != "").all()


def test_stratified_sample_counts(sample):
    sizes = sample["label"].value_counts()
    assert len(sample) == 5_252
    assert len(sizes) == 108
    assert sizes.max() <= 200 and sizes.min() >= 2
    assert sample.index.is_monotonic_increasing and sample.index.is_unique


def test_stratified_sample_keeps_small_classes_whole(records, sample):
    full = records["label"].value_counts()
    got = sample["label"].value_counts()
    for label, n in got.items():
        assert n == min(full[label], 200)
    assert set(full[full < 2].index).isdisjoint(got.index)
    # rows are the original rows, unchanged
    assert sample.equals(records.loc[sample.index])


def test_stratified_sample_deterministic(records, sample):
    again = stratified_sample(records, seed=2025)
    other = stratified_sample(records, seed=7)
    assert again.index.equals(sample.index)
    assert not other.index.equals(sample.index)
    assert len(other) == len(sample)


def test_stratified_sample_limit_classes(records):
    small = stratified_sample(records, cap=20, limit_classes=5, seed=1)
    counts = records["label"].value_counts()
    expected = sorted(counts.index, key=lambda c: (-counts[c], c))[:5]
    assert set(small["label"]) == set(expected)
    assert len(small) == 100


def test_stratified_sample_too_few_classes(records):
    with pytest.raises(DataError, match="need at least 2"):
        stratified_sample(records, limit_classes=1)
    with pytest.raises(DataError, match="need at least 2"):
        stratified_sample(records, min_class_size=10_000)


def test_split_is_stratified(sample):
    train, test = split(sample, test_size=0.5, seed=2025)
    assert len(train) + len(test) == len(sample)
    assert list(train.index) == list(range(len(train)))
    tr, te = train["label"].value_counts(), test["label"].value_counts()
    assert set(tr.index) == set(te.index) == set(sample["label"])
    assert ((tr - te[tr.index]).abs() <= 1).all()
    # no overlap: each original row (carried in a column) lands on exactly one side
    keyed = sample.assign(orig=sample.index)
    k_train, k_test = split(keyed, test_size=0.5, seed=2025)
    assert not set(k_train["orig"]) & set(k_test["orig"])
    assert sorted([*k_train["orig"], *k_test["orig"]]) == sorted(sample.index)
    assert k_train["label"].tolist() == train["label"].tolist()


def test_split_deterministic(sample):
    a, _ = split(sample, seed=3)
    b, _ = split(sample, seed=3)
    c, _ = split(sample, seed=4)
    assert a.equals(b) and not a.equals(c)


def test_training_gini_of_default_split(sample):
    train, _ = split(sample, test_size=0.5, seed=2025)
    assert 0.6 < gini(train["label"].value_counts()) < 0.7


# ---------------------------------------------------------------- original release format


def test_original_format_fixture():
    df = read_records(FIXTURE)
    assert len(df) == 28
    assert "\n" in df.loc[0, "text"]
    assert df.loc[0, "text"].startswith("Three correctional facility guards")
    assert df.loc[0, "label"] == "111"
    assert df["label"].tolist()[:5] == ["111", "1522", "10", "1972", "111"]
    raw = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    assert df["label"].tolist() == raw["Nature"].str.strip().tolist()


def test_original_format_matches_bundled_rows(records):
    df = read_records(FIXTURE)
    assert df["label"].tolist() == records["label"].head(28).tolist()
    assert df["text"].tolist() == records["text"].head(28).tolist()


def test_28_column_gzip_bom_variant(tmp_path):
    """The 2023+ layout adds 'Loss of Eye' and 'FederalState'; also accept a BOM and gzip."""
    raw = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    raw.insert(raw.columns.get_loc("Amputation") + 1, "Loss of Eye", "0.00")
    raw["FederalState"] = "Federal"
    assert raw.shape[1] == 28
    path = tmp_path / "sir28.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8-sig", newline="") as f:
        raw.to_csv(f, index=False)
    df = read_records(path)
    assert len(df) == 28 and df.loc[0, "label"] == "111"


def test_cp1252_fallback(tmp_path):
    path = tmp_path / "cp1252.csv"
    text = '"Final Narrative","Nature"\r\n"Worker\u2019s hand was cut","132"\r\n"Fell off a ladder","111"\r\n'
    path.write_bytes(text.encode("cp1252"))
    assert b"\x92" in path.read_bytes()
    df = read_records(path)
    assert df.loc[0, "text"] == "Worker\u2019s hand was cut"
    assert df["label"].tolist() == ["132", "111"]


def test_custom_columns(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("body,y\nfoo,a\nbar,b\n", encoding="utf-8")
    df = read_records(path, text_column="body", label_column="y")
    assert df.to_dict("list") == {"text": ["foo", "bar"], "label": ["a", "b"]}


# ---------------------------------------------------------------- bad inputs


def _bad(tmp_path, content: bytes | str, match: str, name: str = "bad.csv", **kw) -> str:
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    with pytest.raises(DataError, match=match) as exc:
        read_records(path, **kw)
    msg = str(exc.value)
    assert "\n" not in msg and "\r" not in msg
    return msg


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="not found") as exc:
        read_records(tmp_path / "nope.csv")
    assert "\n" not in str(exc.value) and "nope.csv" in str(exc.value)


def test_missing_column(tmp_path):
    msg = _bad(tmp_path, "Narrative,Nature\nfoo,1\nbar,2\n", "'Final Narrative' not found")
    assert "'Narrative'" in msg and "'Nature'" in msg
    _bad(tmp_path, "Final Narrative,NatureCode\nfoo,1\nbar,2\n", "label column 'Nature' not found")


def test_missing_column_lists_are_truncated(tmp_path):
    header = ",".join(f"c{i}" for i in range(40))
    msg = _bad(tmp_path, header + "\n" + ",".join("x" * 40) + "\n", "not found")
    assert "(40 in all)" in msg and "c39" not in msg


def test_empty_narrative(tmp_path):
    msg = _bad(tmp_path, 'Final Narrative,Nature\nfoo,1\n"  ",2\nbar,1\n,2\n', "empty narrative")
    assert "2 row(s)" in msg and "data rows 2, 4" in msg


def test_blank_or_nan_label(tmp_path):
    msg = _bad(tmp_path, "Final Narrative,Nature\nfoo,1\nbar, \nbaz,\nqux,NaN\n", "empty label")
    assert "data rows 2, 3" in msg
    # "NaN" is kept as a literal string, not treated as missing (keep_default_na=False)
    assert "2 row(s)" in msg


def test_bytes_neither_utf8_nor_cp1252(tmp_path):
    # 0x81 is invalid UTF-8 here and undefined in cp1252: an error naming the byte, its offset and line.
    msg = _bad(tmp_path, b"Final Narrative,Nature\nbad \x81 byte,111\nok,132\n", "not cp1252 text")
    assert "byte 0x81 at offset 27 (line 2, column 5)" in msg


def test_stray_byte_in_utf8_file_is_an_error_at_its_offset(tmp_path):
    """One invalid byte in an otherwise UTF-8 file must not switch the whole file to cp1252
    ("café" would become "cafÃ©"): an error names the byte where it is."""
    data = "Final Narrative,Nature\ncafé worker fell,111\nok,132\n".encode("utf-8")
    data = data.replace(b"ok", b"o\xffk")
    msg = _bad(tmp_path, data, "invalid UTF-8")
    offset = data.index(b"\xff")
    assert f"byte 0xff at offset {offset} (line 3, column 2)" in msg and "cp1252" in msg


def test_explicit_encodings(tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes("Final Narrative,Nature\ncafé,111\nok,132\n".encode("utf-8"))
    assert read_records(path, encoding="utf-8").loc[0, "text"] == "café"
    assert read_records(path, encoding="cp1252").loc[0, "text"] == "cafÃ©"  # what was asked for
    path.write_bytes("Final Narrative,Nature\ncafé,111\nok,132\n".encode("cp1252"))
    with pytest.raises(DataError, match="not utf-8 text: byte 0xe9"):
        read_records(path, encoding="utf-8")
    assert read_records(path).loc[0, "text"] == "café"  # auto: no UTF-8 sequence at all -> cp1252


def test_single_class(tmp_path):
    _bad(tmp_path, "Final Narrative,Nature\nfoo,111\nbar,111 \n", "1 distinct class")


def test_garbage_binary(tmp_path):
    _bad(tmp_path, b"PK\x03\x04" + b"\x00" * 64 + os.urandom(256), "binary")
    _bad(tmp_path, b"\x89PNG" + bytes(range(1, 256)) * 4, "bad.csv")  # no NUL: any one-line DataError
    _bad(tmp_path, b"\x1f\x8b" + os.urandom(200), "gzip", name="bad.csv.gz")
    _bad(tmp_path, b"plain text", "not a gzip", name="x.csv.gz")


def test_empty_file(tmp_path):
    _bad(tmp_path, b"", "empty")
    _bad(tmp_path, "Final Narrative,Nature\n", "no data rows")


def test_unparseable_csv(tmp_path):
    _bad(tmp_path, 'Final Narrative,Nature\n"foo,1\n', "not parseable")
    _bad(tmp_path, "Final Narrative,Nature\nfoo,1\nbar,2,3,4\n", "not parseable")


# ---------------------------------------------------------------- gini, titles


def test_gini():
    assert gini([5, 5, 5, 5]) == pytest.approx(0.0)
    assert gini([1, 2, 3]) == pytest.approx(2 / 9)  # sum|xi-xj| / (2 n^2 mean) = 8 / 36
    assert gini([0, 0, 0, 10]) == pytest.approx(3 / 4)
    assert gini({"a": 3, "b": 1, "c": 2}) == pytest.approx(2 / 9)
    assert gini(pd.Series([2, 1, 3])) == pytest.approx(2 / 9)
    with pytest.raises(ValueError):
        gini([])


def test_load_titles(records):
    titles = load_titles()
    assert titles["111"] == "Fractures"
    assert titles["1311"] == "Amputations"
    assert len(titles) == 615
    assert all(t == t.strip() and t for t in titles.values())
    assert set(records["label"]) <= set(titles)


def test_load_titles_repo_copy_matches_package():
    repo_copy = ROOT / "data" / "oiics_201_nature.csv"
    if not repo_copy.exists():
        pytest.skip("no data/oiics_201_nature.csv in this checkout")
    assert load_titles(repo_copy) == load_titles()
