"""The int8 backend object: a GGUF target or draft on the CPU through fbgemm's int8 kernels
(model.py; a target on oneDNN's where the CPU has AMX, linear.py says why, and a target's
Q4_K matrices on specchat's own Q4_K kernel elsewhere with AVX2, q4k.py says
why), its tokenizer read from the same file, and what the loader asks of it.

`int8_support` says whether this machine and this torch can run it, and in how many bits
the activations are quantized; given fake flags and engines, the tests ask it about other
machines. A draft on this backend is any GGUF draft, a `specchat distill` draft (from its
GGUF form, with its reduced vocabulary); one with a tokenizer of its own brings it
(models/vocabulary.py decides). Threads follow llama.cpp's rule in the chat: steps and
verifies on `threads`, a prompt's chunks on `prefill_threads`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from specchat.errors import PairError
from specchat.models.backend import LoadedModel, LoadRequest
from specchat.models.config.refs import ModelRef, parse_ref
from specchat.models.int8.linear import FBGEMM, ONEDNN, Q4K, onednn_multiplies
from specchat.models.int8.q4k import NEEDED_FLAGS, instructions

VNNI_FLAGS = {"avx512_vnni", "amx_int8"}
"""Any of these: fbgemm multiplies bytes into int32 without saturation (8-bit activations).
Not AVX-VNNI alone: fbgemm has no kernels for it and runs its AVX2 ones there, whose 16-bit
pair sums saturate on 8-bit activations (held to AVX2, a row of 256 ones times weights of
127 came out 2.0 for 254; tests/test_int8.py)."""
FLAT_VERIFY_FLAGS = {"amx_int8"}
"""AMX's int8 tiles: oneDNN's int8 matmul stays flat to 16 rows where fbgemm's does not
(linear.py), so a large target verifies on oneDNN there."""
Q4K_FLAGS = NEEDED_FLAGS
"""The Q4_K kernel's instructions (q4k.py: AVX2 and FMA; AVX-512 VNNI or AVX-VNNI where there
is). On 2 cores of an AMD EPYC (Zen 4) its AVX-512 path took Qwen2.5-Coder-1.5B's single step
to 0.85 of fbgemm's int8 rows and a verify of up to 5 rows to 0.85-0.98; built for AVX2 alone
on a Zen 5, its step took 0.87 of fbgemm's and a verify of 4-9 rows 1.02-1.13, and the
default pair ran 1.44-1.47x llama-bench on it against 1.41x on fbgemm (docs/backends.md). On a
CPU with AMX, oneDNN's flat int8 verify is what was measured, so that stays."""
FLAT_VERIFY_MIN_PARAMETERS = 1_000_000_000
"""A target this large or larger verifies on oneDNN where the CPU has AMX. oneDNN's step
costs more than fbgemm's by about the same time a matrix, which a small model's step feels
most (2 cores of a Sapphire Rapids, one step and a verify of 8 rows at depth 256, oneDNN
against fbgemm: Qwen2.5-Coder 1.5B +8% and -25%, its 0.5B +17% and -15%, SmolLM2-135M +26%
and equal; docs/backends.md)."""


@dataclass(frozen=True)
class Int8Support:
    """Whether the int8 backend runs here, why, and at what activation width."""

    usable: bool
    why: str
    reduce_range: bool = True
    """7-bit activations (no VNNI: AVX2's 16-bit pair sums would saturate on 8)."""
    target_kernel: str = FBGEMM
    """What a large target's linears multiply with (linear.py's kernels; `kernel_for`);
    drafts, which step one row at a time, keep fbgemm's faster single step."""

    def kernel_for(self, parameters: int, progress: Callable[[str], None] = lambda _: None) -> str:
        """The kernel a target of `parameters` multiplies with (FLAT_VERIFY_MIN_PARAMETERS):
        oneDNN or the Q4_K kernel only where its product checks out here
        (linear.onednn_multiplies, q4k.q4k_multiplies: asked only for a target that would
        use it; the Q4_K kernel is compiled then, once, which `progress` tells)."""
        if self.target_kernel == FBGEMM or parameters < FLAT_VERIFY_MIN_PARAMETERS:
            return FBGEMM
        if self.target_kernel == Q4K:
            from specchat.models.int8.q4k import q4k_multiplies

            return Q4K if q4k_multiplies(progress) else FBGEMM
        return self.target_kernel if onednn_multiplies() else FBGEMM

    @property
    def activation_bits(self) -> int:
        return 7 if self.reduce_range else 8


def int8_support(flags: set[str] | None = None, engines: list[str] | None = None) -> Int8Support:
    """This machine's (or the given CPU flags' and quantized engines') int8 support."""
    from specchat.models.device.hardware import cpu_flags

    flags = cpu_flags() if flags is None else flags
    engines = quantized_engines() if engines is None else engines
    if "fbgemm" not in engines:
        return Int8Support(False, "this torch has no fbgemm int8 kernels (x86 builds have them)")
    if "avx2" not in flags:
        return Int8Support(False, "the CPU has no AVX2, which fbgemm's int8 kernels need")
    if flags & FLAT_VERIFY_FLAGS and "onednn" in engines:
        return Int8Support(True, "oneDNN int8 kernels on AMX for a large target (a flat "
                           "verify), fbgemm for drafts: 8-bit activations", False, ONEDNN)
    if Q4K_FLAGS <= flags and not flags & FLAT_VERIFY_FLAGS:
        vnni = bool(flags & VNNI_FLAGS)
        return Int8Support(True, f"a large target's Q4_K matrices on the Q4_K kernel "
                           f"({instructions(flags)}), "
                           f"fbgemm for the rest and for drafts: {8 if vnni else 7}-bit "
                           "activations there", not vnni, Q4K)
    if flags & VNNI_FLAGS:
        return Int8Support(True, "fbgemm int8 kernels with VNNI: 8-bit activations", False)
    return Int8Support(True, "fbgemm int8 kernels on AVX2: 7-bit activations", True)


def quantized_engines() -> list[str]:
    """torch's quantized engines ("fbgemm" and "x86" on x86 builds, "qnnpack" on ARM)."""
    return list(torch.backends.quantized.supported_engines)


class Int8Backend:
    """GGUF models on int8 weights (models/backend.py's `ModelBackend`). They decode on every
    core in the chat too (`LoadRequest.beside_screen` changes nothing here): torch's threads
    do not stall when one shares a core with the screen. On 2 cores the Qwen head pair's chat
    answers ran at 9.0-9.8 tokens/s on two threads against 7.5-7.8 on one, and a key typed
    meanwhile showed within 75 ms either way (2026-11-27, Sapphire Rapids, tmux); with each
    chat job on a thread of its own (tui/worker_threads.py), 38-46 tokens/s on two threads
    against 28-31 on one (2026-11-29, AMD Zen 5, docs/choices.md)."""

    name = "int8"

    def __init__(self, support: Int8Support | None = None):
        self.support = support or int8_support()

    def device(self, device: str, device_why: str, gpu: str | None) -> tuple[str, str]:
        return "cpu", COMPUTES


    def load_target(self, ref: ModelRef, request: LoadRequest) -> LoadedModel:
        from specchat.models.gguf import cache as gguf_cache
        from specchat.models.weights import eos_token_ids

        model, path, facts = self._open(ref, request, None, None, target=True)
        request.progress(f"loading {path.name}'s tokenizer")  # transformers': 1.7 s for Qwen2.5's
        tokenizer = gguf_cache.load_tokenizer(path, request.progress)
        eos = set(facts.eos) | end_of_turn(tokenizer) | eos_token_ids(None, tokenizer)
        return self._loaded(model, facts, tokenizer, frozenset(eos))

    def load_draft(self, ref: ModelRef, request: LoadRequest, target: LoadedModel) -> LoadedModel:
        from specchat.models.vocabulary import gguf_own_tokenizer

        model, _, facts = self._open(ref, request, target.raw.threads, target.raw.prefill_threads)
        return self._loaded(model, facts, gguf_own_tokenizer(request.pair, ref, request.progress))

    def load_head(self, path, request: LoadRequest, target: LoadedModel) -> LoadedModel:
        """A draft head (models/head/) beside this target, on int8 rows like it."""
        from specchat.models.gguf.drafts import gguf_file
        from specchat.models.head_backends import int8_head, loaded_head
        from specchat.models.int8.convert import converted

        source = gguf_file(parse_ref(request.pair.target))
        assert source is not None, "an int8 target is a GGUF file"
        tensors = converted(source).tensors
        runtime, head = int8_head(path, request.pair.name, target.raw, tensors,
                                  self.support.reduce_range)
        return loaded_head(runtime, head, target, "int8")

    def engine_model(self, loaded: LoadedModel, vocab_size: int, request: LoadRequest):
        loaded.raw.vocab_size = vocab_size
        return loaded.raw, self.label(loaded.raw, loaded.options["facts"])

    def label(self, model, facts) -> str:
        """e.g. "int8 (qwen2 1.5B from Q4_K_M, fbgemm, 8-bit activations, 2 threads)";
        oneDNN's in place of fbgemm where the model multiplies on it."""
        threads = f"{model.threads} thread{'' if model.threads == 1 else 's'}"
        prompts = (f", prompts on {model.prefill_threads}"
                   if model.prefill_threads != model.threads else "")
        reduced = "" if model.vocab is None else f", {len(model.vocab)}-token head"
        kernel = kernel_name(model.kernel, self.support.activation_bits)
        return (f"int8 ({model.arch.name} {facts.size_label} from {facts.file_type}, {kernel}, "
                f"{self.support.activation_bits}-bit activations{reduced}, {threads}{prompts})")

    def _open(self, ref: ModelRef, request: LoadRequest, threads: int | None,
              prefill_threads: int | None, target: bool = False):
        """(the model, its GGUF file, the file's facts)."""
        from specchat.models.gguf.drafts import gguf_file
        from specchat.models.int8.convert import converted
        from specchat.models.int8.model import Int8Model
        from specchat.models.int8.q4k import file_tiles
        from specchat.models.int8.rows import native_rows

        if not self.support.usable:
            raise PairError(f"pair '{request.pair.name}': the int8 backend cannot run here: "
                            f"{self.support.why}; use backend = \"llama.cpp\" or \"torch\"")
        path = gguf_file(ref, request.progress)
        if path is None:
            raise PairError(f"{ref} is not a GGUF file: the int8 backend converts GGUF files "
                            "(use backend = \"torch\" for a transformers folder)")
        found = converted(path, request.progress)
        kernel = (self.support.kernel_for(kernel_parameters(path), request.progress) if target
                  else FBGEMM)
        tiles = file_tiles(path, request.progress) if kernel == Q4K else None
        kernel = FBGEMM if kernel == Q4K and not tiles else kernel
        request.progress(f"packing {path.name}'s weights: "
                         f"{kernel_name(kernel, self.support.activation_bits)}")
        model = Int8Model(found.arch, found.tensors, self.support.reduce_range,
                          found.facts.draft_vocab, threads=threads or request.threads,
                          prefill_threads=prefill_threads or request.prefill_threads,
                          kernel=kernel, tiles=tiles, native_rows=native_rows(request.progress))
        model.path = path  # what llama.cpp's own programs run in a race (bench/llama_programs)
        return model, path, found.facts

    def _loaded(self, model, facts, tokenizer: Any = None,
                eos: frozenset[int] = frozenset()) -> LoadedModel:
        source = f"{model.arch.name} {facts.size_label} {facts.file_type}"
        weights = ("its Q4_K and Q6_K matrices as the file has them, the rest int8 rows"
                   if model.kernel == Q4K else "int8 rows, one scale each")
        return LoadedModel(model, model.arch.vocab, tokenizer, eos, model.arch.context, "cpu",
                           COMPUTES, "int8", f"{weights}, from {source}", options={"facts": facts})


def kernel_parameters(path: Path) -> int:
    """The parameters the kernel choice counts (`Int8Support.kernel_for`): the GGUF header's,
    the count `pairs --check` names a target's kernel by, so the label and the load agree
    (0 for a header that cannot be read: fbgemm, which runs any model)."""
    from specchat.models.gguf.shape import gguf_shape

    shape = gguf_shape(path)
    return shape.size.parameters if shape is not None else 0


def end_of_turn(tokenizer) -> set[int]:
    """A chat template's end-of-turn token where the vocabulary has one (llama.cpp treats these
    as the end of an answer when the file names no EOT id)."""
    vocab = tokenizer.get_vocab()
    return {vocab[text] for text in END_OF_TURN if text in vocab}


COMPUTES = "the int8 backend computes on the CPU"


def kernel_name(kernel: str, activation_bits: int = 8) -> str:
    """How a label names one of linear.py's kernels (oneDNN is chosen only where the CPU has
    AMX, the Q4_K kernel where it has AVX2 and no AMX, on its code path: q4k.instructions).
    The label then gives fbgemm's `activation_bits`; where these are 7, the Q4_K kernel's
    own 8 are named here."""
    from specchat.models.device.hardware import cpu_flags

    if kernel == Q4K:
        own = "" if activation_bits == 8 else " (8-bit activations)"
        return (f"Q4_K and Q6_K matrices as the file has them on {instructions(cpu_flags())}"
                f"{own}, the rest fbgemm")
    return {FBGEMM: "fbgemm", ONEDNN: "oneDNN on AMX"}[kernel]


END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|end_of_text|>")
"""Token texts llama.cpp treats as the end of a turn when the file names no EOT id."""


def open_int8_target(reference: str, threads: int | None = None,
                     progress=lambda _: None) -> LoadedModel:
    """A GGUF target on the int8 backend outside any pair, with its tokenizer and EOS ids:
    `specchat distill --head` collects a draft head's training features from it."""
    from specchat.models.config.pairs import PairConfig

    pair = PairConfig(name="distill --head", target=reference, backend="int8")
    request = LoadRequest(pair, "cpu", "distill --head", torch.float32, "", threads, threads,
                          progress=progress)
    return Int8Backend().load_target(parse_ref(reference), request)
