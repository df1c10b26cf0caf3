"""The model references users already have: `hf:OWNER/REPO/FILE.gguf` and `hf:OWNER/REPO` read
from a fake Hugging Face cache (huggingface_hub's layout), `ollama:NAME[:TAG]` from a fake
manifest tree; unknown names and offline misses are one-line errors, and an unreachable hub
never hangs. No network: HF_HUB_OFFLINE is set for every test (conftest)."""

from __future__ import annotations

import fnmatch
import json
import time
from pathlib import Path

import pytest

from specchat.errors import ModelNotFound
from specchat.models.config import hub
from specchat.models.config.refs import availability, gguf_path, parse_ref

REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def cache_files(cache: Path, repo: str, files: dict[str, bytes]) -> Path:
    """`files` in `repo`'s snapshot, as huggingface_hub leaves a download: refs/main names the
    revision, snapshots/REV/ holds the files."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(REVISION)
    snapshot = folder / "snapshots" / REVISION
    for name, data in files.items():
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_bytes(data)
    return snapshot


def test_an_hf_gguf_file_in_the_cache_is_read_offline(hub_cache):
    snapshot = cache_files(hub_cache, "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
                           {"qwen2.5-coder-1.5b-instruct-q4_k_m.gguf": b"GGUF...",
                            "sub/other-q8_0.gguf": b"GGUF..."})
    ref = parse_ref("hf:Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    assert ref.kind == "hf-file" and str(ref).startswith("hf:Qwen/")
    assert gguf_path(ref) == snapshot / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert availability(ref) == (True, str(snapshot / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"))
    nested = parse_ref("hf:Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/sub/other-q8_0.gguf")
    assert gguf_path(nested) == snapshot / "sub" / "other-q8_0.gguf"


def test_an_hf_file_missing_offline_is_a_one_line_error_at_once(hub_cache):
    ref = parse_ref("hf:Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/absent-q4_k_m.gguf")
    started = time.perf_counter()
    with pytest.raises(ModelNotFound) as error:
        gguf_path(ref)
    assert time.perf_counter() - started < 1.0
    message = str(error.value)
    assert "not in the local Hugging Face cache" in message and "unreachable" in message
    assert "\n" not in message
    ok, where = availability(ref)
    assert not ok and "not in the local Hugging Face cache" in where


def test_an_unanswering_name_server_cannot_hold_the_reachability_check(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub, "_connects", lambda timeout: time.sleep(30) or True)
    started = time.perf_counter()
    assert hub.hub_reachable(timeout=0.2) is False
    assert time.perf_counter() - started < 1.0


def test_a_reachable_hub_downloads_only_the_named_file(hub_cache, monkeypatch):
    calls = []

    def download(repo, filename, cache_dir):
        calls.append((repo, filename))
        return str(cache_files(Path(cache_dir), repo, {filename: b"GGUF"}) / filename)

    import huggingface_hub

    monkeypatch.setattr(hub, "hub_reachable", lambda: True)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    path = gguf_path(parse_ref("hf:owner/repo/model-q4_k_m.gguf"))
    assert calls == [("owner/repo", "model-q4_k_m.gguf")] and path.read_bytes() == b"GGUF"
    assert gguf_path(parse_ref("hf:owner/repo/model-q4_k_m.gguf")) == path  # now from the cache
    assert len(calls) == 1


def test_an_hf_folder_is_the_cached_model_files(hub_cache):
    snapshot = cache_files(hub_cache, "owner/model", {"config.json": b"{}", "tokenizer.json": b"{}",
                                                      "model.safetensors": b"..."})
    ref = parse_ref("hf:owner/model")
    assert ref.kind == "hf" and str(ref) == "hf:owner/model"
    assert availability(ref) == (True, str(snapshot))
    from specchat.models.weights import model_folder

    assert model_folder(ref) == snapshot


def test_an_hf_folder_without_safetensors_weights_is_not_available(hub_cache):
    cache_files(hub_cache, "owner/old", {"config.json": b"{}", "pytorch_model.bin": b"..."})
    ok, where = availability(parse_ref("hf:owner/old"))
    assert not ok and "not in the local Hugging Face cache" in where


def test_an_hf_folder_fetches_only_the_files_a_model_needs():
    wanted = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "model.safetensors", "model-00001-of-00002.safetensors",
              "model.safetensors.index.json", "merges.txt", "vocab.json"]
    unwanted = ["pytorch_model.bin", "model-q4_k_m.gguf", "onnx/model.onnx", "README.md",
                "original/consolidated.00.pth", "flax_model.msgpack"]

    def fetched(name: str) -> bool:
        return any(fnmatch.fnmatch(name, pattern) for pattern in hub.MODEL_FILES)

    assert all(fetched(name) for name in wanted)
    assert not any(fetched(name) for name in unwanted)


@pytest.mark.parametrize("text", ["hf:owner", "hf:owner/repo/weights.bin", "hf:/repo", "hf:owner//x.gguf"])
def test_a_malformed_hf_reference_is_a_one_line_error(text):
    with pytest.raises(ModelNotFound, match=r"hf:OWNER/REPO/FILE\.gguf"):
        parse_ref(text)


@pytest.fixture
def ollama_models(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "ollama-models"
    monkeypatch.setenv("OLLAMA_MODELS", str(folder))
    return folder


def pull(models: Path, host: str, namespace: str, model: str, tag: str, blob: bytes | None,
         layers: list[dict] | None = None) -> Path:
    """A manifest (and its model blob) as `ollama pull` leaves them."""
    digest = "sha256:" + "ab" * 32
    layers = layers if layers is not None else [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "cd" * 32},
        {"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": 4}]
    manifest = models / "manifests" / host / namespace / model / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    path = models / "blobs" / digest.replace(":", "-")
    if blob is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)
    return path


def test_an_ollama_model_resolves_to_the_blob_of_its_model_layer(ollama_models):
    blob = pull(ollama_models, "registry.ollama.ai", "library", "qwen2.5-coder", "1.5b", b"GGUF")
    ref = parse_ref("ollama:qwen2.5-coder:1.5b")
    assert ref.kind == "ollama" and str(ref) == "ollama:qwen2.5-coder:1.5b"
    assert gguf_path(ref) == blob
    assert availability(ref) == (True, str(blob))


def test_an_ollama_name_without_a_tag_is_latest_and_a_namespace_is_kept(ollama_models):
    latest = pull(ollama_models, "registry.ollama.ai", "library", "smollm2", "latest", b"GGUF")
    assert gguf_path(parse_ref("ollama:smollm2")) == latest
    user = pull(ollama_models, "registry.ollama.ai", "someone", "coder", "q4", b"GGUF")
    assert gguf_path(parse_ref("ollama:someone/coder:q4")) == user
    hosted = pull(ollama_models, "hf.co", "Qwen", "Qwen2.5-GGUF", "Q4_K_M", b"GGUF")
    assert gguf_path(parse_ref("ollama:hf.co/Qwen/Qwen2.5-GGUF:Q4_K_M")) == hosted


def test_an_ollama_model_not_pulled_names_the_pull_command(ollama_models):
    with pytest.raises(ModelNotFound) as error:
        gguf_path(parse_ref("ollama:qwen2.5-coder:7b"))
    assert "ollama pull qwen2.5-coder:7b" in str(error.value) and "\n" not in str(error.value)
    assert availability(parse_ref("ollama:qwen2.5-coder:7b"))[0] is False


def test_an_ollama_manifest_without_a_model_layer_or_blob_is_an_error(ollama_models):
    pull(ollama_models, "registry.ollama.ai", "library", "adapter", "latest", None,
         layers=[{"mediaType": "application/vnd.ollama.image.adapter", "digest": "sha256:" + "ef" * 32}])
    with pytest.raises(ModelNotFound, match="names no model layer"):
        gguf_path(parse_ref("ollama:adapter"))
    pull(ollama_models, "registry.ollama.ai", "library", "gone", "latest", None)
    with pytest.raises(ModelNotFound, match="blob .* is missing"):
        gguf_path(parse_ref("ollama:gone"))


@pytest.mark.parametrize("text", ["ollama:", "ollama:a/b/c/d", "ollama:model:"])
def test_a_malformed_ollama_name_is_a_one_line_error(text):
    with pytest.raises(ModelNotFound, match="not an ollama model name"):
        parse_ref(text)


def test_a_pair_of_an_ollama_target_and_an_hf_draft_loads_and_decodes(tmp_path, hub_cache,
                                                                       ollama_models):
    """The references go all the way: both models load on llama.cpp and decode greedily."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test installs it)")
    from gguf_tiny import write_tiny_gguf

    from specchat.engine import Finished, Settings
    from specchat.chat.decoding import decoder_for
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    tiny = write_tiny_gguf(tmp_path / "tiny").read_bytes()
    pull(ollama_models, "registry.ollama.ai", "library", "tiny", "latest", tiny)
    cache_files(hub_cache, "owner/tiny-GGUF", {"tiny-f32.gguf": tiny})
    config = tmp_path / "models.toml"
    config.write_text('[pairs.mine]\ntarget = "ollama:tiny"\ndraft = "hf:owner/tiny-GGUF/tiny-f32.gguf"\n'
                      'k = 2\nthreads = 1\n')
    pair = load_pair(load_catalog(config).get("mine"))
    assert pair.backends["target"].startswith("llama.cpp") and pair.backends["draft"].startswith("llama.cpp")
    events = list(decoder_for(pair).generate([5, 6, 7], Settings(2), 6))
    assert isinstance(events[-1], Finished) and events[-1].new_tokens == 6


