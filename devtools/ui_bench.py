"""UI benchmark (`python -m devtools bench-ui`): how the app keeps up with a fast stream,
and how fast it opens.

Stream: the app runs in a pseudo-terminal (the real Linux driver, every frame
written out; the parent drains it) against a scripted pair that streams at a
fixed rate on an absolute schedule. Measured per answer: how long the worker
spent handing each round over (post_message), how far the stream fell behind its
schedule, the delay from a round's post to its handling, and from the last
round's post to the first screen refresh after it (the frames counted are the
refreshes that showed new rounds). Startup: the real `specchat`
command in a pseudo-terminal, timed until the input box is drawn and until typed
characters echo, with the pair still loading. Textual and the standard library only.
Developer-only (not in the wheel): the child runs from this checkout.
"""

from __future__ import annotations

import json
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZE = (160, 50)
CHECKOUT = Path(__file__).resolve().parent.parent
"""The repository root, which holds devtools/ (put on the child's path, wherever it runs)."""


def drain(master: int, until, timeout: float, on_data=None) -> bytes:
    """Read the terminal until until(buffer) is true or time runs out. The buffer grows in
    place: copied whole at every read, a long stream's megabytes of output made this reader
    fall behind, the terminal's buffer fill, and the app under test wait in its writes."""
    buffer = bytearray()
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline and not until(buffer):
        ready, _, _ = select.select([master], [], [], 0.01)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
            if on_data:
                on_data(buffer)
    return bytes(buffer)


def in_pty(argv: list[str], env: dict) -> tuple[subprocess.Popen, int]:
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                               close_fds=True, start_new_session=True)
    os.close(slave)
    return process, master


def child_env(folder: Path) -> dict:
    path = os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", PYTHONPATH=path)
    env.setdefault("SPECCHAT_CONFIG_DIR", str(folder / "config"))
    env.setdefault("SPECCHAT_DATA_DIR", str(folder / "data"))
    return env


def run_stream(rate: float, tokens: int, answers: int) -> dict:
    """The stream benchmark in a child process on a pseudo-terminal."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "result.json"
        argv = [sys.executable, "-m", "devtools.ui_bench_child", str(rate), str(tokens),
                str(answers), str(out)]
        process, master = in_pty(argv, child_env(Path(folder)))
        drain(master, lambda _: process.poll() is not None, timeout=120 + tokens * answers / rate)
        if process.poll() is None:
            process.kill()
        process.wait()
        os.close(master)
        if not out.exists():
            raise SystemExit("bench-ui: the app did not report "
                             "(see `python -m devtools.ui_bench_child`)")
        return json.loads(out.read_text())


def run_startup(timeout: float = 60.0) -> dict:
    """Open the real `specchat` (default pair) and time until it draws and takes typing."""
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        process, master = in_pty([sys.executable, "-m", "specchat"], child_env(Path(folder)))
        marks: dict[str, float | bool | None] = {}
        seen = drain(master, lambda b: b"essage (Enter sends" in b, timeout)
        marks["input_drawn_s"] = time.perf_counter() - started
        os.write(master, b"zqxj")
        seen += drain(master, lambda b: b"zqxj" in b, timeout)
        marks["typing_echoed_s"] = time.perf_counter() - started
        marks["model_ready_before_typing"] = b"ready" in seen
        seen += drain(master, lambda b: b"ready" in b, timeout)
        marks["pair_ready_s"] = time.perf_counter() - started if b"ready" in seen else None
        os.write(master, b"\x11")  # Ctrl+Q
        quit_at = time.perf_counter()
        drain(master, lambda _: process.poll() is not None, timeout=10)
        marks["quit_s"] = time.perf_counter() - quit_at
        if process.poll() is None:
            process.kill()
        process.wait()
        os.close(master)
        return marks


def summarise(results: dict) -> list[tuple[str, str]]:
    answers = results["answers"]
    post_max = max(a["post_ms_max"] for a in answers)
    rows = [("rate asked (tokens/s)", f"{results['rate']:.0f}"),
            ("tokens per answer / answers", f"{results['tokens']} / {len(answers)}"),
            ("rounds per answer", f"{answers[0]['rounds']}")]
    for i, a in enumerate(answers, 1):
        rows.append((f"answer {i}: achieved tokens/s", f"{a['achieved_tokens_per_s']:.0f}"))
        rows.append((f"answer {i}: behind schedule at the end", f"{a['behind_schedule_ms']:.1f} ms"))
        rows.append((f"answer {i}: post→handled p50 / p99 / max",
                     f"{a['handle_ms_p50']:.1f} / {a['handle_ms_p99']:.1f} / {a['handle_ms_max']:.1f} ms"))
        rows.append((f"answer {i}: last round → frame on screen", f"{a['final_frame_ms']:.1f} ms"))
        rows.append((f"answer {i}: frames showing new tokens", f"{a['frames']}"))
        rows.append((f"answer {i}: UI thread / process CPU share",
                     f"{a['ui_thread_cpu_share']:.0%} / {a['process_cpu_share']:.0%} "
                     f"(load average {a['load_average']:.1f} on {os.cpu_count()} CPUs)"))
    post_mean = statistics.fmean(a["post_ms_mean"] for a in answers)
    rows.append(("worker time per hand-over, mean / max", f"{post_mean:.3f} / {post_max:.1f} ms"))
    return rows


def main(rate: float, tokens: int, answers: int, startup: bool, as_json: bool) -> None:
    results = {"stream": run_stream(rate, tokens, answers)}
    if startup:
        results["startup"] = run_startup()
    if as_json:
        print(json.dumps(results, indent=2))
        return
    rows = summarise(results["stream"])
    if startup:
        s = results["startup"]
        rows += [("startup: input box drawn", f"{s['input_drawn_s']:.2f} s"),
                 ("startup: typed text echoed", f"{s['typing_echoed_s']:.2f} s"),
                 ("startup: pair loaded before typing?", "yes" if s["model_ready_before_typing"] else "no"),
                 ("startup: pair ready (loaded + baseline measured)",
                  "n/a" if s["pair_ready_s"] is None else f"{s['pair_ready_s']:.1f} s")]
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{label + ':':<{width}}{value}")


if __name__ == "__main__":  # pragma: no cover
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2000.0, 4000, 3, "--startup" in sys.argv, False)
