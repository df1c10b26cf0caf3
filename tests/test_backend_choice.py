"""The backend of each model is chosen in one place (models/adapters.py), with a reason:
`auto` picks llama.cpp only for a GGUF target on the CPU with llama-cpp-python usable,
and an impossible explicit choice is a one-line error. Needs no llama_cpp: whether it
is usable is replaced by a stub."""

from __future__ import annotations

import dataclasses

import pytest

from specchat.errors import ConfigError, PairError
from specchat.models import adapters
from specchat.models.llamacpp import model as llamacpp
from specchat.models.config.pairs import PairConfig, parse_pair

GGUF = "/models/target.gguf"


def pair(**keys) -> PairConfig:
    return dataclasses.replace(PairConfig(name="p", target=GGUF), **keys)


@pytest.fixture
def llama_usable(monkeypatch):
    monkeypatch.setattr(llamacpp, "missing", lambda: None)


@pytest.fixture
def llama_missing(monkeypatch):
    monkeypatch.setattr(llamacpp, "missing",
                        lambda: "llama-cpp-python is not usable (No module named 'llama_cpp')")


def test_auto_runs_a_gguf_target_on_llamacpp_on_the_cpu(llama_usable):
    chosen = adapters.choose_backends(pair(), "cpu")
    assert (chosen.target, chosen.draft) == ("llama.cpp", None)
    assert chosen.why.startswith("auto:")


def test_auto_treats_a_builtin_gguf_model_as_gguf_but_not_a_shipped_draft(llama_usable):
    chosen = adapters.choose_backends(
        pair(target="builtin:smollm2-135m-instruct", draft="builtin:smollm2-135m-draft"), "cpu")
    assert (chosen.target, chosen.draft) == ("llama.cpp", "torch")
    assert "draft" in chosen.why


def test_auto_falls_back_to_torch_without_llamacpp_and_says_how_to_install_it(llama_missing):
    chosen = adapters.choose_backends(pair(), "cpu")
    assert chosen.target == "torch"
    assert "not usable" in chosen.why and "specchat[llama]" in chosen.why


def test_auto_keeps_a_cuda_device_on_torch(llama_usable):
    chosen = adapters.choose_backends(pair(), "cuda")
    assert chosen.target == "torch" and "CUDA" in chosen.why


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


def test_explicit_llamacpp_on_a_configured_cuda_device_is_refused(llama_usable):
    with pytest.raises(PairError, match="runs on the CPU"):
        adapters.choose_backends(pair(backend="llama.cpp", device="cuda"), "cuda")


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
