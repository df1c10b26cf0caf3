"""`specchat distill --head` end to end on a tiny random Qwen2 GGUF target: training runs,
resumes where it stopped without collecting a feature twice, and writes a head file that
holds only the head's own weights; the head drafts through the normal loader on the int8
backend and on torch's static forward (forced on the CPU), losslessly (greedy identity with
target-only decoding, χ² on sampled tokens it drafted); and a damaged or foreign head file is
a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from specchat.models.backend_int8 import int8_support

pytestmark = pytest.mark.skipif(not int8_support().usable, reason=int8_support().why)

from specchat.chat.decoding import drafter_for  # noqa: E402
from specchat.cli import main  # noqa: E402
from specchat.engine import (Decoder, HeadDrafter, LookupFirstDrafter, Round,  # noqa: E402
                             SamplingParams, Settings)

PROMPTS = ["Say hello.", "Count to five.", "Write code.", "Tell a story.", "Name a colour.",
           "Describe the sea.", "Add two numbers.", "Sort a list."]
HEAD_VOCAB = 48


def head_args(target: Path, out: Path, prompts: Path, steps: int, *extra: str) -> list[str]:
    return ["distill", "--head", "--target", str(target), "--out", str(out), "--vocab",
            str(HEAD_VOCAB), "--tokens", "120", "--prompts", str(prompts), "--steps", str(steps),
            "--batch-size", "2", "--max-new-tokens", "16", "--checkpoint-every", "3",
            "--width", "32", "--passes", "2", "--streams", "3", "--lr", "3e-3", "--seed", "1",
            *extra]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    """The tiny Qwen2 as a GGUF file and as a transformers folder, and a prompt file."""
    from tiny import build_tokenizer
    from tiny_gguf import build_qwen2, write_qwen2_gguf

    root = tmp_path_factory.mktemp("head")
    tokenizer = build_tokenizer()
    model = build_qwen2(len(tokenizer), eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    folder = root / "qwen2"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    prompts = root / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    return {"gguf": write_qwen2_gguf(model, tokenizer, root / "qwen2.gguf"), "folder": folder,
            "prompts": prompts, "root": root}


@pytest.fixture(scope="module")
def trained(files) -> Path:
    out = files["root"] / "head-run"
    result = CliRunner().invoke(main, head_args(files["gguf"], out, files["prompts"], 9))
    assert result.exit_code == 0, result.output
    return out


def test_the_head_file_holds_the_heads_own_weights_and_its_vocabulary(trained):
    from safetensors import safe_open

    with safe_open(str(trained / "head.safetensors"), framework="pt") as handle:
        names, metadata = set(handle.keys()), handle.metadata()
        assert handle.get_tensor("fc.rows").dtype == torch.int8
        assert len(handle.get_tensor("vocab")) == HEAD_VOCAB
    assert not any("embed" in n and "norm" not in n for n in names)  # the target's: shared
    info = json.loads(metadata["info"])
    assert len(info["heldout_acceptance"]) == 2 and info["answer_tokens"] >= 120
    assert json.loads((trained / "run.json").read_text())["shape"]["intermediate"] == 32


def test_a_head_read_from_its_file_holds_every_value_the_file_gives_it(trained):
    """The network is built without random values (they would all be overwritten): every
    parameter must still be the file's, the matrices its int8 rows times their scales."""
    from safetensors import safe_open

    from specchat.models.head.files import load_head

    network = load_head(trained / "head.safetensors").network
    with safe_open(str(trained / "head.safetensors"), framework="pt") as handle:
        stored = {name: handle.get_tensor(name) for name in handle.keys()}
    expected = {}
    for name, value in stored.items():
        if name.endswith(".rows"):
            base = name.removesuffix(".rows")
            expected[f"{base}.weight"] = value.float() * stored[f"{base}.scale"].float()[:, None]
        elif name.endswith(".bias") or name.endswith("_norm"):
            expected[name] = value
    parameters = dict(network.named_parameters())
    assert set(parameters) == set(expected)
    for name, value in parameters.items():
        assert torch.equal(value, expected[name].to(value.dtype)), name


