"""One of the int8 backend's C++ sources built for AVX2 alone (-march=haswell), or for AVX2
with AVX-VNNI, its operations under their own namespace, beside this CPU's build: where this
CPU has AVX-512, the tests compare the code paths bit for bit; on an AVX2 CPU the first is
the same path."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from specchat.models.device.hardware import cpu_flags
from specchat.models.int8 import native


HASWELL_FLAGS = {"avx2", "fma", "bmi2", "f16c"}
"""What a -march=haswell build runs on (its instructions beyond AVX)."""
AVX_VNNI = ("-mavxvnni",)
"""The AVX2 build's extra flag for AVX-VNNI's dot products (q4k_kernel.cpp's third path)."""


def built_for_avx2(source: Path, schemas: tuple[str, ...], namespace: str,
                   folder: Path, extra: tuple[str, ...] = ()) -> Iterator[Any]:
    """A fixture's body: `source` compiled for -march=haswell (and the `extra` flags) into
    `folder`, its `schemas` defined under torch.ops.`namespace`, which it yields (a skip on a
    CPU it cannot run on: not x86 or without AVX2; without AVX-VNNI for AVX_VNNI, once it
    has compiled)."""
    if not HASWELL_FLAGS <= cpu_flags():
        pytest.skip("an AVX2 build cannot run on this CPU")
    library = torch.library.Library(namespace, "DEF")
    for schema in schemas:
        library.define(schema)
    out = folder / f"{namespace}.so"
    done = subprocess.run([*native.compile_command(source, out, "haswell", namespace), *extra],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-800:]
    if AVX_VNNI[0] in extra and "avx_vnni" not in cpu_flags():
        pytest.skip("built for AVX-VNNI, which this CPU does not have to run it")
    torch.ops.load_library(str(out))
    yield getattr(torch.ops, namespace)
    del library
