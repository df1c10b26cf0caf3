"""A GGUF's cached tokenizer folder carries its added tokens in `tokenizer_config.json`
(`added_tokens_decoder`), so transformers does not parse the whole `tokenizer.json` in
Python once more to find them (0.3 s of every load of Qwen2.5's): the tokenizer read that
way encodes, decodes and renders the chat template exactly as one read without them, and a
folder that cannot be written is read as it is (models/gguf/cache.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from specchat.models.gguf import cache

TEXTS = ["Hello, world!", "  two leading spaces\tand a tab\n\nnew lines",
         "def f(x):\n    return x ** 2  # ünïcödé 日本語 🙂",
         "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|> after"]
CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "bye"}]


def smollm2() -> Path:
    from specchat.models.config.refs import builtin_gguf

    return Path(builtin_gguf("smollm2-135m-instruct"))


def reading(tokenizer) -> dict:
    """What the chat and the engine read from a tokenizer."""
    return {"ids": [tokenizer.encode(text) for text in TEXTS],
            "text": [tokenizer.decode(tokenizer.encode(text)) for text in TEXTS],
            "chat": tokenizer.apply_chat_template(CONVERSATION, tokenize=False,
                                                  add_generation_prompt=True),
            "special": tokenizer.all_special_ids, "size": len(tokenizer),
            "added": {index: str(token) for index, token in tokenizer.added_tokens_decoder.items()},
            "ends": (tokenizer.eos_token_id, tokenizer.bos_token_id, tokenizer.pad_token_id)}


def copy_without_added_tokens(to: Path) -> Path:
    """The packaged SmolLM2's cached tokenizer folder, copied, its config as transformers 5
    saves it (no `added_tokens_decoder`)."""
    shutil.copytree(cache.tokenizer_folder(smollm2()), to)
    config = json.loads((to / "tokenizer_config.json").read_text())
    config.pop(cache.ADDED_TOKENS, None)
    (to / "tokenizer_config.json").write_text(json.dumps(config))
    return to


def test_the_tokenizer_reads_as_it_does_without_the_added_tokens_in_its_config(tmp_path):
    from transformers import AutoTokenizer

    plain, faster = copy_without_added_tokens(tmp_path / "plain"), copy_without_added_tokens(
        tmp_path / "faster")
    cache.with_added_tokens(faster)
    config = json.loads((faster / "tokenizer_config.json").read_text())
    assert len(config[cache.ADDED_TOKENS]) >= 2  # SmolLM2's <|im_start|>, <|im_end|>, ...
    assert reading(AutoTokenizer.from_pretrained(faster)) == reading(
        AutoTokenizer.from_pretrained(plain))


def test_loading_writes_them_into_the_cache_and_reads_the_same(tmp_path):
    from transformers import AutoTokenizer

    loaded = cache.load_tokenizer(smollm2())
    config = json.loads((cache.tokenizer_folder(smollm2()) / "tokenizer_config.json").read_text())
    assert cache.ADDED_TOKENS in config
    assert reading(loaded) == reading(AutoTokenizer.from_pretrained(
        copy_without_added_tokens(tmp_path / "plain")))


def test_a_folder_cached_without_them_gets_them_at_its_next_load(tmp_path):
    folder = copy_without_added_tokens(tmp_path / "cached")
    cache.with_added_tokens(folder)
    added = json.loads((folder / "tokenizer.json").read_text())["added_tokens"]
    written = json.loads((folder / "tokenizer_config.json").read_text())[cache.ADDED_TOKENS]
    assert written == {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added}


def test_a_folder_that_cannot_be_written_is_read_as_it_is(tmp_path, monkeypatch):
    folder = copy_without_added_tokens(tmp_path / "cached")
    before = (folder / "tokenizer_config.json").read_text()

    def refused(*_):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(os, "replace", refused)
    cache.with_added_tokens(folder)
    assert (folder / "tokenizer_config.json").read_text() == before
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in
                                                               cache.tokenizer_folder(smollm2()).iterdir())


@pytest.mark.parametrize("damage", ["{ not json", '{"added_tokens": "not a list"}', "[]"])
def test_a_damaged_tokenizer_json_leaves_the_config_as_it_is(tmp_path, damage):
    folder = tmp_path / "cached"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "X"}')
    (folder / "tokenizer.json").write_text(damage)
    cache.with_added_tokens(folder)
    assert (folder / "tokenizer_config.json").read_text() == '{"tokenizer_class": "X"}'
    assert sorted(p.name for p in folder.iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