def interrupted_after(train, step: int):
    """`head_train.train_head` that raises KeyboardInterrupt (as Ctrl-C would) once `step`
    is reported."""
    def stopping(network, tables, samples, run):
        report = run.report

        def report_then_stop(progress):
            report(progress)
            if progress.step == step:
                raise KeyboardInterrupt

        run.report = report_then_stop
        return train(network, tables, samples, run)

    return stopping


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(files, trained, tmp_path, monkeypatch):
    from specchat.distill import head_data, head_train

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    straight_args = head_args(files["gguf"], straight, files["prompts"], 9)
    assert CliRunner().invoke(main, straight_args).exit_code == 0
    original = head_train.train_head
    monkeypatch.setattr(head_train, "train_head", interrupted_after(original, step=6))
    result = CliRunner().invoke(main, head_args(files["gguf"], resumed, files["prompts"], 9))
    assert result.exit_code == 130, result.output  # Ctrl-C
    assert torch.load(resumed / "checkpoint.pt")["step"] == 6
    shards = {p.name: p.stat().st_mtime_ns for p in (resumed / "features").iterdir()}
    monkeypatch.setattr(head_train, "train_head", original)
    result = CliRunner().invoke(main, head_args(files["gguf"], resumed, files["prompts"], 9))
    assert result.exit_code != 0 and "--resume" in result.output  # never a silent restart
    monkeypatch.setattr(head_data, "answers",
                        lambda *a, **k: pytest.fail("features collected twice"))
    result = CliRunner().invoke(main, head_args(files["gguf"], resumed, files["prompts"], 9,
                                                "--resume"))
    assert result.exit_code == 0, result.output
    assert {p.name: p.stat().st_mtime_ns for p in (resumed / "features").iterdir()} == shards
    one, two = (torch.load(p / "checkpoint.pt") for p in (straight, resumed))
    assert two["step"] == 9 and one["head"].keys() == two["head"].keys()
    assert all(torch.equal(one["head"][n], two["head"][n]) for n in one["head"])


def starting_weights(monkeypatch) -> dict:
    """Patch `head_train.train_head` to record the network it is handed before training."""
    from specchat.distill import head_train

    seen: dict = {}
    original = head_train.train_head

    def recording(network, tables, samples, run):
        seen.update({n: v.detach().clone() for n, v in network.state_dict().items()})
        return original(network, tables, samples, run)

    monkeypatch.setattr(head_train, "train_head", recording)
    return seen


def test_a_head_grown_from_an_earlier_one_starts_from_its_weights_and_vocabulary(
        files, trained, tmp_path, monkeypatch):
    from specchat.models.head.files import load_head

    earlier = load_head(trained)
    seen = starting_weights(monkeypatch)
    grown = tmp_path / "grown"
    args = head_args(files["gguf"], grown, files["prompts"], 3, "--init-from", str(trained))
    args[args.index("--vocab") + 1], args[args.index("--width") + 1] = "40", "24"
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    start = earlier.network.state_dict()
    assert seen.keys() == start.keys()
    assert all(torch.equal(seen[n], start[n]) for n in start)
    after = load_head(grown)
    assert after.vocab == earlier.vocab and after.network.shape == earlier.network.shape
    assert after.info["init_from"] == str(trained)


def test_a_grown_run_keeps_the_earlier_head_unless_training_beats_it(files, trained, tmp_path,
                                                                     monkeypatch):
    """Held-out acceptance that only falls after the start: the run's head must stay the
    earlier one, measured before the first step, though training moved every weight."""
    from specchat.distill import head_train
    from specchat.models.head.files import load_head

    measured = iter([[0.9, 0.8]] + [[0.2, 0.1]] * 10)
    monkeypatch.setattr(head_train, "heldout_acceptance", lambda *a, **k: next(measured))
    grown = tmp_path / "kept"
    args = head_args(files["gguf"], grown, files["prompts"], 3, "--init-from", str(trained))
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    earlier, kept = load_head(trained), load_head(grown)
    assert kept.rows.keys() == earlier.rows.keys()
    assert all(torch.equal(kept.rows[n][0], earlier.rows[n][0]) for n in earlier.rows)
    assert kept.info["heldout_acceptance"] == [0.9, 0.8]
    moved = torch.load(grown / "checkpoint.pt")["head"]
    assert not torch.equal(moved["fc.weight"], earlier.network.state_dict()["fc.weight"])