def test_a_malformed_reference_is_marked_in_the_pair_list_and_the_others_still_listed(tmp_path,
                                                                                       tiny_config):
    """`specchat pairs` (and --json) lists every pair; the one whose reference cannot be read
    carries its one-line problem instead of failing the whole list."""
    from click.testing import CliRunner

    from specchat.cli import main

    config = tmp_path / "models.toml"
    config.write_text(tiny_config.read_text() + '\n[pairs.broken]\ntarget = "hf:justone"\nk = 0\n'
                      '[pairs.broken-draft]\ntarget = "hf:owner/tiny"\ndraft = "ollama:a/b/c/d"\nk = 2\n')
    result = CliRunner().invoke(main, ["pairs", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert " tiny  k=3" in result.output and "available offline" in result.output
    broken = next(line for line in result.output.splitlines() if "hf:justone" in line)
    assert broken.strip().startswith("target hf:justone: UNUSABLE (hf:justone is not a hub reference")
    assert "! broken  k=0" in result.output and "! broken-draft  k=2" in result.output
    records = {r["name"]: r for r in json.loads(
        CliRunner().invoke(main, ["pairs", "--config", str(config), "--json"]).stdout)}
    assert records["tiny"]["problem"] is None and records["tiny"]["models"]["target"]["available"]
    assert "not a hub reference" in records["broken"]["models"]["target"]["problem"]
    assert records["broken-draft"]["problem"].startswith("draft ")
    assert "not an ollama model name" in records["broken-draft"]["models"]["draft"]["problem"]
    assert "\n" not in records["broken"]["problem"]
