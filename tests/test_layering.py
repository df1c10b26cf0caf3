"""The dependency rule of docs/design.md §1, checked on the source's import statements
(every import, also those inside functions and under TYPE_CHECKING):

    cli ──► tui ──► chat ──► engine
     │               └────► models ──► engine (protocol and params only)
     └──────────────────────► models, chat, distill, bench (bench ──► history's charts)

Each layer may import only the specchat layers listed in ALLOWED (and itself), and
no third-party package in FORBIDDEN_PACKAGES; the engine imports torch and the
standard library only; the TUI never imports models, and its startup pulls in no
torch. The developer tools (devtools/, not in the wheel) sit above it all: they may import
specchat, and specchat never imports or names them. And no import circles anywhere in
specchat/, devtools/ or scripts/ (a script imports another by its bare name, as it does
when run from scripts/).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "specchat"
SCRIPTS = PACKAGE.parent / "scripts"
DEVTOOLS = PACKAGE.parent / "devtools"

BASE = {"control_chars", "errors", "fate_colours", "logs", "paths", "sizes", "theme_files",
        "token_kinds", "turn"}
"""Top-level leaves: standard library (and platformdirs) only, usable by every layer but the engine."""

ALLOWED: dict[str, set[str]] = {
    "engine": set(),
    "models": {"engine.protocol", "engine.params"} | BASE,
    "distill": {"models", "engine"} | BASE,
    "chat": {"engine", "models"} | BASE,
    "history": BASE,
    "tui": {"chat", "history"} | BASE,
    "bench": {"models", "chat", "engine", "history"} | BASE,
    "base": BASE,
    "cli": {"tui", "chat", "engine", "models", "distill", "bench", "history", "cli"} | BASE,
}

HEAVY = {"torch", "transformers", "gguf", "bitsandbytes", "llama_cpp", "safetensors", "accelerate"}
FORBIDDEN_PACKAGES: dict[str, set[str]] = {
    "engine": set(),  # checked as "torch and the standard library only"
    "models": {"textual", "click", "rich"},
    "distill": {"textual", "click", "rich"},
    "chat": {"textual", "click", "rich", "transformers", "gguf", "bitsandbytes", "llama_cpp"},
    "history": HEAVY | {"textual", "click", "rich"},
    "tui": HEAVY | {"click"},
    "bench": {"textual", "click"},
    "base": HEAVY | {"textual", "click", "rich"},
    "cli": {"transformers", "gguf", "bitsandbytes", "llama_cpp", "safetensors", "accelerate"},
}


def layer_of(module: str) -> str:
    """The layer of a module named like specchat.x.y."""
    parts = module.split(".")[1:]
    if not parts or parts[0] in BASE or parts[0] == "__init__":
        return "base"
    if parts[0] in ("commands", "cli", "__main__"):
        return "cli"
    return parts[0]


def module_name(file: Path) -> str:
    relative = file.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(file: Path) -> set[str]:
    """Every module a file imports; `from specchat import x` counts as specchat.x."""
    names = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module == "specchat":  # modules only: `from specchat import __version__` is no tie
                names.update(f"specchat.{alias.name}" for alias in node.names
                             if (PACKAGE / alias.name).is_dir() or (PACKAGE / f"{alias.name}.py").is_file())
    return names - {"specchat"}


def source_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def specchat_target(name: str) -> str | None:
    """The part of specchat an import names, relative to the package ("engine.protocol")."""
    return name.removeprefix("specchat.") if name.startswith("specchat.") else None


def allowed(layer: str, target: str) -> bool:
    if layer_of("specchat." + target) == layer:
        return True
    return any(target == ok or target.startswith(ok + ".") for ok in ALLOWED[layer])


def package_violation(layer: str, name: str) -> bool:
    top = name.split(".")[0]
    if layer == "engine":
        return top not in sys.stdlib_module_names and top != "torch"
    return top in FORBIDDEN_PACKAGES[layer]


def violations(layer: str) -> list[str]:
    found = []
    for file in source_files():
        if layer_of(module_name(file)) != layer:
            continue
        for name in sorted(imported_modules(file)):
            target = specchat_target(name)
            bad = (not allowed(layer, target)) if target else package_violation(layer, name)
            if bad:
                found.append(f"{file.relative_to(PACKAGE)} imports {name}")
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_respect_the_dependency_rule(layer):
    assert violations(layer) == []


def test_every_source_file_belongs_to_a_layer_of_the_rule():
    unknown = {layer_of(module_name(f)) for f in source_files()} - set(ALLOWED)
    assert unknown == set()


def known_module(name: str, modules: set[str]) -> str | None:
    """The module of `modules` an import names: itself, or its nearest known parent."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def module_graph() -> dict[str, set[str]]:
    """specchat module -> the specchat modules it imports (a package import names its __init__)."""
    modules = {module_name(f) for f in source_files()}
    graph: dict[str, set[str]] = {}
    for file in source_files():
        targets = {known_module(name, modules) for name in imported_modules(file)}
        graph[module_name(file)] = targets - {None, module_name(file)}
    return graph