@pytest.mark.parametrize("case", ["no head", "another target"])
def test_a_wrong_init_from_is_one_line_before_any_feature(files, trained, tmp_path, monkeypatch,
                                                          case):
    import shutil

    from specchat.distill import head_data

    monkeypatch.setattr(head_data, "answers",
                        lambda *a, **k: pytest.fail("features collected before the check"))
    earlier = tmp_path / "earlier"
    if case == "another target":
        shutil.copytree(trained, earlier)
        other = tmp_path / "other.gguf"
        other.write_bytes(Path(files["gguf"]).read_bytes())
        target, expected = other, "is a head for"
    else:
        earlier.mkdir()
        target, expected = files["gguf"], "holds no head.safetensors"
    args = head_args(target, tmp_path / "out", files["prompts"], 3, "--init-from", str(earlier))
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0] and str(earlier) in lines[0], result.output


def pair_toml(files, trained, root: Path) -> Path:
    toml = root / "head.toml"
    toml.write_text(f'''default = "int8"
[pairs.int8]
target = "{files['gguf']}"
draft = "{trained}"
k = 3
backend = "int8"

[pairs.torch]
target = "{files['folder']}"
draft = "{trained / 'head.safetensors'}"
k = 3
backend = "torch"
torch_forward = "static"
dtype = "float32"

[pairs.int8-lookup]
target = "{files['gguf']}"
draft = "{trained}"
k = 3
backend = "int8"
lookup = true

[pairs.eager]
target = "{files['folder']}"
draft = "{trained}"
backend = "torch"
torch_forward = "eager"
dtype = "float32"
''')
    return toml


@pytest.fixture(scope="module")
def loaded(files, trained, tmp_path_factory):
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    toml, cache = pair_toml(files, trained, tmp_path_factory.mktemp("pairs")), {}

    def load(name: str):
        if name not in cache:
            cache[name] = load_pair(load_catalog(toml).get(name))
        return cache[name]

    return load


def committed(decoder: Decoder, prompt, settings, n, generator=None):
    rounds = [e for e in decoder.generate(prompt, settings, n, generator) if isinstance(e, Round)]
    return [t for r in rounds for t in r.committed], rounds


PROMPT = [5, 17, 42, 99, 7, 250, 13, 64, 128, 31]


@pytest.mark.parametrize("name", ["int8", "torch"])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_with_the_trained_head_equals_target_only(loaded, name, k):
    pair = loaded(name)
    assert "head" in pair.backends["draft"] and isinstance(drafter_for(pair), HeadDrafter)
    plain, _ = committed(Decoder(pair.target, None, set()), PROMPT, Settings(k=0), 40)
    spec, rounds = committed(Decoder(pair.target, drafter_for(pair), set()), PROMPT,
                             Settings(k=k), 40)
    assert spec == plain
    assert all(r.drafted for r in rounds[1:-1]) and any(r.accepted for r in rounds)


def test_greedy_with_the_head_and_prompt_lookup_equals_target_only_and_both_draft(loaded):
    """A prompt that repeats itself: the lookup drafts the copy, the head the rest, and the
    head keeps drafting after lookup rounds (it is handed the features of their verifies)."""
    pair = loaded("int8-lookup")
    drafter = drafter_for(pair)
    assert isinstance(drafter, LookupFirstDrafter) and isinstance(drafter.drafter, HeadDrafter)
    sources: list[str] = []
    propose = drafter.propose

    def recording(*args, **kwargs):
        proposal = propose(*args, **kwargs)
        sources.append(("lookup" if drafter.by_lookup else "head") if len(proposal) else "none")
        return proposal

    drafter.propose = recording
    prompt = PROMPT + PROMPT[:7] + [3, 9] + PROMPT + PROMPT[:5]
    plain, _ = committed(Decoder(pair.target, None, set()), prompt, Settings(k=0), 60)
    spec, rounds = committed(Decoder(pair.target, drafter, set()), prompt, Settings(k=3), 60)
    assert spec == plain and any(r.accepted for r in rounds)
    assert "lookup" in sources and "head" in sources[sources.index("lookup"):], sources


