"""The built-in Qwen2.5-Coder pair (slow: the 1.5B target and its 0.5B draft, Q4_K_M GGUF files
from the qwen-coder extra's part wheels). On the int8 backend (what `auto` runs it on, on a
CPU where fbgemm runs), greedy speculation is the target's own greedy output on three prompts,
token for token: a verify row equals the single step by construction. On llama.cpp it is the
same or parts only at a near-tie the race verdict names (llama.cpp computes a several-token
verify with other kernels than a one-token step). The chat answers with accepted draft tokens
in their colour. The built-in cross-tokenizer pair (SmolLM2-135M drafting for the 1.5B)
speculates on int8 too, and its greedy answer is the target's own. Skipped, saying why, only
where the extra is not installed (`make test` installs it; in CI its absence fails:
tests/ci_strict.py)."""

from __future__ import annotations

import dataclasses

import pytest

from specchat.errors import ModelNotFound

pytestmark = pytest.mark.slow
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test installs it)")


def extra_missing() -> str | None:
    from specchat.models.config.part_wheels import part_paths
    from specchat.models.config.refs import SPLIT_BUILTINS

    try:
        for split in SPLIT_BUILTINS.values():
            part_paths(split)
    except ModelNotFound as error:
        return f"the qwen-coder extra is not installed ({error})"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.required_in_ci,  # CI's make test installs it
              pytest.mark.skipif(extra_missing() is not None, reason=str(extra_missing()))]

PROMPTS = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Rename the variable `tmp` to `total` in this function and reply with the function only:\n\n"
    "def sum_prices(items):\n    tmp = 0\n    for item in items:\n        tmp += item.price\n"
    "    return tmp",
    "Explain what a Python decorator is and show a short example.",
]
TOKENS = 64


def pair_on(backend: str):
    """The pair at a fixed k = 3 on `backend` (k = "auto" does not draft on llama.cpp on a
    2-core CPU, where a verify of several tokens costs too much: nothing to compare)."""
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    return load_pair(dataclasses.replace(load_catalog().get("qwen2.5-coder"), k=3, backend=backend))


@pytest.fixture(scope="module")
def qwen():
    return pair_on("llama.cpp")


@pytest.fixture(scope="module")
def qwen_int8():
    from specchat.models.backend_int8 import int8_support

    if not int8_support().usable:
        pytest.skip(int8_support().why)
    return pair_on("int8")


def last(events):
    *_, done = events
    return done


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_speculation_is_the_targets_output_or_parts_at_a_named_near_tie(qwen, prompt):
    from specchat.chat.session import ChatSession
    from specchat.chat.verdict import describe_texts, race_verdict

    assert qwen.dtype == "Q4_K_M" and qwen.backends["draft"].startswith("llama.cpp (qwen2 0.5B")
    session = ChatSession(qwen, seed=0)
    spec = last(session.answer(prompt, TOKENS))
    plain = last(session.replay_last(TOKENS))
    assert spec.stats.accepted > 0, "the 0.5B draft agrees with its target often"
    verdict = race_verdict(spec, plain, None, greedy=True, dtype=qwen.dtype)
    text = describe_texts(verdict)
    assert verdict.parting is None or (verdict.parting.near_tie and "a near-tie" in text), text


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_speculation_on_int8_is_the_targets_own_output_token_for_token(qwen_int8, prompt):
    from specchat.chat.session import ChatSession
    from specchat.chat.verdict import first_parting

    assert qwen_int8.dtype == "int8" and qwen_int8.backends["draft"].startswith("int8 (qwen2 0.5B")
    session = ChatSession(qwen_int8, seed=0)
    spec = last(session.answer(prompt, TOKENS))
    plain = last(session.replay_last(TOKENS))
    assert spec.stats.accepted > 0, "the 0.5B draft agrees with its target often"
    assert first_parting(spec, plain) is None and spec.text == plain.text


async def test_the_chat_answers_on_the_qwen_pair_with_accepted_tokens_in_their_colour(tmp_path):
    from tui_support import answers, drawn, last_answer, streaming, wait_for

    from specchat.commands.chat import pair_service
    from specchat.models.config.pairs import load_catalog
    from specchat.tui.app import create_app

    config = tmp_path / "models.toml"
    config.write_text('[pairs.qwen-k3]\ntarget = "builtin:qwen2.5-coder-1.5b-instruct"\n'
                      'draft = "builtin:qwen2.5-coder-0.5b-instruct"\nk = 3\n')
    catalog = load_catalog(config)
    app = create_app(lambda name: pair_service(catalog.get(name), None, 24, None),
                     [("qwen-k3", "")], "qwen-k3")
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.gauges.info is not None, 900)  # asking stops the baseline
        await pilot.press(*"Write a Python function that adds two numbers.", "enter")
        await wait_for(pilot, lambda: answers(app) and not streaming(app), 900)
        accepted = app.theme_variables["spec-accepted"].lower()
        runs = drawn(last_answer(app).tokens)
        assert any(colour == accepted and text.strip() for text, colour, _ in runs), runs
        assert "int8" in str(app.gauges.query_one("#g-pair").render())  # auto: a speculating pair



def test_the_built_in_cross_tokenizer_pair_speculates_on_int8_and_keeps_the_targets_output():
    """`qwen2.5-coder-smollm` as shipped (backend auto; k fixed at 3 here): SmolLM2-135M, of
    another tokenizer, drafts for the 1.5B on int8 where fbgemm runs (auto's choice for a
    speculating GGUF pair), and the greedy answer is the target's own, token for token, its
    drafts marked by how they line up with SmolLM2's tokens."""
    from specchat.chat.events import RoundUpdate
    from specchat.chat.session import ChatSession
    from specchat.chat.verdict import first_parting
    from specchat.models.backend_int8 import int8_support
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    if not int8_support().usable:
        pytest.skip(int8_support().why)
    pair = load_pair(dataclasses.replace(load_catalog().get("qwen2.5-coder-smollm"), k=3))
    assert pair.draft_tokenizer is not None
    assert pair.backends["target"].startswith("int8 (qwen2 1.5B")
    assert pair.backends["draft"].startswith("int8 (llama 135M")
    session = ChatSession(pair, seed=0)
    events = list(session.answer(PROMPTS[0], TOKENS))
    plain = last(session.replay_last(TOKENS))
    spec = events[-1]
    assert spec.stats.accepted > 0, "SmolLM2 guesses some of the coder's Python"
    assert first_parting(spec, plain) is None and spec.text == plain.text
    drafts = [s for e in events if isinstance(e, RoundUpdate) for s in e.accepted + e.rejected]
    assert drafts and {s.alignment for s in drafts} <= {"one", "merged", "split"}
