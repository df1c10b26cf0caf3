"""The backend of each model is chosen in one place (models/adapters.py), with a reason:
`auto` picks llama.cpp for a GGUF target with llama-cpp-python usable (on a CUDA device
only where the build offloads to it), llama.cpp's layers go to the GPU where the build
supports it unless `gpu_layers` says otherwise, and an impossible explicit choice is a
one-line error. Needs no llama_cpp: the bindings are replaced by fakes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from specchat.errors import ConfigError, PairError
from specchat.models import adapters
from specchat.models.llamacpp import model as llamacpp
from specchat.models.config.pairs import PairConfig, parse_pair

GGUF = "/models/target.gguf"


def pair(**keys) -> PairConfig:
    return dataclasses.replace(PairConfig(name="p", target=GGUF), **keys)


class FakeBindings:
    """What the backend asks llama-cpp-python about GPU offload, and the params it fills."""

    def __init__(self, system_info: str | None):
        self.system_info = system_info
        self.loaded_with: list[int] = []

    def llama_supports_gpu_offload(self) -> bool:
        return self.system_info is not None

    def llama_print_system_info(self) -> bytes:
        return (self.system_info or "CPU : SSE3 = 1 | AVX2 = 1 | ").encode()

    LLAMA_SPLIT_MODE_NONE, LLAMA_SPLIT_MODE_LAYER = 0, 1  # llama-cpp-python 0.3.36's values

    def llama_model_default_params(self):
        return type("Params", (), {"n_gpu_layers": 999, "split_mode": 1, "main_gpu": 0})()

    def llama_model_load_from_file(self, path, params):
        self.loaded_with.append(params.n_gpu_layers)
        self.placed_with = (params.split_mode, params.main_gpu)
        return object()


CUDA_INFO = "CUDA : ARCHS = 900 | USE_GRAPHS = 1 | CPU : SSE3 = 1 | AVX2 = 1 | "
METAL_INFO = "Metal : EMBED_LIBRARY = 1 | CPU : NEON = 1 | ARM_FMA = 1 | "


def fake_build(monkeypatch, system_info: str | None) -> FakeBindings:
    fake = FakeBindings(system_info)
    monkeypatch.setattr(llamacpp, "missing", lambda: None)
    monkeypatch.setattr(llamacpp, "bindings", lambda: fake)
    return fake


@pytest.fixture
def llama_usable(monkeypatch):
    """A CPU-only build (as this machine's)."""
    return fake_build(monkeypatch, None)


@pytest.fixture
def llama_cuda(monkeypatch):
    return fake_build(monkeypatch, CUDA_INFO)


@pytest.fixture
def llama_missing(monkeypatch):
    monkeypatch.setattr(llamacpp, "missing",
                        lambda: "llama-cpp-python is not usable (No module named 'llama_cpp')")


def test_auto_runs_a_gguf_target_on_llamacpp_on_the_cpu(llama_usable):
    chosen = adapters.choose_backends(pair(), "cpu")
    assert (chosen.target, chosen.draft) == ("llama.cpp", None)
    assert chosen.why.startswith("auto:")


def test_auto_treats_a_builtin_gguf_model_as_gguf_but_not_a_shipped_draft(llama_usable, no_int8):
    chosen = adapters.choose_backends(
        pair(target="builtin:smollm2-135m-instruct", draft="builtin:smollm2-135m-draft"), "cpu")
    assert (chosen.target, chosen.draft) == ("llama.cpp", "torch")
    assert "draft" in chosen.why


AVX512_VNNI = {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}
AVX2_ONLY = {"avx", "avx2", "fma"}
AMX = AVX512_VNNI | {"amx_tile", "amx_int8", "amx_bf16"}


def fake_cpu(monkeypatch, flags: set[str], engines=("x86", "fbgemm", "onednn", "qnnpack"),
             q4k_builds: bool = True):
    """A machine with these CPU flags and quantized engines, whose oneDNN (where listed)
    passes the int8 backend's check, and whose Q4_K kernel builds and checks out where the
    flags allow it (`q4k_builds`)."""
    from specchat.models import backend_int8
    from specchat.models.device import hardware
    from specchat.models.int8 import q4k

    monkeypatch.setattr(hardware, "cpu_flags", lambda: set(flags))
    monkeypatch.setattr(backend_int8, "quantized_engines", lambda: list(engines))
    monkeypatch.setattr(backend_int8, "onednn_multiplies", lambda: "onednn" in engines)
    monkeypatch.setattr(q4k, "why_not_here", lambda: None if q4k_builds else "no compiler")
    monkeypatch.setattr(q4k, "library_folder", lambda: Path("/nonexistent"))


@pytest.fixture
def no_int8(monkeypatch):
    fake_cpu(monkeypatch, AVX2_ONLY, engines=("qnnpack",))


SPECULATING = {"target": "builtin:qwen2.5-coder-1.5b-instruct",
               "draft": "builtin:qwen2.5-coder-0.5b-instruct", "k": "auto"}


@pytest.mark.parametrize("flags, bits", [(AVX512_VNNI, 8), (AVX2_ONLY, 7),
                                         (AVX2_ONLY | {"avx_vnni"}, 7)])
def test_auto_runs_a_speculating_gguf_pair_on_int8_where_fbgemm_runs(llama_usable, monkeypatch,
                                                                     flags, bits):
    from specchat.models.backend_int8 import int8_support

    fake_cpu(monkeypatch, flags)
    chosen = adapters.choose_backends(pair(**SPECULATING), "cpu")
    assert (chosen.target, chosen.draft) == ("int8", "int8")
    assert "verify" in chosen.why and chosen.why.startswith("auto:")
    assert int8_support().activation_bits == bits


@pytest.mark.parametrize("flags, engines, target_kernel, bits", [
    (AMX, ("x86", "fbgemm", "onednn"), "onednn", 8), (AMX, ("x86", "fbgemm"), "fbgemm", 8),
    (AVX512_VNNI, ("x86", "fbgemm", "onednn"), "q4k", 8),
    (AVX512_VNNI - {"avx512_vnni"} | {"avx_vnni"}, ("x86", "fbgemm", "onednn"), "q4k", 7),
    (AVX2_ONLY | {"avx_vnni"}, ("x86", "fbgemm", "onednn"), "q4k", 7),
    (AVX2_ONLY, ("x86", "fbgemm", "onednn"), "q4k", 7),
    (AVX2_ONLY - {"fma"}, ("x86", "fbgemm", "onednn"), "fbgemm", 7)])
def test_a_large_target_verifies_on_onednn_where_the_cpu_has_amx_and_on_q4k_where_avx2(
        monkeypatch, flags, engines, target_kernel, bits):
    """oneDNN's int8 matmul is flat to 16 rows on AMX (linear.py) and pays for a target of
    a billion parameters or more; on AVX2 with FMA (AVX-512 VNNI or not) without AMX the
    Q4_K kernel reads half the bytes (q4k.py); elsewhere fbgemm's. fbgemm's activations
    are 8-bit only with AVX-512 VNNI or AMX (AVX-VNNI alone runs its AVX2 kernels)."""
    from specchat.models.backend_int8 import int8_support

    fake_cpu(monkeypatch, flags, engines)
    support = int8_support()
    assert support.usable and support.kernel_for(1_500_000_000) == target_kernel
    assert support.kernel_for(500_000_000) == "fbgemm"  # a small model's step: fbgemm's
    assert support.activation_bits == bits


@pytest.mark.parametrize("flags, path", [
    (AVX512_VNNI, "AVX-512 VNNI"), (AVX512_VNNI | {"avx_vnni"}, "AVX-512 VNNI"),
    (AVX2_ONLY | {"avx_vnni"}, "AVX-VNNI"), (AVX2_ONLY, "AVX2")])
def test_the_label_names_the_q4k_kernels_code_path_the_cpu_compiles(monkeypatch, flags, path):
    """q4k_kernel.cpp's paths, as -march=native picks them: AVX-512 VNNI first, then
    AVX-VNNI's 8-lane dot products on AVX2 (Intel's cores since Alder Lake), then AVX2."""
    from specchat.models.backend_int8 import int8_support, kernel_name

    fake_cpu(monkeypatch, flags)
    label = kernel_name("q4k", int8_support().activation_bits)
    assert any(f"as the file has them on {path}{end}" in label for end in (",", " ("))
    assert f"({path})" in int8_support().why


def test_where_the_q4k_kernel_cannot_build_a_large_target_stays_on_fbgemm_and_says_why(monkeypatch):
    from specchat.models import backend_int8

    fake_cpu(monkeypatch, AVX512_VNNI, q4k_builds=False)
    support = backend_int8.int8_support()
    heard: list[str] = []
    assert support.usable and support.kernel_for(1_500_000_000, heard.append) == "fbgemm"
    assert any("Q4_K kernel cannot run here (no compiler)" in line for line in heard)


def test_where_onednn_fails_its_check_a_large_target_stays_on_fbgemm(monkeypatch):
    from specchat.models import backend_int8

    fake_cpu(monkeypatch, AMX)
    monkeypatch.setattr(backend_int8, "onednn_multiplies", lambda: False)
    support = backend_int8.int8_support()
    assert support.usable and support.kernel_for(1_500_000_000) == "fbgemm"


def test_auto_runs_a_shipped_distill_draft_on_int8_beside_an_int8_target(llama_usable, monkeypatch):
    fake_cpu(monkeypatch, AVX512_VNNI)
    chosen = adapters.choose_backends(
        pair(target="builtin:smollm2-135m-instruct", draft="builtin:smollm2-135m-draft"), "cpu")
    assert (chosen.target, chosen.draft) == ("int8", "int8")


@pytest.mark.parametrize("flags, engines, why", [
    (AVX512_VNNI, ("qnnpack",), "no fbgemm"), ({"sse4_2"}, ("x86", "fbgemm"), "no AVX2")])
def test_without_int8_kernels_auto_keeps_llamacpp_and_an_explicit_int8_names_why(
        llama_usable, monkeypatch, flags, engines, why):
    fake_cpu(monkeypatch, flags, engines)
    assert adapters.choose_backends(pair(**SPECULATING), "cpu").target == "llama.cpp"
    with pytest.raises(PairError, match=f"backend = \"int8\" cannot run here: .*{why}"):
        adapters.choose_backends(pair(**SPECULATING, backend="int8"), "cpu")


@pytest.mark.parametrize("keys", [{"k": 0}, {"draft": None}])
def test_a_pair_that_never_drafts_stays_on_llamacpp_which_reads_fewer_bytes(llama_usable, monkeypatch,
                                                                            keys):
    fake_cpu(monkeypatch, AVX512_VNNI)
    chosen = adapters.choose_backends(pair(**(SPECULATING | keys)), "cpu")
    assert chosen.target == "llama.cpp"


def test_a_head_pair_asked_for_k_0_keeps_its_target_on_int8_instead_of_an_error(llama_usable,
                                                                              monkeypatch):
    """`specchat run -k 0` on the default pair (a head) is its own target-only decoding."""
    fake_cpu(monkeypatch, AVX512_VNNI)
    head = pair(target="builtin:qwen2.5-coder-1.5b-instruct",
                draft="builtin:qwen2.5-coder-1.5b-head", k=0)
    chosen = adapters.choose_backends(head, "cpu")
    assert (chosen.target, chosen.draft) == ("int8", "int8") and "head" in chosen.why


def test_an_architecture_int8_cannot_run_stays_on_llamacpp(llama_usable, monkeypatch, tmp_path):
    from tiny import build_tokenizer
    from tiny_gguf import save_tiny_gguf, write_gguf

    fake_cpu(monkeypatch, AVX512_VNNI)
    _, model = save_tiny_gguf(tmp_path, build_tokenizer(), name="t.gguf")
    alien = write_gguf(model, build_tokenizer(), tmp_path / "alien.gguf", architecture="gemma")
    chosen = adapters.choose_backends(pair(target=str(alien), draft="ngram", k=3), "cpu")
    assert chosen.target == "llama.cpp"
    with pytest.raises(PairError, match="architecture 'gemma'"):
        adapters.choose_backends(pair(target=str(alien), draft="ngram", k=3, backend="int8"), "cpu")


def test_auto_falls_back_to_torch_without_llamacpp_and_says_how_to_install_it(llama_missing):
    chosen = adapters.choose_backends(pair(), "cpu")
    assert chosen.target == "torch"
    assert "not usable" in chosen.why and "specchat[llama]" in chosen.why


def test_auto_keeps_a_cuda_device_on_torch_when_the_build_cannot_offload(llama_usable):
    chosen = adapters.choose_backends(pair(), "cuda")
    assert chosen.target == "torch" and "CUDA" in chosen.why and "-DGGML_CUDA=on" in chosen.why


def test_auto_runs_a_gguf_target_on_llamacpp_on_cuda_when_the_build_offloads(llama_cuda):
    chosen = adapters.choose_backends(pair(draft="/models/draft.gguf"), "cuda")
    assert (chosen.target, chosen.draft) == ("llama.cpp", "llama.cpp")
    assert (chosen.gpu_layers, chosen.gpu) == (-1, "CUDA")
    assert "every layer on CUDA" in chosen.why


def test_gpu_layers_zero_or_a_cpu_device_keep_llamacpp_on_the_cpu(llama_cuda):
    for keys in ({"gpu_layers": 0}, {"device": "cpu"}):
        chosen = adapters.choose_backends(pair(**keys), "cpu")
        assert (chosen.target, chosen.gpu_layers, chosen.gpu) == ("llama.cpp", 0, None)
        assert "keeps it on the CPU" in chosen.why
    some = adapters.choose_backends(pair(gpu_layers=8), "cuda")
    assert (some.gpu_layers, some.gpu) == (8, "CUDA") and "8 layers on CUDA" in some.why


def test_a_metal_build_offloads_on_a_mac_whose_device_is_the_cpu(monkeypatch):
    fake_build(monkeypatch, METAL_INFO)
    chosen = adapters.choose_backends(pair(), "cpu")
    assert (chosen.target, chosen.gpu_layers, chosen.gpu) == ("llama.cpp", -1, "Metal")


def test_a_cpu_only_build_runs_on_the_cpu_and_says_why(llama_usable):
    chosen = adapters.choose_backends(pair(), "cpu")
    assert (chosen.gpu_layers, chosen.gpu) == (0, None) and "no GPU offload" in chosen.why


def test_asking_a_cpu_only_build_for_gpu_layers_is_a_one_line_error(llama_usable):
    with pytest.raises(PairError) as error:
        adapters.choose_backends(pair(gpu_layers=8), "cpu")
    message = str(error.value)
    assert "gpu_layers = 8" in message and "-DGGML_CUDA=on" in message and "\n" not in message


def test_the_offload_reaches_llamacpps_model_params(llama_cuda, tmp_path):
    model_file = tmp_path / "m.gguf"
    model_file.write_bytes(b"GGUF")
    llamacpp.load_model(model_file, -1)
    llamacpp.load_model(model_file)
    assert llama_cuda.loaded_with == [-1, 0]


def test_a_cuda_device_index_puts_the_whole_model_on_that_gpu(llama_cuda, tmp_path):
    """device = "cuda:1" reaches llama.cpp as main_gpu = 1 with split mode none (its
    default, layer, splits the layers across every GPU and ignores main_gpu)."""
    model_file = tmp_path / "m.gguf"
    model_file.write_bytes(b"GGUF")
    chosen = adapters.choose_backends(pair(device="cuda:1"), "cuda:1")
    assert chosen.gpu_layers == -1 and "every layer on CUDA device 1" in chosen.why
    assert 'device = "cuda:1"' in chosen.why
    llamacpp.load_model(model_file, chosen.gpu_layers, chosen.main_gpu)
    assert llama_cuda.loaded_with == [-1]
    assert llama_cuda.placed_with == (llama_cuda.LLAMA_SPLIT_MODE_NONE, 1)
    some = adapters.choose_backends(pair(device="cuda:0", gpu_layers=8), "cuda:0")
    llamacpp.load_model(model_file, some.gpu_layers, some.main_gpu)
    assert llama_cuda.placed_with == (llama_cuda.LLAMA_SPLIT_MODE_NONE, 0) and some.gpu_layers == 8
    plain = adapters.choose_backends(pair(device="cuda"), "cuda")  # no index: llama.cpp's default
    llamacpp.load_model(model_file, plain.gpu_layers, plain.main_gpu)
    assert llama_cuda.placed_with == (llama_cuda.LLAMA_SPLIT_MODE_LAYER, 0)
    assert "device" not in plain.why


def test_llamacpps_own_programs_get_the_same_gpu():
    from pathlib import Path

    from specchat.bench.llama_programs import Setup

    one = Setup(Path("/m.gguf"), 2, 4096, gpu_layers=-1, main_gpu=1).common()
    assert one[-4:] == ["-sm", "none", "-mg", "1"] and "-ngl" in one
    assert "-mg" not in Setup(Path("/m.gguf"), 2, 4096, gpu_layers=-1).common()
    assert "-mg" not in Setup(Path("/m.gguf"), 2, 4096, gpu_layers=0, main_gpu=1).common()
    from types import SimpleNamespace

    from specchat.bench.llamacpp_arms import program_setup

    loaded = SimpleNamespace(path="/m.gguf", threads=2, context_length=4096, gpu_layers=-1,
                             main_gpu=1)  # a LlamaCppModel's fields, as the loader set them
    assert program_setup(SimpleNamespace(target=loaded)).common()[-4:] == ["-sm", "none", "-mg", "1"]


def test_the_gpu_backend_is_named_from_llamacpps_system_info():
    assert llamacpp.gpu_backend_name(CUDA_INFO) == "CUDA"
    assert llamacpp.gpu_backend_name(METAL_INFO) == "Metal"
    assert llamacpp.gpu_backend_name("CPU : AVX2 = 1 | ") == "GPU"


def test_gpu_layers_must_be_all_or_a_count(tmp_path):
    for bad in (-1, "some"):
        with pytest.raises(ConfigError) as error:
            parse_pair("p", {"target": GGUF, "gpu_layers": bad}, tmp_path / "models.toml")
        assert "'gpu_layers'" in str(error.value)
    assert parse_pair("p", {"target": GGUF, "gpu_layers": 12}, tmp_path / "m.toml").gpu_layers == 12


def test_auto_keeps_a_folder_target_on_torch(llama_usable):
    assert adapters.choose_backends(pair(target="/models/folder"), "cpu").target == "torch"


def test_a_gguf_draft_follows_a_llamacpp_target_and_any_draft_follows_a_torch_one(llama_usable):
    both = adapters.choose_backends(pair(draft="/models/draft.gguf"), "cpu")
    assert (both.target, both.draft) == ("llama.cpp", "llama.cpp")
    forced = adapters.choose_backends(pair(draft="/models/draft.gguf", backend="torch"), "cpu")
    assert (forced.target, forced.draft) == ("torch", "torch")
    assert adapters.choose_backends(pair(draft="ngram"), "cpu").draft is None


def test_explicit_llamacpp_on_a_folder_target_is_a_one_line_error(llama_usable):
    with pytest.raises(PairError, match="needs a GGUF target"):
        adapters.choose_backends(pair(target="/models/folder", backend="llama.cpp"), "cpu")


def test_explicit_llamacpp_without_the_package_says_how_to_install_it(llama_missing):
    with pytest.raises(PairError, match=r"specchat\[llama\]"):
        adapters.choose_backends(pair(backend="llama.cpp"), "cpu")


def test_explicit_llamacpp_on_cuda_with_a_cpu_only_build_is_refused(llama_usable):
    with pytest.raises(PairError, match="cannot offload to a CUDA device"):
        adapters.choose_backends(pair(backend="llama.cpp", device="cuda"), "cuda")


def test_explicit_llamacpp_on_cuda_with_a_cuda_build_offloads(llama_cuda):
    chosen = adapters.choose_backends(pair(backend="llama.cpp", device="cuda"), "cuda")
    assert (chosen.target, chosen.gpu) == ("llama.cpp", "CUDA")


def test_an_unknown_backend_key_names_the_key_and_the_allowed_values(tmp_path):
    with pytest.raises(ConfigError) as error:
        parse_pair("p", {"target": GGUF, "backend": "vllm"}, tmp_path / "models.toml")
    message = str(error.value)
    assert "'backend'" in message and "auto, torch, llama.cpp" in message and "\n" not in message


def test_negative_threads_are_a_one_line_error_naming_the_key(tmp_path):
    with pytest.raises(ConfigError) as error:
        parse_pair("p", {"target": GGUF, "threads": -1}, tmp_path / "models.toml")
    assert "'threads'" in str(error.value) and "[pairs.p]" in str(error.value)
    assert parse_pair("p", {"target": GGUF, "threads": 1}, tmp_path / "models.toml").threads == 1


def test_the_torch_forward_is_chosen_by_the_pair_keys_not_the_environment(tmp_path, monkeypatch):
    from specchat.models.torch_backend.adapter import TorchForward, lean_wanted, static_wanted

    monkeypatch.setenv("SPECCHAT_FAST_PATH", "1")
    monkeypatch.setenv("SPECCHAT_LEAN", "0")
    assert static_wanted("cuda", TorchForward()) and not static_wanted("cpu", TorchForward())
    assert lean_wanted(TorchForward())
    assert static_wanted("cpu", TorchForward("static"))
    assert not static_wanted("cuda", TorchForward("lean")) and not lean_wanted(TorchForward("eager"))
    pair = parse_pair("p", {"target": GGUF, "torch_forward": "eager", "cuda_graphs": "none"},
                      tmp_path / "models.toml")
    assert (pair.torch_forward, pair.cuda_graphs) == ("eager", "none")
    with pytest.raises(ConfigError) as error:
        parse_pair("p", {"target": GGUF, "torch_forward": "fast"}, tmp_path / "models.toml")
    assert "'torch_forward'" in str(error.value) and "lean" in str(error.value)