def test_the_static_forward_keeps_the_final_hidden_states_of_every_token_fed(files):
    from transformers import AutoModelForCausalLM

    from specchat.models.torch_backend.adapter import static_adapter

    model = AutoModelForCausalLM.from_pretrained(files["folder"], dtype=torch.float32)
    static = static_adapter(model, compile_steps=False)
    static.reset()
    static.forward(torch.tensor(PROMPT[:6]))
    static.forward(torch.tensor(PROMPT[6:]), keep=2)
    want = model.model(torch.tensor([PROMPT])).last_hidden_state[0]
    torch.testing.assert_close(static.features, want[6:], rtol=1e-4, atol=1e-4)


def test_a_target_forward_that_keeps_no_features_is_one_line(loaded):
    from specchat.errors import PairError

    with pytest.raises(PairError, match="torch_forward"):
        loaded("eager")


def test_sampled_tokens_the_head_drafted_follow_the_target_distribution(loaded):
    """Answers of three tokens at temperature 1: the first round is a plain step (the target
    has not read the prompt), the second drafts; given the commonest first token, the second
    (a draft the target kept, or its correction) follows the target's distribution there."""
    from specchat.engine.sampling import to_probs
    from test_llamacpp import chi2_pvalue

    pair = loaded("int8")
    params, runs = SamplingParams(temperature=1.0), 1200
    generator = torch.Generator().manual_seed(2)
    decoder = Decoder(pair.target, drafter_for(pair), set())
    answers, drafted = [], 0
    for _ in range(runs):
        tokens, rounds = committed(decoder, PROMPT, Settings(k=2, sampling=params), 3, generator)
        answers.append(tokens)
        drafted += sum(r.drafted for r in rounds)
    first = max(set(a[0] for a in answers), key=[a[0] for a in answers].count)
    counts = torch.zeros(pair.target.vocab_size)
    for tokens in answers:
        if tokens[0] == first:
            counts[tokens[1]] += 1
    pair.target.reset()
    probs = to_probs(pair.target.forward(torch.tensor(PROMPT + [first]))[-1], params)
    assert drafted > runs // 2 and counts.sum() > 100
    assert chi2_pvalue(counts, probs) > 1e-3


def test_a_damaged_head_file_is_one_line_naming_it(trained, tmp_path):
    from specchat.errors import ModelNotFound
    from specchat.models.head.files import load_head

    damaged = tmp_path / "head.safetensors"
    whole = (trained / "head.safetensors").read_bytes()
    damaged.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ModelNotFound, match="head.safetensors") as error:
        load_head(damaged)
    assert "\n" not in str(error.value) and "truncated or corrupt" in str(error.value)
    damaged.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelNotFound, match="truncated or corrupt"):
        load_head(damaged)


def test_a_safetensors_file_that_is_no_head_is_one_line(tmp_path):
    from safetensors.torch import save_file

    from specchat.errors import ModelNotFound
    from specchat.models.head.files import load_head

    other = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(2)}, str(other))
    with pytest.raises(ModelNotFound, match="not a specchat draft head"):
        load_head(other)


def test_a_head_for_another_target_is_one_line(files, trained, tmp_path):
    from tiny import build_tokenizer
    from tiny_gguf import build_qwen2, write_qwen2_gguf

    from specchat.errors import PairError
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    tokenizer = build_tokenizer()
    wide = build_qwen2(len(tokenizer), hidden=96,
                       eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    other = write_qwen2_gguf(wide, tokenizer, tmp_path / "wide.gguf")
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pairs.p]\ntarget = "{other}"\ndraft = "{trained}"\nbackend = "int8"\n')
    with pytest.raises(PairError, match="96 wide"):
        load_pair(load_catalog(toml).get("p"))


def test_a_head_beside_a_llamacpp_target_is_refused_in_one_line(files, trained, tmp_path):
    from specchat.errors import PairError
    from specchat.models.adapters import choose_backends
    from specchat.models.config.pairs import load_catalog

    toml = tmp_path / "p.toml"
    toml.write_text(f'[pairs.p]\ntarget = "{files["gguf"]}"\ndraft = "{trained}"\n'
                    'backend = "llama.cpp"\n')
    with pytest.raises(PairError, match="int8 and torch backends"):
        choose_backends(load_catalog(toml).get("p"), "cpu")


