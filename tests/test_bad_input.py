"""Bad input through ``dprelease stage stratify`` (what DVC runs) and the Prefect entry point: exit code 2,
one stderr line naming the problem, and no partial artifact left behind."""

from __future__ import annotations

import random

import pytest
import yaml
from conftest import install_test_key, make_root, slice_raw, written

from dprelease.cli import main as cli

HEADER = "ID,Final Narrative,Nature\n"


def _csv(rows: list[tuple[str, str]]) -> str:
    return HEADER + "".join(f'{i},"{text}",{label}\n' for i, (text, label) in enumerate(rows, 1))


def _dated_csv(rows: list[tuple[str, str]]) -> str:
    """With an EventDate column, alternating the public (2015) and the private (2016) period."""
    return "ID,EventDate,Final Narrative,Nature\n" + "".join(
        f'{i},{2015 + i % 2}-06-01,"{text}",{label}\n' for i, (text, label) in enumerate(rows, 1)
    )


# enough reports on both sides of proxy.until for the stratify stage to succeed (the declared codes: 111, 1311)
DATED_ROWS = [
    (f"Employee {verb} while working on site {i}", label)
    for label, verb in (("111", "fell from a ladder and broke an arm"), ("1311", "lost a fingertip in a press"))
    for i in range(16)
]


