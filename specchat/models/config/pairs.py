"""models.toml: named draft/target pairs, validated into `PairConfig`.

Files are layered: the built-in models.toml, then the user's (in the config
directory), then a file named with --config; a pair defined later replaces one of
the same name. Every mistake becomes a `ConfigError` naming the file and key, and for a
number the allowed range. The ranges of the decoding knobs (k, top_k, ngram_n) and the
sampling settings' shape (`SamplingParams`) are the engine's (engine/params.py); this
module owns the others (`THREADS`, temperature, top_p). Knows nothing about loading
models.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from specchat import paths
from specchat.engine.params import (DRAFT_LENGTH, NGRAM_N, TEMPERATURE, TOP_K, TOP_P, Bound,
                                    SamplingParams)
from specchat.errors import ConfigError

DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZATIONS = ("none", "8bit", "4bit")
BACKENDS = ("auto", "torch", "llama.cpp", "int8")
TORCH_FORWARDS = ("auto", "static", "lean", "eager")
CUDA_GRAPHS = ("auto", "graphs", "reduce-overhead", "cudagraphs", "none")
RETOKENIZE = ("auto", "always")
CHOICES = {"dtype": DTYPES, "quantization": QUANTIZATIONS, "draft_quantization": QUANTIZATIONS,
           "backend": BACKENDS, "torch_forward": TORCH_FORWARDS, "cuda_graphs": CUDA_GRAPHS,
           "retokenize": RETOKENIZE}
"""Keys whose value is one of a few words."""
THREADS = Bound(0, None)
"""threads: 0 chooses; more than this machine's usable cores are capped to them when the
model loads, with a note (models/device/cores.py)."""
GPU_LAYERS = Bound(0, None, also="all")
"""gpu_layers: how many layers llama.cpp offloads; "all" every one."""
BOUNDS: dict[str, Bound] = {"k": DRAFT_LENGTH, "top_k": TOP_K, "ngram_n": NGRAM_N,
                            "threads": THREADS, "gpu_layers": GPU_LAYERS}
"""The whole-number keys and their ranges."""
SAMPLING_KEYS = ("temperature", "top_k", "top_p")
"""Keys of models.toml that make up a pair's `SamplingParams`."""


@dataclass(frozen=True)
class PairConfig:
    """One draft/target pair and its default decoding settings."""

    name: str
    target: str
    """Model reference: hub id, local folder, .gguf file or builtin:NAME."""
    draft: str | None = None
    """Draft model reference, "ngram" for prompt lookup, or None for plain decoding."""
    k: int | str = 4
    """Draft tokens per round (0 to K_MAX, engine/params.py); 0 decodes with the target
    alone; "auto" adapts it every round."""
    sampling: SamplingParams = SamplingParams()
    """temperature (0 is greedy: exactly the target's own greedy output in float32), top_p
    (nucleus threshold in (0, 1]) and top_k (0 keeps all), the file's keys of those names."""
    dtype: str = "auto"
    """auto picks bfloat16 where the hardware supports it, else float32."""
    device: str = "auto"
    """auto is cuda when available, else cpu."""
    quantization: str = "none"
    """8bit (LLM.int8) or 4bit (nf4, computing in bfloat16) load the target through
    bitsandbytes (CUDA only)."""
    draft_quantization: str = "none"
    """The same for the draft model; "none" keeps it in `dtype` (drafts are small, and a
    quantized matrix-vector product is often slower than a bfloat16 one at batch 1)."""
    max_memory: dict | None = None
    """Per-device limits for spreading the target with accelerate (device = "auto"), e.g.
    {"0" = "20GiB", "cpu" = "64GiB"}; unset: each GPU's free memory and 3/4 of the RAM."""
    backend: str = "auto"
    """What computes the logits: torch, llama.cpp (GGUF files, offloaded to the GPU where
    the installed build can: CUDA, Metal, Vulkan; `gpu_layers`), int8 (GGUF files on the CPU
    through fbgemm's int8 kernels: a verify costs little more than a step), or auto: int8 for
    a GGUF target that speculates on a CPU that runs it, else llama.cpp for a GGUF target when
    llama-cpp-python is installed and can run where the pair's device is (models/adapters.py)."""
    torch_forward: str = "auto"
    """Which torch forward computes a model: auto (the static cache on CUDA, the lean forward
    on a CPU where the architecture allows, transformers' otherwise), static, lean or eager."""
    cuda_graphs: str = "auto"
    """How static-cache steps are captured on CUDA: auto, graphs, reduce-overhead,
    cudagraphs or none."""
    ngram_n: int = 3
    """Longest n-gram prompt lookup tries to match."""
    lookup: bool = False
    """With a draft model or a draft head: also prompt lookup, first, where the answer is
    copying text (a match running 4 tokens or more): its continuation costs nothing, the
    model or head drafts everywhere else (engine/drafters.py `LookupFirstDrafter`)."""
    threads: int = 0
    """CPU threads of the llama.cpp and int8 models; 0 chooses: every physical core, but a
    llama.cpp model decodes on one fewer in the chat, whose screen needs a core of its own to
    draw on (models/backend_llamacpp.py `decode_threads`)."""
    gpu_layers: int | str = "all"
    """Layers of a llama.cpp model offloaded to the GPU: "all" where the llama-cpp-python build
    supports it (CUDA, Metal, Vulkan; the CPU otherwise), 0 keeps the CPU, N offloads N."""
    retokenize: str = "auto"
    """auto: a draft of another tokenizer has its text re-tokenized for the target, one of the
    target's tokenizer speculates as it is; always: re-tokenize it even so (to measure what
    the cross-tokenizer path costs against speculating as one tokenizer, same draft)."""
    description: str = ""
    source: str = ""
    """The file this pair came from."""


