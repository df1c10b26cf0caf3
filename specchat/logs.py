"""The log file for bug reports: `specchat.log` in the user log folder, rotating.

`start_logging` is called once per command by the command line. It writes one
header record (specchat's version and the versions of the packages that decide what
runs: Python, torch, transformers, textual, llama-cpp-python, and the command line),
and from then on every module's `logging.getLogger(__name__)` lands in the file: the
loader's backend choice, the errors a user saw, and the tracebacks behind them. The
screen never shows log records. `SPECCHAT_LOG_DIR` moves the folder (how tests isolate
themselves, like the other folders in paths.py). Standard library and platformdirs only.
"""

from __future__ import annotations

import logging
import logging.handlers
import platform
import sys
from importlib import metadata
from pathlib import Path

from specchat import __version__, paths

LOG_NAME = "specchat.log"
MAX_BYTES = 1_000_000
"""A log file rotates at this size; `BACKUPS` older files are kept beside it."""
BACKUPS = 3
VERSIONED = ("torch", "transformers", "textual", "llama_cpp_python", "textual-serve")
"""Packages whose versions the header names, when installed."""
FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


def log_file() -> Path:
    return paths.log_dir() / LOG_NAME


def versions() -> dict[str, str]:
    """Installed versions of specchat, Python and the packages in `VERSIONED`, by name,
    read from package metadata (nothing is imported)."""
    found = {"specchat": __version__, "python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


class LogFile(logging.handlers.RotatingFileHandler):
    """specchat's log file handler (a command run again in this process finds its own)."""


def start_logging(argv: list[str] | None = None) -> Path | None:
    """Send specchat's log records to the log file and write the header; None when the
    folder cannot be written (logging then stays off: it must never stop a command)."""
    logger = logging.getLogger("specchat")
    path = log_file()
    for handler in [h for h in logger.handlers if isinstance(h, LogFile)]:
        if Path(handler.baseFilename) == path.absolute():
            return path
        logger.removeHandler(handler)  # the folder moved (another command in this process)
        handler.close()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log_file_handler = LogFile(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8",
                                   errors="backslashreplace")
    except OSError:
        return None
    handler = log_file_handler
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    header = " ".join(f"{name} {version}" for name, version in versions().items())
    logger.info("start: %s on %s; argv: %s", header, platform.platform(),
                " ".join(sys.argv if argv is None else argv))
    return path
