"""`specchat serve` in a real headless browser (issue 26, item 1): the page loads, a prompt
typed into it streams an answer, and a screenshot of the transcript shows tokens in at
least three fate colours. Chromium and chromedriver come from the Debian packages
(`apt-get install chromium chromium-driver`; .ci/run installs them); without them the test
skips and its reason, in the run's summary, says how to install them.

Also without a browser: the command binds to loopback by default, warns when it does not,
and a bad pair or theme is one line before any server starts."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time

import pytest
from click.testing import CliRunner

from specchat.cli import main
from specchat.commands.serve import chat_command
from specchat.theme_files import load_theme
from serve_support import ROOT, serving

SCREENSHOT = ROOT / "docs" / "serve.png"
FATES = ("accepted", "rejected", "resampled", "bonus")
INSTALL = ("Chromium is not installed: apt-get install chromium chromium-driver (Debian/Ubuntu; "
           ".ci/run does it on CI) to run the browser test of specchat serve")


@pytest.fixture
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.skip(INSTALL)
    webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium (the test extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                     "--disable-dev-shm-usage"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def served(tmp_path):
    """`specchat serve --demo` on a free port, with its own folders: the URL it printed."""
    pytest.importorskip("textual_serve", reason="pip install 'specchat[serve]'")
    with serving(tmp_path, "--theme", "specchat-dark") as served:
        yield f"{served.origin}/?token={served.token}"


def fate_pixels(png: bytes, box: tuple[float, float, float, float]) -> dict[str, int]:
    """How many pixels of each fate colour (specchat-dark's) the box of the image holds."""
    import io

    from PIL import Image

    theme = load_theme("specchat-dark")
    targets = {kind: tuple(int(theme.token_color(kind)[i:i + 2], 16) for i in (1, 3, 5))
               for kind in FATES}
    image = Image.open(io.BytesIO(png)).convert("RGB")
    width, height = image.size
    left, top, right, bottom = box
    region = image.crop((int(left * width), int(top * height), int(right * width),
                         int(bottom * height)))
    counts = dict.fromkeys(FATES, 0)
    for (r, g, b), n in ((pixel, n) for n, pixel in region.getcolors(maxcolors=1 << 20)):
        for kind, (tr, tg, tb) in targets.items():
            if abs(r - tr) + abs(g - tg) + abs(b - tb) <= 24:
                counts[kind] += n
    return counts


TRANSCRIPT = (0.0, 0.05, 0.6, 0.8)
"""Where the transcript is drawn at 1400x900: the left of the page, above the legend (which
shows every fate colour whether or not an answer streamed)."""


def test_a_prompt_typed_in_the_browser_streams_tokens_in_their_fate_colours(browser, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(served)
    WebDriverWait(browser, 60).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".xterm-helper-textarea"))
    time.sleep(4)  # the app draws its first screen and the demo pair loads (1 s)
    before = fate_pixels(browser.get_screenshot_as_png(), TRANSCRIPT)
    typing = browser.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea")
    typing.send_keys("Explain speculative decoding")
    typing.send_keys("\n")
    deadline = time.monotonic() + 60
    while True:
        time.sleep(1)
        png = browser.get_screenshot_as_png()
        after = fate_pixels(png, TRANSCRIPT)
        shown = [kind for kind in FATES if after[kind] > before[kind] + 50]
        if len(shown) >= 3 or time.monotonic() > deadline:
            break
    assert len(shown) >= 3, f"fate colours in the transcript: before {before}, after {after}"
    if os.environ.get("SPECCHAT_UPDATE_SCREENSHOT"):
        SCREENSHOT.write_bytes(png)


def test_serve_binds_to_loopback_unless_told_and_runs_this_python():
    command = chat_command("smollm2-135m", "specchat-light", 3, None, None)
    assert command.startswith(f"{sys.executable} -m specchat chat --pair smollm2-135m")
    assert "--theme specchat-light -k 3" in command and command.endswith(" --served")
    serve = main.get_command(None, "serve")
    host = next(p for p in serve.params if p.name == "host")
    assert host.default == "127.0.0.1"


@pytest.mark.parametrize("args, fragment", [
    (["--pair", "nope"], "unknown pair 'nope'"),
    (["--demo", "5", "--theme", "nope"], "theme"),
    (["--demo", "0"], "--demo must be a pace above 0"),
])
def test_serve_refuses_a_bad_pair_or_theme_before_serving(args, fragment):
    result = CliRunner().invoke(main, ["serve", *args])
    assert result.exit_code == 2 and fragment in result.output
    assert "serving" not in result.output


def test_serve_on_a_port_in_use_is_one_line_before_any_banner():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--demo", "5", "--port", str(port)])
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output and "Serving" not in result.output


@pytest.mark.parametrize("present, installs", [
    ((), True), (("chromium",), True), (("chromedriver",), True),
    (("chromium", "chromedriver"), False)])
def test_ci_installs_chromium_and_its_driver_unless_both_are_there(tmp_path, present, installs):
    """.ci/run with stand-ins on PATH: apt-get, id (root) and make record their calls."""
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    stand_ins = {name: "exit 0" for name in present}
    stand_ins |= {"apt-get": f'echo "apt-get $*" >> {log}', "id": "echo 0",
                  "make": f'echo "make $*" >> {log}', "dirname": 'echo "${1%/*}"'}
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    subprocess.run(["/bin/bash", str(ROOT / ".ci" / "run")], env={"PATH": str(bin_dir)},
                   check=True, timeout=30)
    calls = log.read_text().splitlines()
    installed = any("install" in call and "chromium chromium-driver" in call for call in calls)
    assert installed == installs, calls
    assert calls[-1] == "make test"
