"""`specchat distill` end to end on the tiny random target: the draft it writes ships
only its own weights, loads through the normal loader (and as a plain transformers
model for assisted generation), stays lossless with a reduced output vocabulary
(greedy identity, χ²), and a resumed run ends where an uninterrupted one does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_support import assert_user_error
from click.testing import CliRunner

from specchat.chat.decoding import drafter_for
from specchat.cli import main

PROMPTS = ["Say hello.", "Count to five.", "Write code.", "Tell a story.", "Name a colour.",
           "Describe the sea."]
DRAFT_VOCAB = 24


def distill_args(target: Path, out: Path, prompts: Path, steps: int = 6, *extra: str) -> list[str]:
    return ["distill", "--target", str(target), "--out", str(out), "--layers", "1",
            "--vocab", str(DRAFT_VOCAB), "--tokens", "200", "--prompts", str(prompts),
            "--steps", str(steps), "--batch-size", "2", "--max-new-tokens", "12",
            "--checkpoint-every", "3", "--seed", "3", *extra]


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prompts") / "prompts.txt"
    path.write_text("\n".join(PROMPTS) + "\n")
    return path


@pytest.fixture(scope="module")
def target_dir(tiny_config) -> Path:
    return tiny_config.parent / "target"


@pytest.fixture(scope="module")
def distilled(target_dir, prompts_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("distilled") / "draft"
    result = CliRunner().invoke(main, distill_args(target_dir, out, prompts_file))
    assert result.exit_code == 0, result.output
    return out


def pair_toml(folder: Path, target: Path, draft: Path) -> Path:
    toml = folder / "distilled.toml"
    toml.write_text(f'default = "d"\n[pairs.d]\ntarget = "{target}"\ndraft = "{draft}"\n'
                    'k = 3\ndtype = "float32"\n')
    return toml


@pytest.fixture
def distilled_pair(distilled, target_dir, tmp_path):
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    return load_pair(load_catalog(pair_toml(tmp_path, target_dir, distilled)).get("d"))


def test_shipped_draft_holds_only_its_own_layers_not_the_targets_embeddings(distilled):
    from safetensors.torch import load_file

    names = set(load_file(str(distilled / "draft.safetensors")))
    assert names and not any("embed_tokens" in n or "lm_head" in n for n in names)
    assert all(n.startswith(("model.layers.0.", "model.norm.")) for n in names)
    spec = json.loads((distilled / "specchat-draft.json").read_text())
    assert spec["layers"] == [1]  # the tiny target's last layer
    assert 1 < len(spec["vocab"]) <= DRAFT_VOCAB + 1


def test_draft_layers_start_as_copies_of_the_chosen_target_layers(target_dir):
    from transformers import AutoModelForCausalLM

    from specchat.models.torch_backend.shipped_draft import build_draft

    target = AutoModelForCausalLM.from_pretrained(target_dir)
    draft = build_draft(target, [0, 1])
    for mine, theirs in zip(draft.model.layers, target.model.layers):
        for a, b in zip(mine.parameters(), theirs.parameters()):
            assert torch.equal(a, b)
    assert draft.lm_head.weight.data_ptr() == draft.model.embed_tokens.weight.data_ptr()


def test_distilled_draft_is_a_full_transformers_model_usable_for_assisted_generation(
        distilled, target_dir):
    from transformers import AutoModelForCausalLM

    from specchat.models.weights import model_folder
    from specchat.models.config.refs import parse_ref

    folder = model_folder(parse_ref(str(distilled)))
    assert (Path(folder) / "config.json").is_file() and (Path(folder) / "tokenizer.json").is_file()
    draft = AutoModelForCausalLM.from_pretrained(folder).eval()
    target = AutoModelForCausalLM.from_pretrained(target_dir).eval()
    assert torch.equal(draft.model.embed_tokens.weight, target.model.embed_tokens.weight)
    ids = torch.tensor([[5, 17, 40, 9]])
    kwargs = dict(max_new_tokens=16, do_sample=False, pad_token_id=0)
    plain = target.generate(ids, **kwargs)
    assisted = target.generate(ids, assistant_model=draft, **kwargs)
    assert torch.equal(plain, assisted)


def test_pair_with_the_distilled_draft_uses_its_reduced_vocabulary(distilled_pair, distilled):
    model = distilled_pair.draft_model
    assert model.vocab is not None  # lean or eager, the head covers only `vocab`
    vocab = json.loads((distilled / "specchat-draft.json").read_text())["vocab"]
    model.reset()
    logits = model.forward(torch.tensor([5, 17, 40]), keep=2)
    allowed = torch.zeros(model.vocab_size, dtype=torch.bool)
    allowed[vocab] = True
    assert logits.shape == (2, distilled_pair.target.vocab_size)
    assert torch.isinf(logits[:, ~allowed]).all() and torch.isfinite(logits[:, allowed]).all()


def test_reduced_vocab_logits_equal_the_full_models_on_the_allowed_tokens(distilled_pair):
    from specchat.models.torch_backend.hf import HFCausalModel

    reduced = distilled_pair.draft_model
    full = HFCausalModel(reduced.model)
    ids = torch.tensor([3, 44, 8, 120])
    reduced.reset(), full.reset()
    a, b = reduced.forward(ids, keep=3), full.forward(ids, keep=3)
    assert torch.allclose(a[:, reduced.vocab], b[:, reduced.vocab], atol=1e-5)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_with_the_distilled_draft_equals_target_only_in_float32(distilled_pair, k):
    from test_pair_lossless import PROMPTS as CHAT_PROMPTS
    from test_pair_lossless import answer, committed_ids

    for prompt in CHAT_PROMPTS:
        spec, done = answer(distilled_pair, prompt, speculate=True, k=k, n=24)
        plain, _ = answer(distilled_pair, prompt, speculate=False, n=24)
        assert committed_ids(spec) == committed_ids(plain), prompt
        assert done.stats.drafted > 0


def test_sampling_with_a_reduced_vocab_draft_reproduces_the_target_distribution(distilled_pair):
    """χ² on two sampled tokens: tokens the draft can never propose still appear exactly
    as often as the target says, because the correction step samples them."""
    from test_engine_lossless import chi2_pvalue

    from specchat.engine import Decoder, SamplingParams

    params, runs, prompt = SamplingParams(temperature=1.0, top_k=4), 800, [5, 17, 40]
    target, drafter = distilled_pair.target, drafter_for(distilled_pair)
    exact = exact_two_token_joint(target, prompt, params)
    outside = [c for c in exact if c[0] not in set(drafter.model.vocab.tolist())]
    assert sum(exact[c] for c in outside) > 0.05, "the test needs target mass outside the draft vocab"
    counts = sample_two_tokens(Decoder(target, drafter, eos_ids=set()), prompt, params, runs)
    assert chi2_pvalue(counts, exact, runs) > 1e-3


def exact_two_token_joint(target, prompt, params) -> dict:
    from specchat.engine.sampling import to_probs

    target.reset()
    first = to_probs(target.forward(torch.tensor(prompt), keep=1)[-1], params)
    joint = {}
    for x1 in first.nonzero().flatten().tolist():
        target.reset()
        second = to_probs(target.forward(torch.tensor(prompt + [x1]), keep=1)[-1], params)
        for x2 in second.nonzero().flatten().tolist():
            joint[(x1, x2)] = float(first[x1] * second[x2])
    return joint


def sample_two_tokens(decoder, prompt, params, runs) -> dict:
    from test_engine_lossless import generated

    from specchat.engine import Settings

    generator = torch.Generator().manual_seed(7)
    counts: dict = {}
    for _ in range(runs):
        tokens = tuple(generated(decoder, prompt, Settings(k=3, sampling=params), 2, generator)[:2])
        counts[tokens] = counts.get(tokens, 0) + 1
    return counts


def test_a_resumed_run_ends_with_the_same_weights_as_an_uninterrupted_one(
        target_dir, prompts_file, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from specchat.distill import train as training

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert CliRunner().invoke(main, distill_args(target_dir, straight, prompts_file, 9)).exit_code == 0
    original = training.train
    monkeypatch.setattr(training, "train", interrupted_after(original, step=6))
    result = CliRunner().invoke(main, distill_args(target_dir, resumed, prompts_file, 9))
    assert result.exit_code == 130, result.output  # Ctrl-C
    shards = {p.name: p.stat().st_mtime_ns for p in (resumed / "teacher").iterdir()}
    assert torch.load(resumed / "checkpoint.pt")["step"] == 6
    monkeypatch.setattr(training, "train", original)
    result = CliRunner().invoke(main, distill_args(target_dir, resumed, prompts_file, 9, "--resume"))
    assert result.exit_code == 0, result.output
    assert {p.name: p.stat().st_mtime_ns for p in (resumed / "teacher").iterdir()} == shards
    assert torch.load(resumed / "checkpoint.pt")["step"] == 9
    a, b = torch.load(straight / "checkpoint.pt")["draft"], torch.load(resumed / "checkpoint.pt")["draft"]
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    assert load_file(str(resumed / "draft.safetensors")).keys() == a.keys()


def interrupted_after(train, step: int):
    """`train` that raises KeyboardInterrupt (as Ctrl-C would) once `step` is reported."""
    def stopping(*args, report, **kwargs):
        def report_then_stop(progress):
            report(progress)
            if progress.step == step:
                raise KeyboardInterrupt
        return train(*args, report=report_then_stop, **kwargs)
    return stopping


def test_a_grown_draft_starts_out_computing_exactly_what_the_smaller_one_did(distilled, target_dir):
    from transformers import AutoModelForCausalLM

    from specchat.distill.draft import grow_from
    from specchat.models.torch_backend.shipped_draft import build_draft, load_own_weights

    target = AutoModelForCausalLM.from_pretrained(target_dir)
    small = build_draft(target, [1])
    load_own_weights(small, distilled)
    grown = build_draft(target, [0, 1])
    assert grow_from(grown, [0, 1], distilled, str(target_dir)) == [0]
    ids = torch.tensor([[5, 17, 40, 9, 33]])
    with torch.no_grad():
        assert torch.allclose(grown(ids).logits, small(ids).logits, atol=1e-5)
        assert not torch.allclose(build_draft(target, [0, 1])(ids).logits, small(ids).logits, atol=1e-3)


def test_distill_can_grow_a_deeper_int8_draft_that_stays_lossless(distilled, target_dir, prompts_file,
                                                                  tmp_path):
    from safetensors.torch import load_file

    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair
    from test_pair_lossless import answer, committed_ids

    out = tmp_path / "grown"
    args = distill_args(target_dir, out, prompts_file, 3, "--init-from", str(distilled), "--int8")
    args[args.index("--layers") + 1] = "2"
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "new identity layers: [0]" in result.output
    weights = load_file(str(out / "draft.safetensors"))
    assert weights["model.layers.1.mlp.down_proj.weight"].dtype == torch.int8
    assert weights["model.layers.1.mlp.down_proj.weight.int8_scale"].dtype == torch.float32
    pair = load_pair(load_catalog(pair_toml(tmp_path, target_dir, out)).get("d"))
    for prompt in PROMPTS[:3]:
        plain = committed_ids(answer(pair, prompt, speculate=False)[0])
        assert committed_ids(answer(pair, prompt, k=3)[0]) == plain, prompt


def test_int8_weights_round_trip_within_half_a_step_per_row():
    from specchat.distill.draft import quantize_int8
    from specchat.models.torch_backend.shipped_draft import dequantize

    state = {"w": torch.randn(6, 40) * torch.linspace(0.01, 3, 6)[:, None], "norm": torch.rand(40)}
    packed = quantize_int8(state)
    restored = dequantize(packed)
    assert restored.keys() == state.keys()
    step = state["w"].abs().amax(dim=1, keepdim=True) / 127
    assert ((restored["w"] - state["w"]).abs() <= step / 2 + 1e-7).all()
    assert torch.equal(restored["norm"], state["norm"].to(torch.bfloat16))


def test_growing_from_a_folder_that_is_not_a_draft_is_a_one_line_error(tmp_path, target_dir,
                                                                        prompts_file):
    args = distill_args(target_dir, tmp_path / "out", prompts_file, 3, "--init-from", str(tmp_path))
    assert_user_error(CliRunner().invoke(main, args), "--init-from", "not a draft folder")


def test_teacher_only_writes_the_teacher_shards_and_trains_nothing(target_dir, prompts_file,
                                                                   tmp_path):
    out = tmp_path / "teacher-run"
    args = distill_args(target_dir, out, prompts_file) + ["--teacher-only", "--teacher-batch", "3"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "teacher").glob("shard-*.pt"))
    assert not (out / "checkpoint.pt").exists() and not (out / "draft.safetensors").exists()
    assert "answer tokens" in result.output


def test_a_second_run_into_a_used_folder_without_resume_is_refused(distilled, target_dir, prompts_file):
    result = CliRunner().invoke(main, distill_args(target_dir, distilled, prompts_file))
    assert_user_error(result, str(distilled), "--resume")


def test_unknown_target_is_a_one_line_error(tmp_path, prompts_file):
    result = CliRunner().invoke(main, distill_args(Path("no-such-org/no-such-model"),
                                                   tmp_path / "out", prompts_file))
    assert_user_error(result, "no-such-org/no-such-model")


def test_unwritable_output_folder_is_a_one_line_error(tmp_path, target_dir, prompts_file):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(main, distill_args(target_dir, blocker / "out", prompts_file))
    assert_user_error(result, "not writable", "--out")


def test_more_layers_than_the_target_has_is_a_one_line_error(tmp_path, target_dir, prompts_file):
    args = distill_args(target_dir, tmp_path / "out", prompts_file)
    args[args.index("--layers") + 1] = "5"
    assert_user_error(CliRunner().invoke(main, args), "--layers 5", "2 layers")


def make_sample(prompt_len: int, answer: list[int], top: list[list[int]]):
    from specchat.distill.teacher import Sample

    ids = torch.tensor([1] * prompt_len + answer)
    top_ids = torch.tensor(top, dtype=torch.int32)
    return Sample(ids, prompt_len, top_ids, torch.zeros(top_ids.shape, dtype=torch.float16))


def test_reduced_vocabulary_is_the_most_frequent_answer_tokens_plus_end_of_sequence():
    from specchat.distill.train import choose_vocab

    samples = [make_sample(3, [7, 7, 7, 9, 9, 4], [[7, 8]] * 6), make_sample(2, [9, 5], [[9, 8]] * 2)]
    assert choose_vocab(samples, 2, {2}, 100) == [2, 7, 9]
    assert choose_vocab(samples, 4, {2}, 100) == [2, 4, 5, 7, 9]
    assert choose_vocab(samples, 0, {2}, 100) is None
    # fewer distinct answer tokens than asked: filled with what the target ranks in its top-k
    assert choose_vocab(samples, 5, {2}, 100) == [2, 4, 5, 7, 8, 9]


def test_every_answer_to_a_held_out_prompt_is_held_out_and_no_other():
    """A greedy pass and two sampled passes over 200 prompts, each pass in its own shuffled
    order as the shards have them: a held-out answer whose prompt was trained on (its greedy
    or another sampled answer) would make held-out acceptance measure memorised text."""
    from specchat.distill.teacher import AnswerSample
    from specchat.distill.train import split_heldout

    def answer(prompt: int, seed: int) -> AnswerSample:
        return AnswerSample(torch.tensor([100, prompt, prompt + 1, seed, seed]), 3)

    samples = [answer(int(prompt), seed) for seed in range(3)
               for prompt in torch.randperm(200, generator=torch.Generator().manual_seed(seed))]
    train, held = split_heldout(samples)
    held_prompts = {int(s.ids[1]) for s in held}
    assert held_prompts.isdisjoint(int(s.ids[1]) for s in train)
    assert len(held) == 3 * len(held_prompts)
    assert 4 <= len(held_prompts) <= 20  # about one prompt in 20


def test_distillation_loss_is_zero_only_when_the_draft_matches_the_target_top_k():
    from specchat.distill.train import Batch, Head, distill_loss

    head = Head([0, 1, 2, 3, 4, 5], 10, "cpu")
    top_ids = torch.tensor([[1, 3, 7]])  # token 7 is outside the draft's vocabulary
    top_logits = torch.tensor([[2.0, 0.5, 9.0]])
    batch = Batch(torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2), torch.tensor([0]),
                  torch.tensor([0]), top_ids, top_logits)
    matching = torch.full((1, 6), float("-inf"))
    matching[0, 1], matching[0, 3] = 2.0 + 4, 0.5 + 4  # same distribution, shifted logits
    assert float(distill_loss(matching, head, batch, 1.0)) == pytest.approx(0.0, abs=1e-6)
    swapped = torch.full((1, 6), float("-inf"))
    swapped[0, 1], swapped[0, 3] = 0.5, 2.0
    assert float(distill_loss(swapped, head, batch, 1.0)) > 0.1


def test_progress_shows_tokens_per_second_loss_and_held_out_acceptance(target_dir, prompts_file,
                                                                       tmp_path):
    result = CliRunner().invoke(main, distill_args(target_dir, tmp_path / "out", prompts_file, 3))
    assert result.exit_code == 0, result.output
    teacher_lines = [line for line in result.stderr.splitlines() if line.startswith("teacher ")]
    assert teacher_lines and teacher_lines[0].endswith("0.0 tok/s")  # the starting point
    last = result.stderr.strip().splitlines()[-1]
    assert "step 3/3" in last and "tok/s" in last and "loss" in last
    assert "held-out acceptance 0." in last or "held-out acceptance 1." in last


def test_the_help_names_the_default_a_head_collects():
    """The command passes HeadOptions' default on; its help text must say the same number."""
    from specchat.distill.head_run import HeadOptions

    shown = CliRunner().invoke(main, ["distill", "--help"], terminal_width=200).output
    assert f"{HeadOptions.tokens} with --head" in " ".join(shown.split())
