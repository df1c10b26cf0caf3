"""Where a model's weights go: one device, or spread by accelerate's `device_map`.

`plan_placement` is a pure function of the model's size, the pair's `device` and
`max_memory` settings and an `Inventory` of the devices present (tests pass fake
ones): it returns the arguments for `from_pretrained` (`device_map`, `max_memory`)
and the device where logits, drafts and sampling live. Nothing is hand-placed:
accelerate decides which layers go where within the limits given. A model that
does not fit even with offloading is an `OutOfMemory` naming what it needs and
what there is. Knows nothing about decoding, text, or how models are loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from specchat.errors import ConfigError, OutOfMemory
from specchat.sizes import size_text

GiB = 1 << 30
HEADROOM = 1.2
"""Weights x this must fit: room for the KV cache, activations and CUDA's own state."""
GPU_RESERVE = 1 * GiB
"""Left free on every GPU by an automatic placement (CUDA context, graphs, logits)."""
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?\s*$", re.IGNORECASE)
UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


@dataclass(frozen=True)
class Inventory:
    """The memory this machine offers a model: free bytes per GPU index, and CPU RAM."""

    gpus: dict[int, int] = field(default_factory=dict)
    cpu: int = 0

    @property
    def total(self) -> int:
        return sum(self.gpus.values()) + self.cpu


@dataclass(frozen=True)
class Placement:
    """How to load one model: `from_pretrained` keywords and the device logits live on."""

    device: str
    """Where inputs go and logits come back: the first GPU used, or cpu."""
    device_map: str | None = None
    """None: load whole and move to `device`; "auto": accelerate spreads the layers."""
    max_memory: dict[int | str, int] | None = None
    why: str = ""

    def kwargs(self) -> dict:
        if self.device_map is None:
            return {}
        return {"device_map": self.device_map, "max_memory": self.max_memory}


def parse_size(text: str | int, where: str = "max_memory") -> int:
    """Bytes for 20GiB, 512MB, 3.5GB or a plain number of bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    match = SIZE.match(str(text))
    if match is None:
        raise ConfigError(f"{where}: '{text}' is not a size like \"20GiB\" or \"512MB\"")
    return int(float(match.group(1)) * UNITS[(match.group(2) or "b").lower()])


def parse_max_memory(table: dict, where: str = "max_memory") -> dict[int | str, int]:
    """{"0": "20GiB", "cpu": "64GiB"} from models.toml -> {0: bytes, "cpu": bytes}."""
    limits: dict[int | str, int] = {}
    for key, value in table.items():
        name = str(key)
        if name.isdigit():
            limits[int(name)] = parse_size(value, f"{where}.{name}")
        elif name in ("cpu", "disk"):
            limits[name] = parse_size(value, f"{where}.{name}")
        else:
            raise ConfigError(f"{where}: unknown device '{name}' (use GPU numbers like \"0\", "
                              "\"cpu\" or \"disk\")")
    return limits


def plan_placement(weight_bytes: int, device: str, inventory: Inventory,
                   max_memory: dict[int | str, int] | None = None, name: str = "model") -> Placement:
    """Where `weight_bytes` of weights go for a pair's `device` setting on `inventory`."""
    needed = int(weight_bytes * HEADROOM)
    if device == "cpu" or (device == "auto" and not inventory.gpus):
        if inventory.cpu and needed > inventory.cpu:
            raise OutOfMemory(f"{name} needs about {size_text(needed)} (weights "
                              f"{size_text(weight_bytes)} + 20%) but this machine has "
                              f"{size_text(inventory.cpu)} of RAM available: use a smaller model")
        return Placement("cpu", why="no CUDA device" if device == "auto" else "as configured")
    if device.startswith("cuda") and device != "cuda":
        return Placement(device, why="as configured")
    if device == "cuda" and not max_memory:
        return Placement("cuda", why="as configured")
    limits = max_memory or automatic_limits(inventory)
    first = min(inventory.gpus) if inventory.gpus else 0
    if max_memory is None and needed <= inventory.gpus.get(first, 0) - GPU_RESERVE:
        free = size_text(inventory.gpus[first])
        return Placement(f"cuda:{first}" if first else "cuda",
                         why=f"auto: fits on GPU {first} ({size_text(needed)} of {free} free)")
    room = sum(v for k, v in limits.items() if k != "disk")
    if needed > room + limits.get("disk", 0):
        raise OutOfMemory(f"{name} needs about {size_text(needed)} (weights "
                          f"{size_text(weight_bytes)} + 20%) but there is {size_text(room)} "
                          f"({describe(limits)}): use a smaller model, quantization = \"4bit\", "
                          "or raise max_memory")
    gpus = sorted(k for k in limits if isinstance(k, int) and limits[k] > 0)
    main = f"cuda:{gpus[0]}" if gpus else "cpu"
    return Placement(main, "auto", dict(limits),
                     why=f"auto: {size_text(needed)} spread over {describe(limits)} by accelerate")


def automatic_limits(inventory: Inventory) -> dict[int | str, int]:
    """Each GPU's free memory less a reserve, then CPU RAM less a quarter for everything else."""
    limits: dict[int | str, int] = {i: max(0, free - GPU_RESERVE) for i, free in inventory.gpus.items()}
    limits["cpu"] = int(inventory.cpu * 0.75)
    return limits


def describe(limits: dict[int | str, int]) -> str:
    names = [(f"GPU {k}" if isinstance(k, int) else str(k), v) for k, v in limits.items()]
    return ", ".join(f"{name} {size_text(v)}" for name, v in names)


def current_inventory() -> Inventory:
    """Free memory of the GPUs torch sees, and this machine's available RAM."""
    import torch

    gpus: dict[int, int] = {}
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            gpus[index] = int(torch.cuda.mem_get_info(index)[0])
    return Inventory(gpus, available_ram())


def available_ram() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def layer_summary(device_map: dict[str, object] | None, fallback: str) -> str:
    """"cuda:0 22 layers, cpu 10 layers" from a model's `hf_device_map`; `fallback` without one."""
    if not device_map:
        return f"all on {fallback}"
    counts: dict[str, int] = {}
    for module, where in device_map.items():
        label = f"cuda:{where}" if isinstance(where, int) else str(where)
        if re.search(r"\.layers\.\d+$", module):
            counts[label] = counts.get(label, 0) + 1
        else:
            counts.setdefault(label, 0)
    return ", ".join(f"{label} {n} layers" if n else f"{label} (embeddings/head)"
                     for label, n in counts.items())
