"""The llama.cpp backend: a GGUF file behind the engine's `CausalModel` protocol.

Drives llama-cpp-python's low-level API. A forward fills one reusable `llama_batch`
(chunks of at most `BATCH` tokens), asks for logits only at the last `keep`
positions, runs `llama_decode`, and reads those rows through a numpy view of
llama.cpp's float buffer, copied once into a torch tensor. Rolling back removes
the KV cells past the committed length (`llama_memory_seq_rm`), and the cache
length is read back from llama.cpp's memory, so the engine's invariant checks
test the real cache. The engine, verification and sampling stay specchat's.

Where the installed build supports it (CUDA, Metal, Vulkan), layers are offloaded to
the GPU (`gpu_layers`, chosen in models/adapters.py); llama.cpp still hands the logits
back in host memory. The only module that imports `llama_cpp`, and only when a model is
loaded (or the backend is asked whether it is installed or can offload). Knows nothing about tokenizers, text,
decoding or configuration files.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import numpy as np
import torch

from specchat.engine.protocol import HeldTokens
from specchat.errors import ModelNotFound, shortened
from specchat.models.device.cores import capped_threads, physical_cores  # noqa: F401  (scripts' name)
from specchat.models.device.estimate import file_type_name, size_label
from specchat.models.llamacpp.repack import repack_allowed

MAX_CONTEXT = 4096
"""n_ctx cap: the model's trained context where smaller. The KV cache is allocated for
all of it up front (SmolLM2-135M at 4096 tokens: about 90 MB in f16)."""
BATCH = 512
"""Most tokens one `llama_decode` takes; a longer prompt goes in chunks of this size."""
PREFILL_TOKENS = 16
"""A forward of more tokens than this that keeps one row of logits is a prompt's prefill
(the engine's catch-up chunks): it runs on `prefill_threads`."""

_state: dict = {}
"""The imported bindings, the log callback (kept alive) and recent llama.cpp log lines."""


def missing() -> str | None:
    """Why the llama.cpp backend cannot be used here, or None when it can."""
    try:
        bindings()
    except Exception as error:  # noqa: BLE001 - not installed, or a build that fails to load
        return f"llama-cpp-python is not usable ({type(error).__name__}: {error})"
    return None


def bindings():
    """The low-level `llama_cpp` module, imported, logging captured and the backend
    initialised once."""
    if "lib" not in _state:
        import llama_cpp

        _state["log"] = []
        _state["callback"] = llama_cpp.llama_log_callback(_remember_log)
        llama_cpp.llama_log_set(_state["callback"], ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        _state["lib"] = llama_cpp
    return _state["lib"]


def gpu_offload() -> str | None:
    """The GPU backend this llama-cpp-python build offloads layers to ("CUDA", "Metal",
    "Vulkan", ...), or None for a CPU-only build."""
    lib = bindings()
    if not lib.llama_supports_gpu_offload():
        return None
    return gpu_backend_name(lib.llama_print_system_info().decode("utf-8", "replace"))


def gpu_backend_name(system_info: str) -> str:
    """The first non-CPU section of llama.cpp's system info ("CUDA : ARCHS = 900 | ... |
    CPU : SSE3 = 1 | ..."), or "GPU" where it names none."""
    sections = [part.split(" : ")[0].strip() for part in system_info.split("|") if " : " in part]
    return next((name for name in sections if name and name.upper() != "CPU"), "GPU")


def _remember_log(level: int, text: bytes, _user) -> None:
    """Keep llama.cpp's log off the terminal; remember the last lines for error messages."""
    line = (text or b"").decode("utf-8", "replace").strip()
    if line:
        _state["log"] = (_state["log"] + [line])[-20:]


def last_problem() -> str:
    """The most telling recent llama.cpp log line (an error if there was one)."""
    lines = _state.get("log", [])
    errors = [line for line in lines if "error" in line.lower() or "failed" in line.lower()]
    return shortened((errors or lines or ["no detail logged"])[-1], 200)


def load_model(path: Path, gpu_layers: int = 0, main_gpu: int | None = None,
               repack: bool | None = None):
    """A `llama_model` pointer for `path` with `gpu_layers` layers offloaded to the GPU (-1:
    all), every one of them on GPU `main_gpu` where given (a pair's device = "cuda:N":
    llama.cpp's split mode none; None: its default, GPU 0, layers split across every GPU);
    weights repacked for llama.cpp's kernels where `repack` (None: where this CPU allows it,
    repack.py); a one-line `ModelNotFound` if llama.cpp refuses it."""
    lib = bindings()
    if not path.is_file():
        raise ModelNotFound(f"GGUF file {path} does not exist: check the path in models.toml")
    params = lib.llama_model_default_params()
    params.n_gpu_layers = gpu_layers
    params.use_extra_bufts = repack_allowed() if repack is None else repack
    if main_gpu is not None and gpu_layers != 0:  # the whole model on that one GPU
        params.split_mode = lib.LLAMA_SPLIT_MODE_NONE
        params.main_gpu = main_gpu
    model = lib.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise ModelNotFound(f"llama.cpp cannot load {path} ({last_problem()}): "
                            "use a GGUF model file of an architecture llama.cpp supports")
    return model


class LlamaCppModel:
    """A GGUF model decoded by llama.cpp, behind the engine's small model protocol."""

    def __init__(self, path: Path | str, threads: int | None = None,
                 max_context: int = MAX_CONTEXT, batch: int = BATCH, gpu_layers: int = 0,
                 main_gpu: int | None = None, prefill_threads: int | None = None):
        lib = self._lib = bindings()
        self.path = Path(path)
        self.gpu_layers = gpu_layers
        """Layers offloaded to the GPU (-1: all, 0: none); logits are read on the CPU."""
        self.main_gpu = main_gpu
        """The one GPU holding them (a pair's device = "cuda:N"), None: llama.cpp's default."""
        self.repacked = repack_allowed()
        """Whether llama.cpp repacked the weights for its kernels (models/llamacpp/repack.py)."""
        self._model = load_model(self.path, gpu_layers, main_gpu, self.repacked)
        self._vocab = lib.llama_model_get_vocab(self._model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self._vocab))
        self.vocab_size = self.n_vocab
        """Logit columns handed to the engine (the pair's shared vocabulary; settable)."""
        self.device = torch.device("cpu")
        self.threads, self.threads_note = capped_threads(threads)
        """llama.cpp's threads; the note says where the pair's `threads` was capped."""
        self.prefill_threads = capped_threads(prefill_threads)[0] if prefill_threads else self.threads
        """Threads of a prompt's prefill (`PREFILL_TOKENS`): the chat decodes on one core fewer
        than it has, leaving the screen one, but nothing streams while a prompt is read."""
        self._batch_threads = self.threads
        self.batch = batch
        trained = int(lib.llama_model_n_ctx_train(self._model))
        self.context_length = min(trained, max_context) if trained > 0 else max_context
        self._ctx = self._new_context()
        self._memory = lib.llama_get_memory(self._ctx)
        self._batch = lib.llama_batch_init(self.batch, 0, 1)
        self._view: tuple[int | None, np.ndarray] | None = None
        """(address, view) of llama.cpp's logits buffer as last seen."""
        self.held = HeldTokens()
        """The ids the cache holds, recorded as they are fed (engine/protocol.py's `HeldTokens`)."""
        self.decode_s = 0.0
        """Seconds spent inside `llama_decode` (and, with layers offloaded, waiting for the
        device to finish it) since loading: what a benchmark subtracts from
        an answer's time to report the time spent outside llama.cpp."""
        self._views()

    def _new_context(self):
        lib = self._lib
        params = lib.llama_context_default_params()
        params.n_ctx = self.context_length
        params.n_batch = params.n_ubatch = self.batch
        params.n_seq_max = 1
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        ctx = lib.llama_init_from_model(self._model, params)
        if not ctx:
            lib.llama_model_free(self._model)
            raise ModelNotFound(f"llama.cpp cannot open a context of {self.context_length} tokens "
                                f"for {self.path} ({last_problem()}): free some memory")
        return ctx

    def _views(self) -> None:
        """numpy views of the batch's arrays, filled in place on every forward."""
        batch = self._batch
        self._tokens = np.ctypeslib.as_array(batch.token, shape=(self.batch,))
        self._positions = np.ctypeslib.as_array(batch.pos, shape=(self.batch,))
        self._wants = np.ctypeslib.as_array(batch.logits, shape=(self.batch,))
        np.ctypeslib.as_array(batch.n_seq_id, shape=(self.batch,))[:] = 1
        for i in range(self.batch):
            batch.seq_id[i][0] = 0

    @property
    def description(self) -> str:
        """The model as its GGUF file names it, e.g. "qwen2 1.5B Q4_K_M" or "llama 135M Q4_1":
        architecture, size label and quantization type from the file's own metadata."""
        return f"{self.metadata('general.architecture') or '?'} {self.size_label} {self.weights}"

    def metadata(self, key: str) -> str | None:
        """A GGUF metadata value as text (llama.cpp's reading of the file), None if absent."""
        text = ctypes.create_string_buffer(256)
        if self._lib.llama_model_meta_val_str(self._model, key.encode(), text, len(text)) < 0:
            return None
        return text.value.decode("utf-8", "replace")

    @property
    def size_label(self) -> str:
        """The file's `general.size_label` ("1.5B"), else its parameter count ("494M")."""
        return size_label(self.metadata("general.size_label"),
                          int(self._lib.llama_model_n_params(self._model)))

    @property
    def weights(self) -> str:
        """The file's quantization type as GGUF names it ("Q4_K_M", "Q4_1", "F32"), from its
        `general.file_type`; llama.cpp's own wording where the file names none."""
        name = file_type_name(self.metadata("general.file_type"))
        if name is not None:
            return name
        text = ctypes.create_string_buffer(128)
        self._lib.llama_model_desc(self._model, text, len(text))
        return text.value.decode("utf-8", "replace").split(" ", 2)[-1]

    @property
    def layers(self) -> int:
        return int(self._lib.llama_model_n_layer(self._model))

    @property
    def offloaded(self) -> int:
        """Layers on the GPU (llama.cpp caps a larger request at the model's layer count)."""
        return self.layers if self.gpu_layers < 0 else min(self.gpu_layers, self.layers)

    @property
    def parameter_bytes(self) -> int:
        return int(self._lib.llama_model_size(self._model))

    @property
    def eos_ids(self) -> set[int]:
        """Tokens llama.cpp's vocabulary marks as ending generation (EOS, EOT)."""
        ids = {int(self._lib.llama_vocab_eos(self._vocab)), int(self._lib.llama_vocab_eot(self._vocab))}
        return {i for i in ids if i >= 0}

    @property
    def cache_length(self) -> int:
        """Read from llama.cpp's KV memory, so the engine's invariant check is real."""
        return int(self._lib.llama_memory_seq_pos_max(self._memory, 0)) + 1

    def reset(self) -> None:
        self._lib.llama_memory_clear(self._memory, True)
        self.held.clear()

    def crop(self, length: int) -> None:
        """Remove every KV cell at position `length` or later."""
        if not self._lib.llama_memory_seq_rm(self._memory, 0, max(0, length), -1):
            raise RuntimeError(f"llama.cpp could not roll its cache back to {length} tokens")
        self.held.crop(length)

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        tokens = ids.reshape(-1).cpu().numpy()
        n, start = int(tokens.shape[0]), self.cache_length
        if start + n > self.context_length:
            raise ValueError(f"llama.cpp context of {self.context_length} tokens is full "
                             f"({start} + {n})")
        self._use_batch_threads(self.prefill_threads if keep == 1 and n > PREFILL_TOKENS
                                else self.threads)
        rows = []
        for begin in range(0, n, self.batch):
            chunk = tokens[begin:begin + self.batch]
            wanted = max(0, min(len(chunk), begin + len(chunk) - (n - keep)))
            self._decode(chunk, start + begin, wanted)
            if wanted:
                rows.append(self._logits(wanted))
        self.held.fed(start, ids)
        return rows[0] if len(rows) == 1 else torch.cat(rows)

    def _use_batch_threads(self, threads: int) -> None:
        """llama.cpp's threads for batches of more than one token (a verify, a prefill)."""
        if threads != self._batch_threads:
            self._lib.llama_set_n_threads(self._ctx, self.threads, threads)
            self._batch_threads = threads

    def _decode(self, chunk: np.ndarray, position: int, wanted: int) -> None:
        m = len(chunk)
        self._tokens[:m] = chunk
        self._positions[:m] = np.arange(position, position + m)
        self._wants[:m] = 0
        self._wants[m - wanted:m] = 1
        self._batch.n_tokens = m
        started = time.perf_counter()
        status = self._lib.llama_decode(self._ctx, self._batch)
        self._lib.llama_synchronize(self._ctx)  # offloaded layers: decode returns before the GPU ends
        self.decode_s += time.perf_counter() - started
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status} ({last_problem()})")

    def _logits(self, rows: int) -> torch.Tensor:
        """The last decode's `rows` output rows: a view of llama.cpp's buffer, copied once."""
        return torch.from_numpy(self._logits_view(rows)[:, :self.vocab_size].copy())

    def _logits_view(self, rows: int) -> np.ndarray:
        """A numpy view of llama.cpp's logits buffer, rebuilt only when the buffer moved or
        grew (building one costs more than the copy it serves, on every plain step)."""
        pointer = self._lib.llama_get_logits(self._ctx)
        address = ctypes.cast(pointer, ctypes.c_void_p).value
        view = self._view
        if view is None or view[0] != address or view[1].shape[0] < rows:
            self._view = view = (address, np.ctypeslib.as_array(pointer, shape=(rows, self.n_vocab)))
        return view[1][:rows]

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        """llama.cpp's own tokenization of `text` (to check a tokenizer agrees with it)."""
        data = text.encode("utf-8")
        out = (self._lib.llama_token * (len(data) + 8))()
        n = self._lib.llama_tokenize(self._vocab, data, len(data), out, len(out), False, special)
        return list(out[:n])

    def close(self) -> None:
        lib, self._lib = getattr(self, "_lib", None), None
        if lib is None:
            return
        lib.llama_batch_free(self._batch)
        lib.llama_free(self._ctx)
        lib.llama_model_free(self._model)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the library may be gone
            pass
