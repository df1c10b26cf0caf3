"""The docs name what exists, and results/ holds only what the docs report.

Every module README.md and docs/*.md name, as a path (`specchat/models/loader.py`, or
`models/loader.py` inside the package) or dotted (`specchat.models.gguf.export.outside_row_error`),
is a file of the package, and a dotted name's last part is defined there; the same for the
developer tools' modules (`devtools/gpu/campaign.py`). Every file under
results/ is named by the doc that reports it (a page of docs/, or results/HISTORY.md, the
runs as they happened), by its name or a pattern (`results/cpu-2026-11-23/*.json`,
`llama_bench_{1,2,3}.json`), so a raw dump nothing reports cannot stay (issues 25, 38)."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "specchat"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LAYERS = "engine|models|chat|tui|bench|commands|history|distill"


def doc_text(paths: list[Path]) -> str:
    return "\n".join(p.read_text() for p in paths)


def named_module_paths(text: str) -> set[str]:
    """Package-relative paths of the modules a text names (specchat/x/y.py or x/y.py)."""
    full = set(re.findall(r"\bspecchat/([\w/]+\.py)\b", text))
    inside = set(re.findall(rf"(?<![\w/.])((?:{LAYERS})/[\w/]+\.py)\b", text))
    return full | inside


def missing_dotted(name: str) -> str | None:
    """What of a dotted specchat name does not exist (None when it all does)."""
    parts = name.removesuffix("*").split(".")[1:]
    for cut in range(len(parts), 0, -1):
        base = PACKAGE.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            rest = parts[cut:]
            if not rest:
                return None
            pattern = rf"^\s*(def|class)\s+{rest[0]}\b|^{rest[0]}\s*[:=]"
            found = re.search(pattern, module.read_text(), re.MULTILINE)
            return None if found else f"{name}: {rest[0]} is not defined in {module.relative_to(ROOT)}"
    return f"{name}: no such module"


def test_every_module_path_the_docs_name_exists():
    missing = sorted(p for p in named_module_paths(doc_text(DOCS)) if not (PACKAGE / p).is_file())
    assert missing == []


def named_devtools_paths(text: str) -> set[str]:
    return set(re.findall(r"\b(devtools/[\w/]+\.py)\b", text))


def test_every_devtools_module_the_docs_name_exists():
    named = named_devtools_paths(doc_text(DOCS))
    assert named and sorted(p for p in named if not (ROOT / p).is_file()) == []
    assert named_devtools_paths("moved: `devtools/gpu/campain.py`") == {"devtools/gpu/campain.py"}


def test_every_dotted_specchat_name_the_docs_use_exists():
    found = re.findall(r"\bspecchat(?:\.\w+)+\*?", doc_text(DOCS))
    names = {n for n in found if n.split(".")[1] in LAYERS.split("|")}  # not specchat.log
    assert names and sorted(filter(None, map(missing_dotted, names))) == []


def test_every_file_the_readmes_layout_names_exists():
    """The Layout section names modules by their file name inside each folder's block."""
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    layout = layout[:layout.find("\n## ", 1)]
    files = {p.name for folder in ("specchat", "devtools", "scripts", "tests")
             for p in (ROOT / folder).rglob("*.py")}
    named = set(re.findall(r"(?<![\w/.])(\w+\.py)\b", layout))
    assert len(named) > 20 and sorted(named - files) == []


DESIGN = ROOT / "docs" / "design.md"
CITING = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
          *sorted(f for folder in ("specchat", "devtools", "tests")
                  for f in (ROOT / folder).rglob("*.py"))]


def cited_sections(text: str) -> set[str]:
    """The section numbers a text cites as `docs/design.md §N`."""
    return set(re.findall(r"docs/design\.md §(\d+)", text))


def test_every_citation_of_the_design_page_names_one_of_its_sections():
    """Code and docs cite the design by docs/design.md's numbered sections; the brief it
    grew from is not in the repository, so nothing cites that."""
    sections = set(re.findall(r"^## (\d+)\.", DESIGN.read_text(), re.MULTILINE))
    texts = {f.relative_to(ROOT).as_posix(): f.read_text() for f in CITING
             if f != Path(__file__).resolve()}
    cited = set().union(*map(cited_sections, texts.values()))
    assert cited and sorted(cited - sections) == []
    assert [name for name, text in texts.items() if "DESIGN" + ".md" in text] == []
    assert cited_sections("see docs/design.md §9, and docs/design.md §1") == {"9", "1"}


def test_the_checks_see_a_renamed_module():
    assert named_module_paths("see `specchat/models/gguf_cache.py` and models/loader.py") == {
        "models/gguf_cache.py", "models/loader.py"}
    assert not (PACKAGE / "models/gguf_cache.py").is_file()
    assert missing_dotted("specchat.models.llamacpp_baselines.speculation_incompatibility")
    assert missing_dotted("specchat.models.gguf.export.no_such_function")
    assert missing_dotted("specchat.models.gguf.export.outside_row_error") is None


def expanded(pattern: str) -> list[str]:
    """A name with one {a,b,c} group as the names it stands for."""
    match = re.search(r"\{([^{}]+)\}", pattern)
    if not match:
        return [pattern]
    return [pattern[:match.start()] + part + pattern[match.end():]
            for part in match.group(1).split(",")]


def reported_names(text: str) -> list[str]:
    """The file names and patterns in a doc's code spans that could name a result file."""
    spans = re.findall(r"`([^`\n]+)`", text)
    words = [w.strip("()`,;:") for span in spans for w in span.split()]
    return [name for w in words if re.search(r"\.(json|jsonl|txt|stderr|html|toml)$", w)
            for name in expanded(w)]


def reported(file: Path, names: list[str]) -> bool:
    """Whether a doc names `file`: by its path under the repository or its folder, or by its
    own name; a pattern without a folder must not start with a wildcard."""
    relative = file.relative_to(ROOT).as_posix()
    for name in names:
        if "/" in name and fnmatch.fnmatch(relative, "*" + name.lstrip("*")):
            return True
        if "/" not in name and not name.startswith("*") and fnmatch.fnmatch(file.name, name):
            return True
    return False


RESULT_FOLDERS = (ROOT / "results", ROOT / "docs" / "gpu")
REPORTING = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "results" / "HISTORY.md"]


@pytest.mark.parametrize("file", sorted(f for folder in RESULT_FOLDERS for f in folder.rglob("*")
                                        if f.is_file() and f not in REPORTING
                                        and f.name != "README.md"),
                         ids=lambda f: f.relative_to(ROOT).as_posix())
def test_every_result_file_is_named_by_the_doc_that_reports_it(file):
    names = reported_names(doc_text(REPORTING))
    assert reported(file, names), f"{file.relative_to(ROOT)}: no doc reports it; name it or drop it"


def test_the_results_check_sees_an_unnamed_dump():
    names = reported_names("raw: `results/cpu-1/*.json` (and `costs.txt`), `gvrN*.txt`, "
                           "`run_{1,2}.txt`")
    assert reported(ROOT / "results/cpu-1/bench.json", names)
    assert reported(ROOT / "results/cpu-1/costs.txt", names)
    assert reported(ROOT / "results/cpu-1/run_2.txt", names)
    assert not reported(ROOT / "results/cpu-1/vmstat1.txt", names)
    assert not reported(ROOT / "results/cpu-2/bench.json", names)