PAIR_KEYS = {f.name for f in fields(PairConfig)} - {"name", "source", "sampling"} | set(SAMPLING_KEYS)


@dataclass(frozen=True)
class Catalog:
    """All pairs known after layering the config files."""

    pairs: dict[str, PairConfig]
    default: str

    def get(self, name: str | None) -> PairConfig:
        name = name or self.default
        if name not in self.pairs:
            known = ", ".join(sorted(self.pairs)) or "none"
            raise ConfigError(f"unknown pair '{name}': known pairs are {known} "
                              f"(add it to {paths.user_models_file()} or pass --config FILE)")
        return self.pairs[name]


def load_catalog(extra: Path | None = None) -> Catalog:
    """Layer the built-in, user and --config files into one catalog."""
    files = [paths.shipped("models.toml"), paths.user_models_file()]
    if extra is not None:
        if not Path(extra).is_file():
            raise ConfigError(f"config file {extra} does not exist: check the --config path")
        files.append(Path(extra))
    pairs: dict[str, PairConfig] = {}
    default = ""
    for file in files:
        if not file.is_file():
            continue
        data = read_toml(file)
        default = _check_default(data, file) or default
        pairs.update(parse_pairs(data, file))
    if default and default not in pairs:
        raise ConfigError(f"{files[-1]}: default pair '{default}' is not defined under [pairs]")
    return Catalog(pairs, default or next(iter(pairs), ""))


def read_toml(file: Path) -> dict:
    data = b""
    try:
        data = file.read_bytes()
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise ConfigError(f"{file}: not UTF-8 text (byte 0x{data[error.start]:02x} on line {line}); "
                          "save it as UTF-8") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{file}: not valid TOML ({error}); fix the file or move it aside") from None
    except OSError as error:
        raise ConfigError(f"{file}: cannot be read ({error.strerror})") from None


def _check_default(data: dict, file: Path) -> str:
    unknown = set(data) - {"default", "pairs"}
    if unknown:
        raise ConfigError(f"{file}: unknown top-level key '{sorted(unknown)[0]}' "
                          "(expected 'default' and [pairs.NAME] tables)")
    default = data.get("default", "")
    if not isinstance(default, str):
        raise ConfigError(f"{file}: 'default' must be a pair name in quotes")
    return default


