"""A conversation: system prompt plus alternating user/assistant turns, rendered
to prompt token ids with the model's chat template.

When the rendered prompt and the room for an answer exceed the model's context,
the oldest turns are dropped (whole user/assistant exchanges) and the caller is
told how many, so it can show a notice. Knows nothing about decoding or UI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specchat.errors import UsageError
from specchat.turn import Turn

__all__ = ["Conversation", "Turn"]

FALLBACK_TEMPLATE_ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}


@dataclass
class Conversation:
    """The messages of one chat."""

    system: str | None = None
    turns: list[Turn] = field(default_factory=list)

    def add(self, role: str, content: str) -> None:
        self.turns.append(Turn(role, content))

    def messages(self, skip_exchanges: int = 0) -> list[dict[str, str]]:
        turns = self.turns[2 * skip_exchanges:]
        head = [{"role": "system", "content": self.system}] if self.system else []
        return head + [{"role": t.role, "content": t.text} for t in turns]

    def clear(self) -> None:
        self.turns.clear()


def render_prompt(tokenizer: Any, messages: list[dict[str, str]], answer: bool = True) -> list[int]:
    """Prompt ids for `messages`, ending where the assistant's answer begins (`answer`), or
    where the last message ends: what the next prompt begins with."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=answer,
                                             tokenize=False)
    else:
        text = "".join(f"{FALLBACK_TEMPLATE_ROLES.get(m['role'], m['role'])}: {m['content']}\n"
                       for m in messages) + ("Assistant:" if answer else "")
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def fit_prompt(conversation: Conversation, tokenizer: Any, context_length: int,
               answer_room: int) -> tuple[list[int], int]:
    """(prompt ids, exchanges dropped) so that prompt + answer_room fits the context."""
    exchanges = (len(conversation.turns) - 1) // 2
    for dropped in range(exchanges + 1):
        ids = render_prompt(tokenizer, conversation.messages(dropped))
        if len(ids) + answer_room <= context_length:
            return ids, dropped
    raise UsageError(f"the message is too long for this model's context of {context_length} "
                     f"tokens ({len(ids)} prompt tokens + {answer_room} for the answer): shorten it "
                     "or lower --max-new-tokens")
