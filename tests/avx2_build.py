"""One of the int8 backend's C++ sources built for AVX2 alone (-march=haswell), its
operations under their own namespace, beside this CPU's build: where this CPU has AVX-512,
the tests compare the two code paths bit for bit; on an AVX2 CPU both are the same path."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Iterator

import torch

from specchat.models.int8 import native


HASWELL_FLAGS = {"avx2", "fma", "bmi2", "f16c"}
"""What a -march=haswell build runs on (its instructions beyond AVX)."""


def built_for_avx2(source: Path, schemas: tuple[str, ...], namespace: str,
                   folder: Path) -> Iterator[Any]:
    """A fixture's body: `source` compiled for -march=haswell into `folder`, its `schemas`
    defined under torch.ops.`namespace`, which it yields (a skip on a CPU it cannot run on:
    not x86, or without AVX2)."""
    import pytest

    from specchat.models.device.hardware import cpu_flags

    if not HASWELL_FLAGS <= cpu_flags():
        pytest.skip("an AVX2 build cannot run on this CPU")
    library = torch.library.Library(namespace, "DEF")
    for schema in schemas:
        library.define(schema)
    out = folder / f"{namespace}.so"
    done = subprocess.run(native.compile_command(source, out, "haswell", namespace),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-800:]
    torch.ops.load_library(str(out))
    yield getattr(torch.ops, namespace)
    del library
