"""Where specchat keeps files: config, data (history), cache (converted models),
and the files that ship with it (built-in models.toml, themes).

Each directory can be moved with an environment variable (SPECCHAT_CONFIG_DIR,
SPECCHAT_DATA_DIR, SPECCHAT_CACHE_DIR, SPECCHAT_LOG_DIR), which is also how tests isolate
themselves. Standard library and platformdirs only.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SOURCE_ROOT = PACKAGE_DIR.parent


def _user_dir(variable: str, kind: str) -> Path:
    if os.environ.get(variable):
        return Path(os.environ[variable]).expanduser()
    import platformdirs

    return Path(getattr(platformdirs, f"user_{kind}_dir")("specchat"))


def config_dir() -> Path:
    return _user_dir("SPECCHAT_CONFIG_DIR", "config")


def data_dir() -> Path:
    return _user_dir("SPECCHAT_DATA_DIR", "data")


def cache_dir() -> Path:
    return _user_dir("SPECCHAT_CACHE_DIR", "cache")


def log_dir() -> Path:
    return _user_dir("SPECCHAT_LOG_DIR", "log")


def user_models_file() -> Path:
    return config_dir() / "models.toml"


def user_themes_dir() -> Path:
    return config_dir() / "themes"


def shipped(name: str) -> Path:
    """A file shipped with specchat: inside the wheel, or at the source checkout's root."""
    inside_wheel = {"models.toml": PACKAGE_DIR / "_data" / "models.toml",
                    "themes": PACKAGE_DIR / "_themes"}.get(name, PACKAGE_DIR / "_data" / name)
    return inside_wheel if inside_wheel.exists() else SOURCE_ROOT / name


def write_whole(path: Path, text: str) -> None:
    """Write `text` to `path` by a rename, so that a reader finds the old file or the new one,
    never part of one; `OSError` where it cannot, with no partial file left behind."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise
