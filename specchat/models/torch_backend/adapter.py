"""Which torch forward computes a transformers model's logits, chosen here, with its label.

`TorchForward` holds the two pair keys that steer it (configuration, never the
environment):
- `torch_forward`: `auto` (the static cache on CUDA, the lean forward on a CPU where the
  architecture allows, transformers' eager forward otherwise), `static`, `lean` or
  `eager` to force one (a forced forward the model cannot run falls back, and the label
  says which ran);
- `cuda_graphs`: how a static forward's steps are captured on CUDA: `auto` (explicit
  CUDA graphs for specchat's own Llama-family forward, `reduce-overhead` for
  transformers'), `graphs`, `reduce-overhead`, `cudagraphs` or `none`.
A draft with a reduced output vocabulary multiplies only those head rows: on specchat's own
static forward on CUDA (Llama family), else on the lean forward or transformers' eager one. Knows nothing about files, tokenizers, the llama.cpp backend or
decoding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specchat.models.config.pairs import PairConfig

FORWARDS = ("auto", "static", "lean", "eager")
CAPTURES = ("auto", "graphs", "reduce-overhead", "cudagraphs", "none")


@dataclass(frozen=True)
class TorchForward:
    """The pair's choice of torch forward (pair keys `torch_forward` and `cuda_graphs`)."""

    forward: str = "auto"
    """auto | static | lean | eager."""
    capture: str = "auto"
    """How static steps are captured on CUDA: auto | graphs | reduce-overhead | cudagraphs | none."""

    @property
    def configured(self) -> str:
        """The keys set away from auto, for the backend's label ("" when both are auto)."""
        keys = [f"torch_forward = {self.forward}" if self.forward != "auto" else "",
                f"cuda_graphs = {self.capture}" if self.capture != "auto" else ""]
        return ", ".join(key for key in keys if key)

    @classmethod
    def of(cls, pair: PairConfig) -> "TorchForward":
        """The choice a pair's keys `torch_forward` and `cuda_graphs` make."""
        return cls(pair.torch_forward, pair.cuda_graphs)


def static_wanted(device: str, how: TorchForward) -> bool:
    """The static cache (CUDA graphs on CUDA): on CUDA by default, anywhere when forced."""
    return how.forward == "static" or (how.forward == "auto" and device.startswith("cuda"))


def lean_wanted(how: TorchForward) -> bool:
    return how.forward in ("auto", "lean", "static")


def torch_adapter(model, device: str, vocab_size: int | None = None, quantized: bool = False,
                  head_ids: list[int] | None = None, int8: bool = False,
                  how: TorchForward = TorchForward()):
    """(adapter, label) for a loaded transformers model (see the module's docstring).

    `head_ids` (a draft's reduced output vocabulary) goes to the lean or the eager
    reduced-vocabulary forward, which multiply only those head rows. `int8` (a draft
    that shipped as int8) lets the lean forward multiply by int8 weights.
    """
    adapter, label = _chosen(model, device, vocab_size, quantized, head_ids, int8, how)
    return adapter, f"{label[:-1]}; {how.configured})" if how.configured else label


def _chosen(model, device, vocab_size, quantized, head_ids, int8, how: TorchForward):
    from specchat.models.torch_backend.hf import HFCausalModel
    from specchat.models.torch_backend.lean import LeanLlama, lean_problem
    from specchat.models.torch_backend.static_llama import owned_problem

    reduced_ok = head_ids is None or owned_problem(model) is None  # only our forward cuts heads
    if not quantized and static_wanted(device, how) and reduced_ok:
        heads = {"head_ids": head_ids} if head_ids is not None else {}
        adapter = static_adapter(model, vocab_size, capture=how.capture, **heads)
        kind = "own Llama forward" if type(adapter).__name__ == "StaticLlama" else "transformers"
        graphs = f", CUDA graphs: {adapter.capture}" if getattr(adapter, "compiled", False) else ""
        reduced = ", reduced vocabulary" if head_ids is not None else ""
        return adapter, f"torch ({kind}, static cache{graphs}{reduced})"
    if not quantized and lean_wanted(how) and lean_problem(model) is None:
        label = "torch (lean int8)" if int8 else "torch (lean)"
        return LeanLlama(model, vocab_size, head_ids, int8=int8), label
    if head_ids is not None:
        from specchat.models.torch_backend.reduced_vocab import ReducedVocabModel

        return ReducedVocabModel(model, head_ids, vocab_size), "torch (eager, reduced vocabulary)"
    return HFCausalModel(model, vocab_size), "torch (eager)"


def static_adapter(model, vocab_size: int | None = None, max_length: int | None = None,
                   **options):
    """specchat's own static forward (`static_llama.StaticLlama`) for the Llama family,
    transformers' forward over its StaticCache for every other architecture. (Here, not in
    static.py: static_llama builds on static, so static must not import it back.)"""
    from specchat.models.torch_backend.static import StaticCausalModel, static_length
    from specchat.models.torch_backend.static_llama import StaticLlama, owned_problem

    length = max_length or static_length(model.config)
    if owned_problem(model, length) is None:
        return StaticLlama(model, vocab_size, length, **options)
    return StaticCausalModel(model, vocab_size, length, **options)


def adapter_for(model, device: str, vocab_size: int | None = None, quantized: bool = False,
                head_ids: list[int] | None = None, int8: bool = False,
                how: TorchForward = TorchForward()):
    """The torch adapter alone (see `torch_adapter`)."""
    return torch_adapter(model, device, vocab_size, quantized, head_ids, int8, how)[0]