def script_graph() -> dict[str, set[str]]:
    """scripts.NAME -> the scripts (imported as NAME or scripts.NAME) and specchat modules it
    imports."""
    modules = {module_name(f) for f in source_files()}
    scripts = {f.stem for f in SCRIPTS.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for file in sorted(SCRIPTS.glob("*.py")):
        targets = set()
        for name in imported_modules(file):
            bare = name.removeprefix("scripts.")
            targets.add(f"scripts.{bare}" if bare in scripts else known_module(name, modules))
        graph[f"scripts.{file.stem}"] = targets - {None, f"scripts.{file.stem}"}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package_parents(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph without a package's __init__ → its own submodules edges (a face, not a tie)."""
    return {module: {t for t in targets if not t.startswith(module + ".")}
            for module, targets in graph.items()}


def devtools_graph() -> dict[str, set[str]]:
    """devtools module -> the devtools and specchat modules it imports."""
    files = sorted(DEVTOOLS.rglob("*.py"))
    modules = {module_name(f) for f in source_files() + files}
    return {module_name(file): {known_module(name, modules) for name in imported_modules(file)}
            - {None, module_name(file)} for file in files}


def test_no_import_circles_anywhere_in_specchat_devtools_or_scripts():
    graph = package_parents(module_graph() | devtools_graph()) | script_graph()
    assert set(script_graph()) == {f"scripts.{f.stem}" for f in SCRIPTS.glob("*.py")} != set()
    assert "devtools.gpu.campaign" in graph and circles(graph) == []


def names_in_code(file: Path) -> set[str]:
    """The string constants of a file that are not docstrings (what the code runs with)."""
    tree = ast.parse(file.read_text())
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree) if isinstance(node, owners)
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings}


def upward_ties(files: list[Path]) -> list[str]:
    """Where specchat's files import devtools, or name it in a string they run with (`python
    -m devtools`, import_module): the product reaching up into what it does not ship."""
    found = []
    for file in files:
        found += [f"{file.name} imports {name}" for name in sorted(imported_modules(file))
                  if name.split(".")[0] == "devtools"]
        found += [f"{file.name} names {text!r}" for text in sorted(names_in_code(file))
                  if re.search(r"\bdevtools\b", text)]
    return found


def test_specchat_never_imports_or_runs_the_developer_tools():
    assert (DEVTOOLS / "__init__.py").is_file()
    assert upward_ties(source_files()) == []


def test_the_upward_check_sees_an_import_and_a_subprocess_of_devtools(tmp_path):
    tool = tmp_path / "x.py"
    tool.write_text('"""Runs devtools (a docstring may say so)."""\n'
                    'from devtools.gpu import campaign\nimport subprocess\n'
                    'subprocess.run(["python", "-m", "devtools", "publish"])\n')
    assert upward_ties([tool]) == ["x.py imports devtools.gpu", "x.py names 'devtools'"]
    tool.write_text('"""Knows nothing of the developer tools, devtools."""\nimport json\n')
    assert upward_ties([tool]) == []


