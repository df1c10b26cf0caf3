"""`specchat export-gguf`: write a trained draft as a GGUF file llama.cpp runs as a draft.

Parses the options, prints where the file went and how to use it. The checks
and the writing are in `specchat.models.gguf.drafts` and
`specchat.models.gguf.export`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


TYPES = ("q8_0", "f16", "f32")
type_option = click.option(
    "--type", "gguf_type", type=click.Choice(TYPES), default="q8_0", show_default=True,
    help="Encoding of the draft's matrices: q8_0 (an int8 draft keeps its own int8 values), "
         "f16, or f32 (exact).")


@click.command("export-gguf", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--draft", "draft_dir", required=True, type=click.Path(path_type=Path), metavar="DIR",
              help="A `specchat distill --out` folder.")
@click.option("--out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              metavar="FILE.gguf", help="The GGUF file to write.")
@click.option("--target", default=None, metavar="REF",
              help="The draft's target (default: the one it was trained for; must be that file).")
@type_option
def export_gguf(draft_dir: Path, out: Path, target: str | None, gguf_type: str):
    """Write a trained draft as a GGUF file for llama.cpp (same tokenizer and vocabulary)."""
    from specchat.models.gguf.drafts import export_draft

    report(export_draft(draft_dir, out, target, gguf_type))


def report(result: Any) -> None:
    vocab = (f"proposes from {result.reduced} of {result.vocab_size} tokens (the others score the "
             f"mean of those)" if result.reduced else f"vocabulary {result.vocab_size}")
    click.echo(f"wrote {result.path} ({result.size_bytes / 1e6:.1f} MB, {result.layers} layers, "
               f"{result.gguf_type}; {vocab})")
    click.echo(f"use it as llama.cpp's draft: llama-speculative -m TARGET.gguf -md {result.path}")