def test_pairs_check_sizes_the_head_and_measures_its_step_like_any_drafts(loaded, files, trained,
                                                                         tmp_path):
    """Sized from its header (its own weights and the output rows it multiplies), its α from
    its held-out τ, and with --measure its draft step c timed on the loaded pair."""
    import re

    from specchat.commands.pair_list import drafter
    from specchat.models.head.files import head_facts
    from specchat.sizes import size_text

    toml = pair_toml(files, trained, tmp_path)
    result = CliRunner().invoke(main, ["pairs", "--config", str(toml), "--check", "int8"])
    assert result.exit_code == 0, result.output
    facts = head_facts(trained)
    count = facts.parameters + HEAD_VOCAB * facts.shape.hidden
    assert re.search(rf"draft .*: {count / 1e6:.1f}M parameters, "
                     rf"weights {size_text(count)}", result.output)  # int8: a byte each
    assert "held-out τ" in result.output and drafter(str(trained)) == "head"
    measured = CliRunner().invoke(main, ["pairs", "--config", str(toml), "--check", "int8",
                                         "--measure"])
    assert measured.exit_code == 0, measured.output
    c = float(re.search(r"draft step c = (\d+\.\d\d)", measured.output).group(1))
    assert c > 0  # timed (on a tiny target, a head costs about as much as it), not a free lookup


BUILTIN_HEAD = "qwen2.5-coder-1.5b-head"


@pytest.fixture
def no_shipped_head(tmp_path, monkeypatch) -> Path:
    """An install whose package lacks the built-in heads; the data folder under tmp_path."""
    from specchat.models.config import refs

    monkeypatch.setattr(refs, "BUILTIN_DRAFTS_DIR", tmp_path / "package-drafts")
    monkeypatch.setenv("SPECCHAT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data" / "heads" / BUILTIN_HEAD


def test_a_builtin_head_the_install_lacks_is_one_line_naming_the_command_that_builds_it(
        no_shipped_head):
    from specchat.errors import ModelNotFound
    from specchat.models.config.refs import availability, head_file, parse_ref
    from specchat.models.head.files import head_facts, load_head

    command = (f"`specchat distill --head --target builtin:qwen2.5-coder-1.5b-instruct "
               f"--out {no_shipped_head}`")
    path = head_file(parse_ref(f"builtin:{BUILTIN_HEAD}"))
    assert path == no_shipped_head / "head.safetensors"
    for read in (load_head, head_facts):
        with pytest.raises(ModelNotFound) as error:
            read(path)
        assert command in str(error.value) and "\n" not in str(error.value)
    ok, why = availability(parse_ref(f"builtin:{BUILTIN_HEAD}"))
    assert not ok and command in why


def test_a_missing_head_file_that_is_no_builtin_names_the_distill_command(tmp_path):
    from specchat.errors import ModelNotFound
    from specchat.models.head.files import load_head

    with pytest.raises(ModelNotFound, match="does not exist: train one with `specchat distill "
                                            "--head`") as error:
        load_head(tmp_path / "nowhere")
    assert "builtin:" not in str(error.value)


def test_the_builtin_head_the_command_builds_is_found_where_the_package_lacks_one(
        trained, no_shipped_head):
    import shutil

    from specchat.models.config.refs import availability, head_file, parse_ref
    from specchat.models.head.files import load_head

    no_shipped_head.mkdir(parents=True)
    shutil.copy(trained / "head.safetensors", no_shipped_head / "head.safetensors")
    ref = parse_ref(f"builtin:{BUILTIN_HEAD}")
    assert head_file(ref) == no_shipped_head / "head.safetensors"
    assert availability(ref)[0] and load_head(head_file(ref)).vocab


def test_the_builtin_head_resolves_to_the_file_the_package_ships():
    from specchat.models.config.refs import BUILTIN_DRAFTS_DIR, head_file, parse_ref
    from specchat.models.head.files import head_facts

    shipped = BUILTIN_DRAFTS_DIR / BUILTIN_HEAD / "head.safetensors"
    assert head_file(parse_ref(f"builtin:{BUILTIN_HEAD}")) == shipped and shipped.is_file()
    facts = head_facts(shipped)
    assert facts.shape.hidden == 1536 and facts.info["heldout_tau_k4"] > 1
    assert shipped.stat().st_size < 40 << 20  # int8 rows: small enough to ship in the wheel



def test_bench_races_a_builtin_head_pair_against_llamacpps_plain_decoding(files, trained,
                                                                          tmp_path, monkeypatch):
    """A head has no llama.cpp counterpart: the bindings' arms are plain decoding only (a
    built-in head taken for a GGUF draft was 'unknown built-in model')."""
    import shutil

    from specchat.models.config import refs

    pytest.importorskip("llama_cpp")
    monkeypatch.setattr(refs, "BUILTIN_DRAFTS_DIR", tmp_path / "drafts")
    (tmp_path / "drafts" / BUILTIN_HEAD).mkdir(parents=True)
    shutil.copy(trained / "head.safetensors", tmp_path / "drafts" / BUILTIN_HEAD)
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pairs.p]\ntarget = "{files["gguf"]}"\ndraft = "builtin:{BUILTIN_HEAD}"\n'
                    'backend = "int8"\nk = 2\n')
    result = CliRunner().invoke(main, ["bench", "run", "--config", str(toml), "--pair", "p",
                                       "--limit", "1", "--max-new-tokens", "4", "--json"])
    assert result.exit_code == 0, result.output
    arms = json.loads(result.stdout[result.stdout.index("{"):])["total"]["arms"]
    assert {"spec", "target", "llama"} <= set(arms) and "llama_spec" not in arms


