"""The documentation stands alone: no file cites the maths spec the repository does not contain, every
``docs/<page>.md`` that code or docs name exists, and every section label cited as
``docs/algorithms.md, B.6`` or ``docs/guarantees.md, O`` is defined on that page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["src", "flows", "tasks", "docs", "README.md"]
SUFFIXES = {".py", ".md", ".yaml", ".toml", ".txt"}
ABSENT_SPEC = re.compile(r"TRUST|ALGORITHMS|\bspec [A-Z]|\bspec's\b|\.\./shared|\bshared/spec\b")
PAGE = re.compile(r"docs/([a-z_]+\.md)")
LINK = re.compile(r"\]\(((?:\.\./)?(?:docs/)?[a-z_]+\.md)(?:#[^)]*)?\)")
CITED = re.compile(r"(?:docs/)?(algorithms|guarantees)\.md\)?, ((?:[A-R](?:\.\d+[a-z]?)*(?![\w])(?:–|-|, |; )?)+)")
LABEL = re.compile(r"[A-R](?:\.\d+[a-z]?)*(?![\w])")


def files() -> list[Path]:
    out = []
    for name in SCANNED:
        path = ROOT / name
        out += (
            [path] if path.is_file() else [p for p in sorted(path.rglob("*")) if p.suffix in SUFFIXES and p.is_file()]
        )
    return out


def test_nothing_cites_the_absent_spec_or_a_path_outside_the_repository():
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()[:100]}"
        for p in files()
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if ABSENT_SPEC.search(line)
    ]
    assert not hits, "\n".join(hits)


def test_the_pattern_catches_each_old_form():
    for old in (
        "(spec D.5)",
        "TRUST.md O",
        "(TRUST O)",
        "ALGORITHMS B.8",
        "spec G.4",
        "the spec's SWAG",
        "../shared/spec/ALGORITHMS.md",
    ):
        assert ABSENT_SPEC.search(old), old
    for fine in ('spec["steps"]', "spec.name", "module_from_spec(spec)", "specification"):
        assert not ABSENT_SPEC.search(fine), fine


def test_every_named_docs_page_exists():
    missing = []
    for p in files():
        text = p.read_text(encoding="utf-8")
        for name in PAGE.findall(text):
            if not (ROOT / "docs" / name).is_file():
                missing.append(f"{p.relative_to(ROOT)}: docs/{name}")
        for target in LINK.findall(text) if p.suffix == ".md" else ():  # a link in a .md file, from its folder
            base = ROOT if p.parent == ROOT else p.parent
            if not (base / target).resolve().is_file():
                missing.append(f"{p.relative_to(ROOT)}: link {target}")
    assert not missing, "\n".join(missing)


def defined(page: str, label: str) -> bool:
    """A one-letter label is a heading (``## O. …``); a numbered one appears on the page as a token."""
    if "." not in label:
        return re.search(rf"^#+ {label}\. ", page, flags=re.M) is not None
    return re.search(rf"(?<![\w.]){re.escape(label)}(?![\w]|\.\d)", page) is not None


def cited_labels() -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for p in files():
        for page, labels in CITED.findall(p.read_text(encoding="utf-8")):
            for label in LABEL.findall(labels):
                out.setdefault(f"{page}.md", set()).add((label, str(p.relative_to(ROOT))))
    return out


def test_every_cited_section_label_is_defined_on_its_page():
    cited = cited_labels()
    assert len(cited.get("algorithms.md", ())) > 20 and len(cited.get("guarantees.md", ())) > 10  # the code cites them
    missing = []
    for name, labels in cited.items():
        page = (ROOT / "docs" / name).read_text(encoding="utf-8")
        missing += [f"{where}: docs/{name}, {label}" for label, where in sorted(labels) if not defined(page, label)]
    assert not missing, "\n".join(missing)


def test_the_label_check_rejects_an_undefined_label():
    page = "## B. PPM\n\n**B.6 Local sensitivity.** … D.7.4: utility\n"
    assert defined(page, "B") and defined(page, "B.6") and defined(page, "D.7.4")
    assert not defined(page, "C") and not defined(page, "B.7") and not defined(page, "D.7")
    assert LABEL.findall(CITED.search("(docs/algorithms.md, D.7.4–D.9; and more)").group(2)) == ["D.7.4", "D.9"]
    assert LABEL.findall(CITED.search("docs/algorithms.md, G.4, Algorithm 2").group(2)) == ["G.4"]
    assert CITED.search("[guarantees.md](guarantees.md), K.6.").groups() == ("guarantees", "K.6")  # a link


def test_the_readme_stays_short_and_maps_every_docs_page_once():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    rows = [line for line in readme.splitlines() if line.startswith("| [docs/")]
    mapped = [re.match(r"\| \[docs/([a-z_]+\.md)\]", line).group(1) for line in rows]
    assert sorted(mapped) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))  # every page, once each
