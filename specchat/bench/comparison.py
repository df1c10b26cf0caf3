"""Which arms `bench run` compares, per backend of the pair's target: the one table a new
backend adds its arms to. Apart from the arms' modules (arms.py, llamacpp_arms.py,
which build on each other), so that choosing never imports back into them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from specchat.engine import Settings
from specchat.errors import UsageError

if TYPE_CHECKING:
    from specchat.bench.llama_programs import Programs
    from specchat.chat.pair import Pair
    from specchat.bench.arms import Arm

ArmsFactory = Callable[[Any, Settings, int, Any], "list[Arm]"]


def llamacpp_comparison(pair: Pair, settings: Settings, seed: int = 0,
                        programs: Programs | None = None) -> list[Arm]:
    """specchat's arms beside llama.cpp's own decoding and speculation (bench/llamacpp_arms.py),
    and llama.cpp's own programs where `programs` (bench/llama_programs.py) has them."""
    from specchat.bench.llamacpp_arms import bench_arms

    return bench_arms(pair, settings, seed, programs)


def torch_comparison(pair: Pair, settings: Settings, seed: int = 0,
                     programs: Programs | None = None) -> list[Arm]:
    """specchat's arms beside transformers' own decoding and assisted generation (llama.cpp's
    programs run GGUF files only: `programs` is not used)."""
    from specchat.bench.arms import standard_arms

    return standard_arms(pair, settings, seed)


COMPARISON_ARMS: dict[str, ArmsFactory] = {"torch": torch_comparison, "llama.cpp": llamacpp_comparison,
                                           "int8": llamacpp_comparison}
"""The arms of `bench run`, per backend that computes the pair's target: a new backend adds
its own list of arms here."""


def target_backend(pair: Pair) -> str:
    """"llama.cpp", "int8" or "torch": what computed the loaded target's logits (an int8
    target runs a GGUF file, so it races llama.cpp's own decoding of that file)."""
    label = (getattr(pair, "backends", None) or {}).get("target", "torch")
    return label.split(" ", 1)[0]


def comparison_arms(pair: Pair, settings: Settings, seed: int = 0,
                    programs: Programs | None = None) -> list[Arm]:
    backend = target_backend(pair)
    if backend not in COMPARISON_ARMS:
        raise UsageError(f"pair '{pair.config.name}': bench has no arms for backend '{backend}' "
                         f"(known: {', '.join(sorted(COMPARISON_ARMS))})")
    return COMPARISON_ARMS[backend](pair, settings, seed, programs)