def parse_pairs(data: dict, file: Path) -> dict[str, PairConfig]:
    tables = data.get("pairs", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{file}: 'pairs' must be tables like [pairs.NAME]")
    return {name: parse_pair(name, table, file) for name, table in tables.items()}


def parse_pair(name: str, table: dict, file: Path) -> PairConfig:
    where = f"{file}: [pairs.{name}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = set(table) - PAIR_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key '{sorted(unknown)[0]}' "
                          f"(allowed: {', '.join(sorted(PAIR_KEYS))})")
    _check_target(where, table.get("target"))
    values = {key: _typed(where, key, value) for key, value in table.items()}
    sampling = SamplingParams(**{key: values.pop(key) for key in SAMPLING_KEYS if key in values})
    pair = PairConfig(name=name, source=str(file), sampling=sampling, **values)
    validate_pair(pair, where)
    return pair


MODEL_REFERENCE = "a hub id, folder, .gguf file or builtin:NAME, in quotes"


def _check_target(where: str, target: Any) -> None:
    """'target' is there, and a model reference: text, not empty."""
    if target is None:
        raise ConfigError(f"{where}: 'target' is required: {MODEL_REFERENCE}")
    if isinstance(target, bool) or not isinstance(target, str):
        raise ConfigError(f"{where}: 'target' must be a model reference ({MODEL_REFERENCE}), "
                          f"not {target!r}")
    if not target.strip():
        raise ConfigError(f"{where}: 'target' is empty: write a model reference "
                          f"({MODEL_REFERENCE})")


_TYPES: dict[str, Any] = {
    "target": str, "draft": str, "temperature": (int, float), "top_p": (int, float),
    "dtype": str, "device": str, "quantization": str, "draft_quantization": str,
    "max_memory": dict, "backend": str, "torch_forward": str, "cuda_graphs": str,
    "retokenize": str, "description": str, "lookup": bool}


def _typed(where: str, key: str, value: Any) -> Any:
    if key in BOUNDS:
        problem = BOUNDS[key].message(f"'{key}'", value)
        if problem:
            raise ConfigError(f"{where}: {problem}")
        return value
    expected = _TYPES[key]
    if expected is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: '{key}' must be true or false, without quotes (got {value!r})")
        return value
    if isinstance(value, bool) or not isinstance(value, expected):
        kind = expected.__name__ if isinstance(expected, type) else "number"
        raise ConfigError(f"{where}: '{key}' must be a {kind}, not {value!r}")
    if key == "max_memory":
        from specchat.models.device.placement import parse_max_memory

        return parse_max_memory(value, f"{where}: 'max_memory'")
    return float(value) if key in ("temperature", "top_p") else value


def validate_pair(pair: PairConfig, where: str) -> None:
    """Range checks of a pair as models.toml gives it, against engine/params.py's bounds
    (the command line's click types check its flags against the same bounds)."""
    values = {"k": pair.k, "top_k": pair.sampling.top_k, "ngram_n": pair.ngram_n,
              "threads": pair.threads, "gpu_layers": pair.gpu_layers}
    problems = [BOUNDS[key].message(f"'{key}'", value) for key, value in values.items()]
    problems += [TEMPERATURE.message("'temperature'", pair.sampling.temperature),
                 TOP_P.message("'top_p'", pair.sampling.top_p)]
    problems += [f"'{key}' must be one of {', '.join(words)} (got {getattr(pair, key)!r})"
                 for key, words in CHOICES.items() if getattr(pair, key) not in words]
    if not _valid_device(pair.device):
        problems.append(f"'device' must be auto, cpu, cuda or cuda:N (got {pair.device!r})")
    problem = next((p for p in problems if p), None)
    if problem:
        raise ConfigError(f"{where}: {problem}")


def _valid_device(device: str) -> bool:
    return device in ("auto", "cpu", "cuda") or cuda_index(device) is not None


def cuda_index(device: str) -> int | None:
    """N of a device "cuda:N" (the GPU llama.cpp puts the whole model on); None otherwise.
    ASCII digits only: "cuda:²" passes str.isdigit but not int(), and "cuda:٣" passes int()
    but not torch.device."""
    prefix, _, index = device.partition(":")
    return int(index) if prefix == "cuda" and index.isascii() and index.isdecimal() else None
