"""The built wheel is the whole product: installed into a fresh virtual environment
outside the repository, `specchat pairs`, `run`, `bench --limit 1` and the chat work
with only what is inside the wheel (models.toml, themes, the prompt set, the draft). And
nothing more: the developer tools (devtools/: the GPU campaign, publish, the UI benchmark's
driver, llama.cpp's build) are not in it.

The fresh environment has no pip and no system site-packages; specchat's
dependencies (torch, transformers, ...) come from this test run's environment
through a plain path in a .pth file, which adds their folder but runs none of its
.pth files, so the editable install of the checkout stays invisible.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SMOKE = Path(__file__).resolve().parent / "wheel_chat_smoke.py"


def build_wheel(out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q",
                    "-w", str(out)], check=True, cwd=out)
    (wheel,) = out.glob("specchat-*.whl")
    return wheel


def fresh_venv(root: Path, wheel: Path) -> Path:
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(root)
    python = root / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "outer-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", str(wheel)], check=True, cwd=root)
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The wheel of the checkout."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed(built) -> Path:
    """A fresh virtual environment (outside the repository) with the built wheel."""
    return fresh_venv(built.parent / "venv", built)


def run_in(env_root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in args], cwd=env_root.parent, capture_output=True,
                          text=True, timeout=timeout, env=environment)


def specchat(env_root: Path, *args: str) -> subprocess.CompletedProcess:
    return run_in(env_root, env_root / "bin" / "specchat", *args)


def test_wheel_imports_specchat_from_itself_not_the_checkout(installed):
    found = run_in(installed, installed / "bin" / "python", "-c",
                   "import specchat; print(specchat.__file__)").stdout.strip()
    assert Path(found).is_relative_to(installed) and not Path(found).is_relative_to(REPO)


DEVELOPER_ONLY = ("devtools/", "specchat/bench/gpu/", "specchat/bench/llama_build.py",
                  "specchat/commands/bench_gpu.py", "specchat/tui/bench.py",
                  "specchat/tui/bench_child.py")
"""What the wheel must not hold: the developer tools, and where they lived before."""


def test_the_wheel_holds_no_developer_tools(built):
    with zipfile.ZipFile(built) as wheel:
        names = wheel.namelist()
        sources = {name: wheel.read(name) for name in names if name.endswith(".py")}
    assert "specchat/bench/modes.py" in names and "specchat/commands/bench.py" in names
    assert [n for n in names if n.startswith(DEVELOPER_ONLY)] == []
    budgets = [n for n, text in sources.items() if b"DEVICE_MINUTES" in text]  # a lent GPU's
    assert budgets == []


def test_the_wheel_holds_the_c_plus_plus_sources_it_compiles_on_first_use(built):
    """The int8 backend compiles its kernels from sources inside the package (native.py)."""
    with zipfile.ZipFile(built) as wheel:
        names = set(wheel.namelist())
    sources = {str(path.relative_to(REPO)) for path in (REPO / "specchat").rglob("*.cpp")}
    assert {"specchat/models/int8/q4k_kernel.cpp", "specchat/models/int8/rows_kernel.cpp"} <= sources
    assert sources <= names


def test_the_installed_wheel_has_the_users_bench_and_no_developer_commands(installed):
    assert run_in(installed, installed / "bin" / "python", "-c", "import devtools").returncode != 0
    listed = specchat(installed, "bench", "-h").stdout
    assert all(name in listed for name in ("run", "sweep", "profile", "overhead"))
    assert not any(name in listed for name in ("campaign", "publish", "scale", "build-llama"))
    refused = specchat(installed, "bench-ui")
    assert refused.returncode == 2 and "No such command 'bench-ui'" in refused.stderr


def test_wheel_ships_the_built_in_pairs(installed):
    result = specchat(installed, "pairs")
    assert result.returncode == 0, result.stderr
    assert "smollm2-135m " in result.stdout and "builtin:smollm2-135m-draft" in result.stdout
    assert "available offline" in result.stdout.split("builtin:smollm2-135m-draft")[1].splitlines()[0]


def test_wheel_runs_an_answer(installed, tiny_config):
    result = specchat(installed, "run", "--config", str(tiny_config), "--pair", "tiny",
                      "--max-new-tokens", "6", "hello")
    assert result.returncode == 0, result.stderr
    assert "mode:" in result.stderr and "speculative" in result.stderr


def test_wheel_bench_uses_the_shipped_prompt_set(installed, tiny_config):
    result = specchat(installed, "bench", "--config", str(tiny_config), "--pair", "tiny",
                      "--limit", "1", "--max-new-tokens", "4", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [p["id"] for p in report["prompts"]] == ["chat-01"]


def test_wheel_chat_answers_with_the_shipped_theme(installed, tiny_config):
    result = run_in(installed, installed / "bin" / "python", SMOKE, tiny_config, "tiny")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "theme: specchat-dark" in result.stdout
    assert "answer: ''" not in result.stdout


@pytest.mark.slow
def test_wheel_runs_the_small_pair_with_its_shipped_draft(installed):
    result = specchat(installed, "run", "--pair", "smollm2-135m", "--max-new-tokens", "8",
                      "What is 2 + 2?")
    assert result.returncode == 0, result.stderr
    assert "speculative" in result.stderr and "smollm2-135m" in result.stderr
    bench = specchat(installed, "bench", "--pair", "smollm2-135m", "--limit", "1",
                     "--max-new-tokens", "4", "--json")
    assert bench.returncode == 0, bench.stderr
    assert json.loads(bench.stdout)["prompts"][0]["id"] == "chat-01"


@pytest.mark.slow
def test_wheel_runs_the_default_pair_with_its_shipped_head(installed):
    """The default pair as `make chat` opens it: the Qwen target (the qwen-coder extra, which
    the suite installs) drafted by the head the wheel ships."""
    result = specchat(installed, "run", "--max-new-tokens", "8", "What is 2 + 2?")
    assert result.returncode == 0, result.stderr
    pair = re.search(r"^pair:\s+(\S+)", result.stderr, re.M)
    assert pair is not None and pair[1] == "qwen2.5-coder-head"
    assert "speculative" in result.stderr
    assert re.search(r"^draft backend:\s+head \(1 layer", result.stderr, re.M), result.stderr
