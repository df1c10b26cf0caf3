"""A trained draft written as GGUF (`specchat export-gguf`, `distill --gguf`), on a tiny
GGUF target with tied, Q8_0 token embeddings (as SmolLM2's file has) and a tiny draft
in the shipped format: reduced vocabulary, int8 weights, embeddings shared with the
target. The file keeps the target's tokenizer and vocabulary size, computes the torch
draft's logits, never proposes outside the reduced vocabulary, and llama.cpp runs it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_support import assert_user_error
from click.testing import CliRunner

from specchat.cli import main

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Target GGUF, draft folder, and the draft exported as f32 and q8_0."""
    from gguf_tiny import write_tiny_draft, write_tiny_gguf

    from specchat.models.gguf.drafts import export_draft

    root = tmp_path_factory.mktemp("gguf-export")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECCHAT_CACHE_DIR", str(root / "cache"))
        target = write_tiny_gguf(root / "target", layers=3, tied=True, embedding_type="q8_0")
        draft = write_tiny_draft(target, root / "draft")
        out = {t: export_draft(draft, root / f"draft-{t}.gguf", gguf_type=t).path
               for t in ("f32", "q8_0")}
    return {"target": target, "draft": draft, **out}


@pytest.fixture(scope="module")
def torch_draft(files, tmp_path_factory):
    """(the draft as specchat's torch loader builds it, its reduced vocabulary)."""
    from transformers import AutoModelForCausalLM

    from specchat.models.weights import assembled_draft as ensure_assembled
    from specchat.models.torch_backend.shipped_draft import DraftSpec

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECCHAT_CACHE_DIR", str(tmp_path_factory.mktemp("assembled")))
        folder = ensure_assembled(files["draft"])
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return model, torch.tensor(DraftSpec.load(files["draft"]).vocab)


def text_ids(count: int = 120) -> list[int]:
    from tiny import CORPUS, build_tokenizer

    return build_tokenizer().encode(" ".join(CORPUS))[:count]


def torch_logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


def gguf_fields(path: Path) -> dict:
    import gguf

    reader = gguf.GGUFReader(path)
    fields = {name: field.contents() for name, field in reader.fields.items()}
    fields["tensors"] = {t.name: t for t in reader.tensors}
    return fields


def test_export_keeps_the_targets_tokenizer_vocabulary_and_embeddings(files):
    target, draft = gguf_fields(files["target"]), gguf_fields(files["q8_0"])
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id",
                "tokenizer.ggml.bos_token_id", "tokenizer.chat_template"):
        assert draft[key] == target[key], key
    assert draft["llama.block_count"] == 2 and target["llama.block_count"] == 3
    mine, theirs = draft["tensors"]["token_embd.weight"], target["tensors"]["token_embd.weight"]
    assert np.array_equal(np.array(mine.data), np.array(theirs.data))
    assert draft["tensors"]["output.weight"].shape[1] == len(target["tokenizer.ggml.tokens"])


def test_int8_layers_are_stored_as_q8_0_with_their_own_int8_values(files):
    from safetensors.torch import load_file

    state = load_file(str(files["draft"] / "draft.safetensors"))
    rows = state["model.layers.0.mlp.up_proj.weight"]
    scale = state["model.layers.0.mlp.up_proj.weight.int8_scale"]
    stored = np.array(gguf_fields(files["q8_0"])["tensors"]["blk.0.ffn_up.weight"].data)
    blocks = stored.reshape(rows.shape[0], -1, 34)
    assert np.array_equal(blocks[:, :, 2:].view(np.int8).reshape(rows.shape), rows.numpy())
    assert np.array_equal(blocks[:, 0, :2].copy().view(np.float16)[:, 0],
                          scale.numpy().astype(np.float16))


def test_exported_file_computes_the_torch_drafts_logits_on_its_vocabulary(files, torch_draft):
    from transformers import AutoModelForCausalLM

    model, vocab = torch_draft
    path = files["f32"]
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                  dtype=torch.float32).eval()
    ids = text_ids()
    mine, theirs = torch_logits(loaded, ids), torch_logits(model, ids)
    assert torch.allclose(mine[:, vocab], theirs[:, vocab], atol=1e-4)


def test_tokens_outside_the_reduced_vocabulary_score_the_mean_and_never_win(files, torch_draft):
    from transformers import AutoModelForCausalLM

    _, vocab = torch_draft
    path = files["f32"]
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                  dtype=torch.float32).eval()
    logits = torch_logits(loaded, text_ids())
    outside = torch.ones(logits.shape[1], dtype=torch.bool)
    outside[vocab] = False
    mean = logits[:, vocab].mean(-1, keepdim=True)
    assert torch.allclose(logits[:, outside], mean.expand(-1, int(outside.sum())), atol=1e-4)
    assert torch.isin(logits.argmax(-1), vocab).all()