def test_the_circle_finder_sees_two_scripts_importing_each_other(tmp_path, monkeypatch):
    (tmp_path / "measure.py").write_text("from summary import table\n")
    (tmp_path / "summary.py").write_text("import scripts.measure\nfrom specchat.engine.theory import best_k\n")
    monkeypatch.setattr(sys.modules[__name__], "SCRIPTS", tmp_path)
    assert script_graph()["scripts.summary"] == {"scripts.measure", "specchat.engine.theory"}
    assert circles(package_parents(module_graph()) | script_graph()) == [
        ["scripts.measure", "scripts.summary"]]


def test_the_circle_finder_sees_a_circle_and_a_clean_chain():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_checker_sees_forbidden_imports(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("import torch\nfrom transformers import AutoModel\nfrom specchat import paths\n")
    assert {"torch", "transformers", "specchat.paths"} <= imported_modules(bad)
    assert not allowed("tui", "models.loader") and allowed("tui", "chat.events")
    assert not allowed("engine", "theory") and allowed("models", "engine.protocol")
    assert not allowed("models", "engine.drafters") and package_violation("engine", "numpy")
    assert allowed("models", "engine.params") and not allowed("models", "engine.theory")


MODEL_ROOMS: dict[str, set[str]] = {
    "config": {"device"},
    "device": set(),
    "blocks": set(),
    "torch_backend": {"blocks", "config", "device"},
    "llamacpp": {"device"},
    "int8": {"blocks", "config", "device", "gguf"},
    "head": {"blocks", "config"},
    "gguf": {"config", "device", "torch_backend"},
}
"""The rooms of specchat/models/ (docs/design.md §1) and the other rooms each may import. The
backends never import each other (device, which every one may use, is no backend: it knows
the machine's cores, memory and model sizes; blocks holds tensor building blocks two
forwards share); only the modules outside every room compose them: each backend's object
(models/backend_torch.py, backend_llamacpp.py, backend_int8.py, behind models/backend.py's
protocol), models/adapters.py (the backend choice), models/weights.py (one transformers
model from its reference), models/draft_loader.py, models/loader.py (the pair) and
models/vocabulary.py, and models/head_backends.py (a draft head on the int8 and torch
backends)."""


def room_of(module: str) -> str | None:
    """The room of a module under specchat.models (None for the package's own modules)."""
    parts = module.split(".")
    if parts[:2] != ["specchat", "models"] or len(parts) < 4:
        return None
    return parts[2]


def room_violations() -> list[str]:
    found = []
    for file in source_files():
        room = room_of(module_name(file))
        if room is None:
            continue
        for name in sorted(imported_modules(file)):
            target = room_of(name) if name.startswith("specchat.models.") else None
            if name.startswith("specchat.models.") and target is None:
                found.append(f"{file.relative_to(PACKAGE)} imports {name} (outside every room)")
            elif target not in (None, room) and target not in MODEL_ROOMS[room]:
                found.append(f"{file.relative_to(PACKAGE)} imports {name}")
    return found


def test_models_is_rooms_by_role_and_the_backends_never_import_each_other():
    rooms = {p.name for p in (PACKAGE / "models").iterdir() if (p / "__init__.py").is_file()}
    assert rooms == set(MODEL_ROOMS)
    assert room_violations() == []


def test_the_room_checker_sees_a_backend_importing_another(tmp_path, monkeypatch):
    fake = tmp_path / "specchat"
    (fake / "models" / "llamacpp").mkdir(parents=True)
    (fake / "models" / "llamacpp" / "model.py").write_text(
        "from specchat.models.torch_backend.lean import LeanLlama\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert room_violations() == ["models/llamacpp/model.py imports specchat.models.torch_backend.lean"]


def test_help_and_chat_events_load_without_torch():
    code = ("import sys, specchat.cli, specchat.chat.events; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