def trained_on(device: str, files, out: Path, steps: int):
    return CliRunner().invoke(main, head_args(files["gguf"], out, files["prompts"], steps,
                                              "--device", device))


def test_the_head_trains_where_device_says(files, tmp_path):
    out = tmp_path / "head-cpu"
    result = trained_on("cpu", files, out, 3)
    assert result.exit_code == 0, result.output
    assert "answers, on cpu" in result.output
    assert (out / "head.safetensors").is_file()


def test_the_gpu_feature_path_collects_the_targets_own_answers_from_its_gguf(files, tmp_path):
    """Where the head trains on a GPU, the target answers there (transformers, in waves):
    run here on the CPU in float32, its shards hold the target's answers to the rendered
    prompts with a feature of the target's width for every token fed."""
    from specchat.distill import head_data
    from specchat.distill.head_run import HeadOptions, torch_answers

    options = HeadOptions(str(files["gguf"]), tmp_path, tokens=40, max_new_tokens=8)
    source = torch_answers(options, torch.device("cpu"), head_run_callbacks())
    assert source.streams == 16 and "cpu" in source.where
    folder = tmp_path / "features"
    head_data.generate_shards(source.answer, source.tokenizer, PROMPTS, folder, 40, 8, 0)
    samples = head_data.load_shards(folder)
    assert head_data.answer_tokens(samples) >= 40
    rendered = {tuple(head_data.render_chat(source.tokenizer, p)) for p in PROMPTS}
    for sample in samples:
        assert tuple(sample.ids[:sample.prompt_len].tolist()) in rendered
        assert sample.features.shape == (len(sample.ids) - 1, 64)


def head_run_callbacks():
    from specchat.distill.head_run import HeadCallbacks

    return HeadCallbacks()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_head_trained_on_a_gpu_drafts_losslessly_on_the_cpu(files, tmp_path):
    out = tmp_path / "head-cuda"
    result = trained_on("cuda", files, out, 9)
    assert result.exit_code == 0, result.output
    assert "answers, on cuda" in result.output
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    pair = load_pair(load_catalog(pair_toml(files, out, tmp_path)).get("int8"))
    plain, _ = committed(Decoder(pair.target, None, set()), PROMPT, Settings(k=0), 30)
    spec, _ = committed(Decoder(pair.target, drafter_for(pair), set()), PROMPT, Settings(k=3), 30)
    assert spec == plain