GOOD_ROWS = [
    (f"Employee {verb} while working on site {i}", label)
    for label, verb in (("111", "fell from a ladder and broke an arm"), ("1311", "lost a fingertip in a press"))
    for i in range(4)
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A tmp project root as cwd (``dprelease stage`` resolves everything against the cwd, as DVC does)."""
    monkeypatch.chdir(tmp_path)

    def write(raw: dict | None = None, data: bytes | str | None = None, name: str = "data/input.csv") -> None:
        raw = raw if raw is not None else slice_raw(data__path=name)
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
        if data is not None:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            payload = data.encode("utf-8") if isinstance(data, str) else data
            (tmp_path / name).write_bytes(payload)

    write.root = tmp_path
    return write


def _stratify(root, capsys) -> tuple[int, str]:
    install_test_key(root)  # a report's role is keyed: the stage reads the randomness key
    rc = cli(["stage", "stratify", "--params", "params.yaml"])
    return rc, capsys.readouterr().err.strip()


def _assert_one_line_error(root, capsys, *names: str) -> str:
    rc, err = _stratify(root, capsys)
    assert rc == 2, err
    assert err.startswith("dprelease: error:"), err
    assert "\n" not in err, err
    for name in names:
        assert name in err, f"{name!r} not named in: {err}"
    assert not (root / "artifacts" / "data").exists()
    assert not (root / "metrics" / "data.json").exists()
    leftovers = list((root / "artifacts").glob(".*")) if (root / "artifacts").exists() else []
    assert leftovers == []
    return err


# data problems ------------------------------------------------------------------------------------------------------
def test_missing_data_file(project, capsys):
    project(slice_raw(data__path="data/nowhere.csv.gz"))
    err = _assert_one_line_error(project.root, capsys, "nowhere.csv.gz")
    assert "not found" in err


def test_data_path_is_a_directory(project, capsys):
    (project.root / "data" / "folder.csv").mkdir(parents=True)
    project(slice_raw(data__path="data/folder.csv"))
    _assert_one_line_error(project.root, capsys, "folder.csv", "directory")


def test_missing_text_column(project, capsys):
    raw = slice_raw(data__path="data/input.csv")
    raw["data"]["text_column"] = "Nope"
    project(raw, _csv(GOOD_ROWS))
    err = _assert_one_line_error(project.root, capsys, "Nope")
    assert "Final Narrative" in err  # lists what is there


def test_missing_label_column(project, capsys):
    raw = slice_raw(data__path="data/input.csv")
    raw["data"]["label_column"] = "Event"
    project(raw, _csv(GOOD_ROWS))
    _assert_one_line_error(project.root, capsys, "Event")


def test_empty_narrative(project, capsys):
    rows = list(GOOD_ROWS)
    rows[2] = ("   ", rows[2][1])
    project(data=_csv(rows))
    err = _assert_one_line_error(project.root, capsys, "Final Narrative", "empty narrative")
    assert "data rows 3" in err


def test_narrative_with_embedded_newline_still_one_line(project, capsys):
    rows = list(GOOD_ROWS)
    rows[0] = ("first line\nsecond line", rows[0][1])
    rows[5] = ("", rows[5][1])
    project(data=_csv(rows))
    _assert_one_line_error(project.root, capsys, "empty narrative")


def test_label_column_with_one_class(project, capsys):
    project(data=_csv([(text, "111") for text, _ in GOOD_ROWS]))
    err = _assert_one_line_error(project.root, capsys, "Nature")
    assert "1 distinct class" in err


def test_empty_label(project, capsys):
    rows = list(GOOD_ROWS)
    rows[4] = (rows[4][0], "")
    project(data=_csv(rows))
    _assert_one_line_error(project.root, capsys, "Nature", "empty label")


def test_header_only_csv(project, capsys):
    project(data=HEADER)
    _assert_one_line_error(project.root, capsys, "input.csv", "no data rows")


def test_binary_garbage_file(project, capsys):
    project(data=bytes(range(256)) * 16)
    _assert_one_line_error(project.root, capsys, "input.csv", "not a text CSV")


def test_binary_garbage_without_nul_bytes(project, capsys):
    rng = random.Random(0)
    project(data=bytes(rng.randrange(1, 256) for _ in range(4096)))
    _assert_one_line_error(project.root, capsys, "input.csv")


def test_truncated_gzip(project, capsys):
    from conftest import DATA

    project(slice_raw(data__path="data/input.csv.gz"), DATA.read_bytes()[:5000], name="data/input.csv.gz")
    _assert_one_line_error(project.root, capsys, "input.csv.gz", "gzip")


def test_not_gzip_but_named_gz(project, capsys):
    project(slice_raw(data__path="data/input.csv.gz"), _csv(GOOD_ROWS), name="data/input.csv.gz")
    _assert_one_line_error(project.root, capsys, "input.csv.gz", "gzip")


def test_cp1252_bytes_are_read(project, capsys):
    """Windows-1252 exports (curly quotes, dashes) are decoded, not rejected."""
    rows = [(text.replace("Employee", "Employee\u2019s colleague \u2014"), label) for text, label in DATED_ROWS]
    project(slice_raw(data__path="data/input.csv", data__codes=["111", "1311"]), data=_dated_csv(rows).encode("cp1252"))
    rc, err = _stratify(project.root, capsys)
    assert rc == 0, err
    train = (project.root / "artifacts" / "data" / "train.csv").read_text(encoding="utf-8")
    assert "Employee\u2019s colleague \u2014" in train
    assert (project.root / "metrics" / "data.json").is_file()


def test_utf8_bom_is_read(project, capsys):
    project(
        slice_raw(data__path="data/input.csv", data__codes=["111", "1311"]),
        data=b"\xef\xbb\xbf" + _dated_csv(DATED_ROWS).encode("utf-8"),
    )
    rc, err = _stratify(project.root, capsys)
    assert rc == 0, err


# params problems ---------------------------------------------------------------------------------------------------
def test_unknown_key(project, capsys):
    raw = slice_raw(data__path="data/input.csv")
    raw["ppm"]["bogus"] = 1
    project(raw, _csv(GOOD_ROWS))
    err = _assert_one_line_error(project.root, capsys, "ppm.bogus", "unknown key")
    assert "params.yaml" in err


def test_unknown_top_level_section(project, capsys):
    raw = slice_raw(data__path="data/input.csv")
    raw["trainer"] = {"epochs": 3}
    project(raw, _csv(GOOD_ROWS))
    _assert_one_line_error(project.root, capsys, "trainer", "unknown key")


@pytest.mark.parametrize(
    "dotted, value",
    [
        ("ppm.c", 0.0),
        ("ppm.c", -1.0),
        ("ppm.c", 2.5),
        ("ppm.g", 1.5),
        ("ppm.g", -1.5),
        ("ppm.k", 1.2),
        ("ppm.k", -0.1),
        ("ppm.draws", 1),
        ("ppm.draws", 0),
        ("data.cap", 0),
        ("evaluation.draws", 0),
        ("data.test_size", 1.0),
        ("ppm.c", "high"),
    ],
)
def test_out_of_range(project, capsys, dotted, value):
    raw = slice_raw(data__path="data/input.csv")
    section, key = dotted.split(".")
    raw[section][key] = value
    project(raw, _csv(GOOD_ROWS))
    _assert_one_line_error(project.root, capsys, dotted)


def test_swag_rank_above_epochs(project, capsys):
    raw = slice_raw(data__path="data/input.csv")
    raw["swag"]["head"]["rank"] = 5
    project(raw, _csv(GOOD_ROWS))
    _assert_one_line_error(project.root, capsys, "rank")


def test_params_file_missing(project, capsys):
    _assert_one_line_error(project.root, capsys, "params.yaml", "not found")


def test_params_not_yaml(project, capsys):
    (project.root / "params.yaml").write_text("seed: [1, 2\nppm: {c: 1", encoding="utf-8")
    _assert_one_line_error(project.root, capsys, "params.yaml", "YAML")


def test_unknown_stage(project, capsys):
    project(data=_csv(GOOD_ROWS))
    rc = cli(["stage", "finetune_r9", "--params", "params.yaml"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "finetune_r9" in err


# the Prefect entry point validates before starting Prefect ----------------------------------------------------------
@pytest.fixture
def flow_main(monkeypatch):
    import flows.release as fr

    def no_flow(*a, **k):  # pragma: no cover - only reached on failure
        raise AssertionError("release_flow started despite invalid input")

    monkeypatch.setattr(fr, "release_flow", no_flow)
    return fr.main


@pytest.mark.parametrize(
    "override, named",
    [
        ("ppm.c=0", "ppm.c"),
        ("ppm.k=2", "ppm.k"),
        ("ppm.bogus=1", "ppm.bogus"),
        ("ppm.c", "ppm.c"),  # no '='
        ("data.path=data/missing.csv.gz", "data.path"),
    ],
)
def test_flow_main_rejects_bad_params_before_prefect(tmp_path, capsys, flow_main, override, named):
    root = make_root(tmp_path)
    (root / "params.yaml").write_text(yaml.safe_dump(slice_raw()), encoding="utf-8")
    rc = flow_main(["--root", str(root), "--set", override, "--no-track"])  # its flow, if started, fails the test
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("dprelease: error:") and "\n" not in err, err
    assert named in err, err
    assert not written(root)


def test_flow_main_missing_params_file(tmp_path, capsys, flow_main):
    rc = flow_main(["--root", str(tmp_path), "--no-track"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "params.yaml" in err
