"""The tiny pair loads through the real loader and answers."""

from specchat.chat.events import AnswerDone


def test_tiny_pair_answers_through_the_real_loader(load_tiny):
    from specchat.chat.session import ChatSession

    pair = load_tiny("tiny")
    events = list(ChatSession(pair).answer("hello there", max_new_tokens=12))
    done = events[-1]
    assert isinstance(done, AnswerDone)
    assert done.stats.tokens >= 1
    assert pair.dtype == "float32"