@pytest.fixture(scope="module")
def cuda_head_pair(files, trained, tmp_path_factory):
    """The head pair on torch's static forward on CUDA (CUDA graphs), loaded once."""
    import dataclasses

    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    toml = pair_toml(files, trained, tmp_path_factory.mktemp("cuda-pairs"))
    return load_pair(dataclasses.replace(load_catalog(toml).get("torch"), device="cuda"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("k", [1, 4])
def test_the_head_drafts_losslessly_on_cuda_from_the_captured_target_s_features(
        cuda_head_pair, k):
    """The GPU path of the head: the target on torch's static forward keeps its final hidden
    states, and the head drafts from them on the same device."""
    from specchat.models.torch_backend.static import StaticCausalModel

    pair = cuda_head_pair
    assert isinstance(pair.target, StaticCausalModel) and pair.target.device.type == "cuda"
    drafter = drafter_for(pair)
    assert isinstance(drafter, HeadDrafter)
    plain, _ = committed(Decoder(pair.target, None, set()), PROMPT, Settings(k=0), 40)
    spec, rounds = committed(Decoder(pair.target, drafter, set()), PROMPT, Settings(k=k), 40)
    assert spec == plain
    assert all(r.drafted for r in rounds[1:-1]) and any(r.accepted for r in rounds)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_a_gpu_asked_for_where_there_is_none_is_one_line_before_any_feature(files, tmp_path):
    out = tmp_path / "head-nogpu"
    result = trained_on("cuda", files, out, 3)
    assert result.exit_code != 0
    assert "no CUDA GPU" in result.output and len(result.output.strip().splitlines()) == 1
    assert not (out / "features").exists()


@pytest.mark.parametrize("name", ["int8", "torch", "int8-lookup"])
def test_a_next_question_keeps_the_heads_rows_and_the_head_drafts_on(loaded, name):
    """The head read the rest of the first answer when it ended (lookup rounds and the last
    round leave committed tokens it has not read), so the target keeps all it holds; the head
    keeps its rows, reads the new tokens' features from the first round's verify, and drafts
    from the second round on what it drafts from empty caches; the answer is theirs too."""
    from test_kept_prefix import assert_reads_only_the_new_tokens, second_answer

    result = second_answer(loaded(name), k=3, n=24)
    assert result.kept == result.held
    assert_reads_only_the_new_tokens(result)
    assert drafts(result.rounds) == drafts(result.fresh_rounds)
    assert all(r.drafted for r in result.rounds[1:-1] if not r.by_lookup)


def drafts(rounds) -> list[tuple[int, ...]]:
    return [r.accepted + r.rejected for r in rounds]



def test_the_chats_next_question_keeps_the_conversation_on_a_head_pair_with_lookup(loaded):
    """The default pair's shape (a head and prompt lookup), through the chat session, which
    builds a decoder and drafter per answer: the second answer keeps at least the first
    question (this random model's answer is no text that re-tokenizes as it was written; a
    real model's is, tests/test_kept_prefix.py and `bench turns`)."""
    from test_kept_prefix import greedy_session, reading_and_ids

    session = greedy_session(loaded("int8-lookup"))
    first, _, _ = reading_and_ids(list(session.answer("hello there", max_new_tokens=16)))
    reading, _, _ = reading_and_ids(list(session.answer("and then?", max_new_tokens=8)))
    assert first.kept == 0 < first.tokens - 1 <= reading.kept


@pytest.mark.parametrize("name", ["int8", "int8-lookup"])
def test_a_conversation_read_back_while_idle_gives_the_head_its_rows_too(loaded, name):
    """After another user took the target, reading the conversation back feeds the head the
    features of every token (`settle`), so the next question keeps all but the one token the
    head's next row needs, and the head drafts as from empty caches."""
    from test_kept_prefix import (assert_reads_only_the_new_tokens, read_back_after_another_user,
                                  second_answer)

    result = second_answer(loaded(name), k=3, n=24, between=read_back_after_another_user)
    assert result.kept == result.held
    assert_reads_only_the_new_tokens(result)
    assert drafts(result.rounds) == drafts(result.fresh_rounds)


@pytest.mark.parametrize("temperature", [0.0, 0.8], ids=["greedy", "sampled"])
def test_a_round_drafted_by_the_head_reads_the_device_once(loaded, temperature):
    """On a GPU every read of a device value stalls the round: with the head drafting from
    the static forward's features (the GPU path), a round still makes only the decoder's
    one read (tests/test_host_reads.py)."""
    from test_host_reads import HostReads, in_read_round

    pair = loaded("torch")
    decoder = Decoder(pair.target, drafter_for(pair), set(), check_invariants=False)
    rounds = decoder.generate(PROMPT, Settings(3, SamplingParams(temperature=temperature)), 500,
                              torch.Generator().manual_seed(0))
    next(rounds), next(rounds)  # the prompt's round, then the head's first rows
    with HostReads() as reads:
        window = [next(rounds) for _ in range(6)]
    assert all(isinstance(r, Round) and r.drafted for r in window)  # the head drafted each
    assert len(reads.sites) == 6 and all(map(in_read_round, reads.sites)), reads.sites


@pytest.mark.parametrize("name,element", [("int8", 1), ("torch", 4)])  # the torch pair: float32
def test_the_heads_memory_counts_its_copy_of_the_targets_output_rows(loaded, trained, name,
                                                                     element):
    """A head multiplies by the target's output rows of its vocabulary, gathered into a copy
    of its own when it loads: `run`'s "memory: draft weights" counts them, as `pairs --check`
    sizes them (its own parameters and those rows)."""
    from specchat.models.head.files import head_facts

    facts = head_facts(trained)
    drafted = (facts.parameters + facts.vocab * facts.shape.hidden) * element
    assert loaded(name).memory().draft_weights >= drafted


def test_suggest_lists_a_head_for_its_target_first_and_writes_it_as_a_head_pair(files, trained,
                                                                                 tmp_path,
                                                                                 monkeypatch):
    """`pairs --suggest` finds a head built into the data folder's heads/ (where the
    documented `distill --head --out` puts one) for the target it read, before any model,
    sized as it drafts (its rows and its copy of the output rows); `--write` keeps it as a
    pair that drafts with the head after prompt lookup, as the shipped head pair; for another
    target it is not a candidate; a spoiled file there is a note, and the scan goes on."""
    import json
    import shutil

    from tiny import build_tokenizer
    from tiny_gguf import build_qwen2, write_qwen2_gguf

    from specchat.models.head.files import head_facts

    monkeypatch.setenv("SPECCHAT_DATA_DIR", str(tmp_path / "data"))
    shutil.copytree(trained, tmp_path / "data" / "heads" / "mine")
    result = CliRunner().invoke(main, ["pairs", "--suggest", str(files["gguf"]), "--json"])
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout)["candidates"][0]
    facts = head_facts(trained)
    assert first["group"] == "target's head" and first["ref"].endswith("mine")
    assert first["memory_bytes"] == facts.parameters + facts.vocab * facts.shape.hidden
    monkeypatch.setenv("SPECCHAT_CONFIG_DIR", str(tmp_path / "config"))
    written = CliRunner().invoke(main, ["pairs", "--suggest", str(files["gguf"]), "--write",
                                        "tiny-head"])
    assert written.exit_code == 0, written.output
    from specchat.models.config.pairs import load_catalog
    from specchat.models.loader import load_pair

    pair = load_catalog().get("tiny-head")  # a pair that loads and drafts with the head
    assert pair.draft == first["ref"] and pair.lookup
    drafter = drafter_for(load_pair(pair))
    assert isinstance(drafter, LookupFirstDrafter) and isinstance(drafter.drafter, HeadDrafter)
    tokenizer = build_tokenizer()
    other = write_qwen2_gguf(build_qwen2(len(tokenizer), seed=11), tokenizer, tmp_path / "o.gguf")
    result = CliRunner().invoke(main, ["pairs", "--suggest", str(other), "--json"])
    assert result.exit_code == 0, result.output
    assert all(c["group"] != "target's head" for c in json.loads(result.stdout)["candidates"])
    spoiled = tmp_path / "data" / "heads" / "spoiled" / "head.safetensors"
    spoiled.parent.mkdir()
    spoiled.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{oops")
    result = CliRunner().invoke(main, ["pairs", "--suggest", str(files["gguf"]), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["candidates"][0]["ref"].endswith("mine")  # the readable one is still found
    assert any("spoiled" in note and "not a readable draft head" in note
               for note in report["notes"])