def test_a_bfloat16_draft_with_the_full_vocabulary_keeps_the_tied_output(files, tmp_path):
    from gguf_tiny import write_tiny_draft
    from transformers import AutoModelForCausalLM

    from specchat.models.weights import assembled_draft as ensure_assembled
    from specchat.models.gguf.drafts import export_draft

    folder = write_tiny_draft(files["target"], tmp_path / "full", int8=False, vocab_every=0)
    path = export_draft(folder, tmp_path / "full.gguf", gguf_type="f32").path
    assert "output.weight" not in gguf_fields(path)["tensors"]
    loaded = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                  dtype=torch.float32).eval()
    reference = AutoModelForCausalLM.from_pretrained(ensure_assembled(folder),
                                                     dtype=torch.float32).eval()
    ids = text_ids()
    assert torch.allclose(torch_logits(loaded, ids), torch_logits(reference, ids), atol=1e-4)


def llama(path: Path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from specchat.models.llamacpp.baselines import open_llama

    return open_llama(path, threads=2, n_ctx=256, logits_all=True)  # never repacks where it crashes


def llama_logits(path: Path, ids) -> tuple[torch.Tensor, int]:
    llm = llama(path)
    llm.eval(ids)
    return torch.tensor(np.array(llm.scores[: len(ids)])), llm.n_vocab()


def test_llama_cpp_loads_the_export_with_the_targets_vocabulary_and_special_ids(files):
    target, draft = llama(files["target"]), llama(files["q8_0"])
    assert draft.n_vocab() == target.n_vocab() == 320
    assert (draft.token_bos(), draft.token_eos()) == (target.token_bos(), target.token_eos())


def test_llama_cpp_speculation_would_accept_the_export_for_its_target_only(files, tmp_path):
    from gguf_tiny import write_tiny_gguf

    from specchat.models.llamacpp.baselines import speculation_incompatibility

    target, draft = llama(files["target"]), llama(files["q8_0"])
    assert speculation_incompatibility(target, draft) is None
    stranger = write_tiny_gguf(tmp_path / "other", layers=1)
    with_other_tokens = stranger.read_bytes().replace(b"quick", b"QUICK")
    (tmp_path / "renamed.gguf").write_bytes(with_other_tokens)
    assert "differs" in speculation_incompatibility(target, llama(tmp_path / "renamed.gguf"))


def test_llama_cpp_greedy_proposals_equal_the_torch_drafts_in_f32(files, torch_draft):
    model, vocab = torch_draft
    ids = text_ids()
    scores, _ = llama_logits(files["f32"], ids)
    expected = vocab[torch_logits(model, ids)[:, vocab].argmax(-1)]
    assert scores.argmax(-1).tolist() == expected.tolist()


def test_llama_cpp_q8_0_proposals_stay_in_the_vocabulary_and_mostly_agree(files, torch_draft):
    """llama.cpp rounds activations to 8 bits for Q8_0 weights, which moves this tiny
    random model's logits by up to ~0.8 (hidden size 64, wide init): choices near a tie
    may flip (the built-in draft's only flip at margins under 0.07: tests/test_gguf_builtin.py);
    never towards a token outside the reduced vocabulary."""
    model, vocab = torch_draft
    ids = text_ids()
    scores, _ = llama_logits(files["q8_0"], ids)
    chosen = scores.argmax(-1)
    assert torch.isin(chosen, vocab).all()
    expected = vocab[torch_logits(model, ids)[:, vocab].argmax(-1)]
    assert (chosen == expected).float().mean() >= 0.85


def test_the_gguf_form_of_a_draft_is_built_once_and_replaced_when_the_draft_changes(files):
    from specchat.models.gguf.drafts import ensure_draft_gguf

    first = ensure_draft_gguf(files["draft"])
    stamp = first.stat().st_mtime_ns
    assert ensure_draft_gguf(files["draft"]) == first and first.stat().st_mtime_ns == stamp
    weights = files["draft"] / "draft.safetensors"
    os.utime(weights, (weights.stat().st_atime, weights.stat().st_mtime + 10))
    assert ensure_draft_gguf(files["draft"]) != first
    assert not first.parent.exists()  # the retrained draft's old form is dropped


def test_builtin_gguf_draft_ref_names_the_shipped_draft_and_is_listed():
    from specchat.errors import ModelNotFound
    from specchat.models.config.refs import availability, builtin_draft_gguf, builtin_gguf, parse_ref

    assert builtin_draft_gguf("smollm2-135m-draft.gguf").name == "smollm2-135m-draft"
    assert builtin_draft_gguf("smollm2-135m-draft") is None
    with pytest.raises(ModelNotFound, match="builtin:smollm2-135m-draft.gguf"):
        builtin_gguf("nope")
    ok, where = availability(parse_ref("builtin:smollm2-135m-draft.gguf"))
    assert ok and "GGUF written on first use" in where


def test_a_builtin_gguf_draft_runs_on_torch_as_the_reduced_draft_and_on_llama_cpp_as_its_file(
        files, tmp_path, monkeypatch):
    import shutil

    from specchat.models.config import refs
    from specchat.models.config.pairs import load_catalog
    from specchat.models.gguf.drafts import gguf_file
    from specchat.models.loader import load_pair

    monkeypatch.setattr(refs, "BUILTIN_DRAFTS_DIR", tmp_path / "drafts")
    shutil.copytree(files["draft"], tmp_path / "drafts" / "tinydraft")
    toml = tmp_path / "models.toml"
    pair_text = (f'[pairs.p]\ntarget = "{files["target"]}"\n'
                 'draft = "builtin:tinydraft.gguf"\nk = 2\ndtype = "float32"\n')
    toml.write_text('default = "p"\n' + pair_text + 'backend = "torch"\n')
    pair = load_pair(load_catalog(toml).get("p"))
    assert pair.draft_model.vocab is not None  # the reduced draft on torch
    toml.write_text('default = "p"\n' + pair_text + 'backend = "llama.cpp"\n')
    pair = load_pair(load_catalog(toml).get("p"))
    assert pair.backends["draft"].startswith("llama.cpp")  # its GGUF file on llama.cpp
    path = gguf_file(refs.parse_ref("builtin:tinydraft.gguf"))
    assert path.suffix == ".gguf" and gguf_fields(path)["llama.block_count"] == 2
    assert gguf_file(refs.parse_ref("builtin:tinydraft")) == path


def test_distill_with_gguf_writes_the_trained_draft_as_a_gguf_file(files, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Say hello.\nCount to five.\nWrite code.\nName a colour.\n")
    out, gguf_out = tmp_path / "draft", tmp_path / "draft.gguf"
    args = ["distill", "--target", str(files["target"]), "--out", str(out), "--layers", "1",
            "--vocab", "24", "--tokens", "60", "--prompts", str(prompts), "--steps", "2",
            "--batch-size", "2", "--max-new-tokens", "8", "--checkpoint-every", "1",
            "--int8", "--gguf", str(gguf_out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    fields = gguf_fields(gguf_out)
    from specchat.models.torch_backend.shipped_draft import DraftSpec

    assert fields["specchat.draft.vocab"] == sorted(DraftSpec.load(out).vocab)
    assert fields["llama.block_count"] == 1 and "-md" in result.output


def test_distill_with_gguf_for_a_non_gguf_target_fails_before_training(tmp_path):
    args = ["distill", "--target", str(tmp_path / "hf-folder"), "--out", str(tmp_path / "o"),
            "--gguf", str(tmp_path / "d.gguf")]
    assert_user_error(CliRunner().invoke(main, args), "--gguf", "is not a GGUF file")
    assert not (tmp_path / "o").exists()


def export_args(draft, out, *extra) -> list[str]:
    return ["export-gguf", "--draft", str(draft), "--out", str(out), *extra]


def test_export_command_writes_a_file_and_says_how_to_use_it(files, tmp_path):
    result = CliRunner().invoke(main, export_args(files["draft"], tmp_path / "d.gguf"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "d.gguf").is_file() and "-md" in result.output
    from specchat.models.torch_backend.shipped_draft import DraftSpec

    reduced = len(DraftSpec.load(files["draft"]).vocab)
    assert f"proposes from {reduced} of 320 tokens" in result.output


def test_export_of_a_missing_folder_is_a_one_line_error(tmp_path):
    result = CliRunner().invoke(main, export_args(tmp_path / "none", tmp_path / "d.gguf"))
    assert_user_error(result, "does not exist", "none")


def test_export_of_a_folder_that_is_not_a_draft_is_a_one_line_error(tmp_path):
    (tmp_path / "folder").mkdir()
    result = CliRunner().invoke(main, export_args(tmp_path / "folder", tmp_path / "d.gguf"))
    assert_user_error(result, "is not a draft folder", "specchat-draft.json")


def test_export_against_another_target_is_a_one_line_error(files, tmp_path):
    other = tmp_path / "other.gguf"
    other.write_bytes(files["target"].read_bytes())
    result = CliRunner().invoke(main, export_args(files["draft"], tmp_path / "d.gguf",
                                                  "--target", str(other)))
    assert_user_error(result, "was trained for", str(other))


def test_export_of_a_draft_of_a_non_gguf_target_is_a_one_line_error(files, tmp_path):
    from specchat.models.torch_backend.shipped_draft import DraftSpec

    folder = tmp_path / "draft"
    folder.mkdir()
    (folder / "draft.safetensors").write_bytes((files["draft"] / "draft.safetensors").read_bytes())
    spec = DraftSpec.load(files["draft"])
    spec.target = str(tmp_path / "hf-folder")
    spec.save(folder)
    result = CliRunner().invoke(main, export_args(folder, tmp_path / "d.gguf"))
    assert_user_error(result, "is not a GGUF file")


def test_export_to_a_name_without_gguf_suffix_is_a_one_line_error(files, tmp_path):
    result = CliRunner().invoke(main, export_args(files["draft"], tmp_path / "d.bin"))
    assert_user_error(result, "must end in .gguf")
