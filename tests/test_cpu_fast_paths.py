"""The numpy fast paths of a plain step on CPU float32 logits (greedy choice, top-two
margin) decide exactly what torch's own reductions decide, ties and -inf included."""

import pytest
import torch

from specchat.engine.decoder import top_two_margins
from specchat.engine.verify import row_argmax


def awkward_rows() -> torch.Tensor:
    torch.manual_seed(0)
    rows = torch.randn(6, 1000)
    rows[1, [3, 700]] = 50.0            # a tie for the top: the first index wins
    rows[2, :] = -float("inf")
    rows[2, [10, 20]] = torch.tensor([1.0, 1.0])
    rows[3, 0] = 99.0                   # the top at the first column
    rows[4, -1] = 99.0                  # the top at the last column
    rows[5, :] = 0.25                   # every logit equal
    return rows


def test_the_cpu_greedy_choice_is_torch_argmax_first_on_ties():
    rows = awkward_rows()
    assert row_argmax(rows).tolist() == rows.argmax(dim=-1).tolist()
    assert row_argmax(rows)[1] == 3


def test_the_cpu_top_two_margin_is_torch_topk_gap():
    rows = awkward_rows()
    top = rows.topk(2, dim=-1).values
    assert torch.equal(top_two_margins(rows), top[:, 0] - top[:, 1])
    assert top_two_margins(rows)[1] == 0.0


def test_other_dtypes_keep_torch_reductions():
    rows = awkward_rows().to(torch.bfloat16)
    assert row_argmax(rows).tolist() == rows.argmax(dim=-1).tolist()
    top = rows.float().topk(2, dim=-1).values
    assert torch.equal(top_two_margins(rows), top[:, 0] - top[:, 1])


def test_a_greedy_draft_step_takes_the_argmax_and_builds_no_distribution(monkeypatch):
    """A one-hot q over a 152k vocabulary cost milliseconds a draft step; greedy verification
    never reads q, so greedy drafting builds none."""
    from specchat.engine import drafters
    from specchat.engine.sampling import SamplingParams

    rows = awkward_rows()[:1]
    monkeypatch.setattr(drafters, "to_probs", lambda *a: pytest.fail("built a distribution"))
    token, q = drafters.ModelDrafter._choose(rows, SamplingParams(), None)
    assert token.tolist() == [int(rows[0].argmax())] and q is None
