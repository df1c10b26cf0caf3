"""`specchat pairs --suggest TARGET` on fake stores built in the test (ollama's manifests and
blobs, the Hugging Face cache, LM Studio's folders): every model that could draft is found
and ranked (same tokenizer, then family, then any other tokenizer), what cannot be read is a
one-line note while the scan goes on, a hundred models take under two seconds, nothing is
downloaded, and `--write` keeps a candidate in the user's models.toml."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from specchat.cli import main

REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def tokenizers():
    from tiny import build_tokenizer

    return {"target": build_tokenizer(), "other": build_tokenizer(vocab_size=290)}


def fake_gguf(path: Path, tokenizer, name: str, rows: int,
              general_type: str | None = None) -> Path:
    """A GGUF header of a llama named `name` with `tokenizer`'s tokens, and one tensor of
    `rows` rows (its size on disk is what the card reads)."""
    import gguf

    from tiny_gguf import add_tokenizer

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_basename(name)
    if general_type:
        writer.add_type(general_type)
    add_tokenizer(writer, tokenizer)
    writer.add_tensor("token_embd.weight", np.zeros((rows, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def stores(tmp_path, monkeypatch) -> dict[str, Path]:
    """Empty stores: OLLAMA_MODELS, a Hugging Face cache, and a home with LM Studio's folder."""
    from huggingface_hub import constants

    roots = {"ollama": tmp_path / "ollama", "hf": tmp_path / "hf-cache",
             "home": tmp_path / "home", "files": tmp_path / "files"}
    for root in roots.values():
        root.mkdir()
    monkeypatch.setenv("OLLAMA_MODELS", str(roots["ollama"]))
    monkeypatch.setenv("HOME", str(roots["home"]))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(roots["hf"]))
    roots["lmstudio"] = roots["home"] / ".lmstudio" / "models"
    roots["lmstudio"].mkdir(parents=True)
    return roots


@pytest.fixture
def target(stores, tokenizers) -> Path:
    return fake_gguf(stores["files"] / "target.gguf", tokenizers["target"], "Tinyqwen", 4000)


def pull(root: Path, model: str, tag: str, blob: Path | None, text: str | None = None) -> Path:
    """An ollama manifest naming `blob` (copied into the blob store) as its model layer."""
    digest = "sha256:" + format(abs(hash((model, tag))), "064x")[:64]
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / model / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    layers = [{"mediaType": "application/vnd.ollama.image.model", "digest": digest}]
    manifest.write_text(text if text is not None else json.dumps({"layers": layers}))
    if blob is not None:
        stored = root / "blobs" / digest.replace(":", "-")
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_bytes(blob.read_bytes())
    return manifest


def hf_repo(root: Path, repo: str, files: dict[str, Path]) -> Path:
    folder = root / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(REVISION)
    snapshot = folder / "snapshots" / REVISION
    for name, source in files.items():
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_bytes(source.read_bytes())
    return snapshot


def suggest(target: Path, *options: str):
    result = CliRunner().invoke(main, ["pairs", "--suggest", str(target), "--json", *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def refs(report: dict) -> list[str]:
    return [c["ref"] for c in report["candidates"] if not c["ref"].startswith("builtin:")]


def test_an_empty_machine_suggests_nothing_and_says_where_it_looked(target, stores):
    report = suggest(target)
    assert refs(report) == [] and report["notes"] == []
    assert str(stores["ollama"]) in report["looked_in"]["ollama"]
    assert str(stores["hf"]) in report["looked_in"]["hf-cache"]
    assert str(stores["lmstudio"]) in report["looked_in"]["lm-studio"]


def test_a_draft_head_is_never_a_candidate_for_another_target(target, stores):
    from specchat.models.config.refs import known_builtins

    heads = [r for r in known_builtins().split(", ") if r.endswith("-head")]
    assert heads, "the package names a built-in head"
    report = suggest(target)
    assert not set(heads) & {c["ref"] for c in report["candidates"]}
    assert not any("head" in note for note in report["notes"])


def test_drafts_rank_same_tokenizer_then_same_family_then_another_tokenizer(target, stores,
                                                                            tokenizers):
    files = stores["files"]
    small = fake_gguf(files / "a.gguf", tokenizers["target"], "Tinyqwen", 400)
    pull(stores["ollama"], "tinyqwen-small", "q4", small)
    hf_repo(stores["hf"], "someone/tinyqwen-cousin-GGUF",
            {"cousin-q4.gguf": fake_gguf(files / "b.gguf", tokenizers["other"], "Tinyqwen", 300)})
    fake_gguf(stores["lmstudio"] / "pub" / "repo" / "stranger.gguf", tokenizers["other"],
              "Stranger", 350)
    fake_gguf(stores["lmstudio"] / "pub" / "repo" / "huge.gguf", tokenizers["target"],
              "Tinyqwen", 9000)  # bigger than the target: no draft
    fake_gguf(stores["lmstudio"] / "pub" / "repo" / "mmproj.gguf", tokenizers["target"],
              "Tinyqwen", 100, general_type="mmproj")  # a projector: no model of its own
    report = suggest(target)
    groups = {c["ref"]: c["group"] for c in report["candidates"]}
    assert refs(report) == ["ollama:tinyqwen-small:q4",
                            "hf:someone/tinyqwen-cousin-GGUF/cousin-q4.gguf",
                            str(stores["lmstudio"] / "pub" / "repo" / "stranger.gguf")]
    assert [groups[r] for r in refs(report)] == ["same tokenizer", "same family",
                                                 "other tokenizer"]
    first = report["candidates"][0]
    assert 0.05 < first["size_ratio"] < 0.2 and first["memory_bytes"] > 0


def test_a_corrupt_manifest_is_a_one_line_note_and_the_scan_goes_on(target, stores, tokenizers):
    pull(stores["ollama"], "broken", "latest", None, text="{ not json")
    pull(stores["ollama"], "blobless", "latest", None)
    pull(stores["ollama"], "fine", "latest",
         fake_gguf(stores["files"] / "fine.gguf", tokenizers["target"], "Tinyqwen", 400))
    report = suggest(target)
    assert refs(report) == ["ollama:fine:latest"]
    notes = report["notes"]
    assert any("broken" in note and "cannot be read" in note for note in notes)
    assert any("blobless" in note and "missing" in note for note in notes)
    assert all("\n" not in note for note in notes)


def test_a_symlinked_blob_is_followed(target, stores, tokenizers):
    real = fake_gguf(stores["files"] / "elsewhere.gguf", tokenizers["target"], "Tinyqwen", 400)
    manifest = pull(stores["ollama"], "linked", "latest", None)
    digest = json.loads(manifest.read_text())["layers"][0]["digest"]
    blob = stores["ollama"] / "blobs" / digest.replace(":", "-")
    blob.parent.mkdir(parents=True)
    blob.symlink_to(real)
    assert refs(suggest(target)) == ["ollama:linked:latest"]


def test_an_unreadable_store_folder_is_a_note_and_the_others_are_still_read(target, stores,
                                                                             tokenizers,
                                                                             monkeypatch):
    locked = stores["lmstudio"] / "locked"
    locked.mkdir()
    fake_gguf(stores["lmstudio"] / "open" / "x" / "small.gguf", tokenizers["target"], "Tinyqwen",
              400)
    real_iterdir = Path.iterdir

    def iterdir(self):
        if self == locked:
            raise PermissionError(13, "Permission denied")
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    report = suggest(target)
    assert refs(report) == [str(stores["lmstudio"] / "open" / "x" / "small.gguf")]
    assert any(str(locked) in note and "Permission denied" in note for note in report["notes"])


def test_a_hundred_models_are_found_and_ranked_in_under_two_seconds(target, stores, tokenizers,
                                                                    monkeypatch):
    from specchat.commands.suggest import gather
    from specchat.models.config import hub
    from specchat.models.config.pairs import load_catalog

    monkeypatch.setattr(hub, "hub_reachable", lambda *a: pytest.fail("--suggest asked the hub"))
    gather(load_catalog())  # the built-ins' cards, big files read once (not the store's)
    sources = [fake_gguf(stores["files"] / f"m{i}.gguf",
                         tokenizers["target" if i % 2 else "other"],
                         "Tinyqwen" if i % 3 else "Other", 100 + 10 * i) for i in range(3)]
    for i in range(100):
        source = sources[i % 3]
        if i % 3 == 0:
            pull(stores["ollama"], f"m{i}", "latest", source)
        elif i % 3 == 1:
            hf_repo(stores["hf"], f"owner/m{i}-GGUF", {f"m{i}.gguf": source})
        else:
            (stores["lmstudio"] / f"p{i}").mkdir()
            (stores["lmstudio"] / f"p{i}" / f"m{i}.gguf").write_bytes(source.read_bytes())
    started = time.perf_counter()
    report = suggest(target)
    seconds = time.perf_counter() - started
    assert len(refs(report)) == 100 and seconds < 2.0, f"{seconds:.2f} s"
    order = [("same tokenizer", "same family", "other tokenizer").index(c["group"])
             for c in report["candidates"]]
    assert order == sorted(order)


def test_a_fresh_suggest_process_imports_no_model_library(target, stores, tokenizers):
    """`pairs --suggest` reads headers only: a fresh process never imports torch (seconds of
    start-up on a small CPU, which the two seconds above would not show once a test had
    imported it), transformers or llama.cpp."""
    import os
    import subprocess
    import sys

    hf_repo(stores["hf"], "owner/m-GGUF",
            {"m.gguf": fake_gguf(stores["files"] / "m.gguf", tokenizers["other"], "Other", 100)})
    script = ("import sys\nfrom specchat.cli import main\ntry:\n    main(['pairs', '--suggest', "
              f"{str(target)!r}, '--json'])\nexcept SystemExit:\n    pass\n"
              "print([m for m in ('torch', 'transformers', 'llama_cpp') if m in sys.modules])")
    env = {**os.environ, "HF_HUB_CACHE": str(stores["hf"])}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, cwd=Path(__file__).resolve().parent.parent, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "m.gguf" in result.stdout
    assert result.stdout.splitlines()[-1] == "[]", result.stdout.splitlines()[-1]


def test_write_keeps_a_candidate_in_the_users_models_toml(target, stores, tokenizers):
    from specchat import paths
    from specchat.models.config.pairs import load_catalog

    pull(stores["ollama"], "tinyqwen-small", "q4",
         fake_gguf(stores["files"] / "a.gguf", tokenizers["target"], "Tinyqwen", 400))
    invoke = lambda *a: CliRunner().invoke(main, ["pairs", "--suggest", str(target), *a])  # noqa
    table = invoke()
    assert table.exit_code == 0 and "--write tinyqwen-with-" in table.stdout
    done = invoke("--write", "mine", "--pick", "1")
    assert done.exit_code == 0, done.output
    pair = load_catalog().get("mine")
    assert pair.target == str(target) and pair.draft == "ollama:tinyqwen-small:q4"
    assert str(paths.user_models_file()) in done.stdout
    again = invoke("--write", "mine")
    assert again.exit_code == 2 and "already in" in again.stderr


def test_measure_loads_the_first_candidates_and_projects_a_speedup(stores, tokenizers,
                                                                   monkeypatch):
    """Real tiny models: the target and a draft of another tokenizer in LM Studio's folder
    (short answers and one round of timings: what is measured, not how well)."""
    from specchat.commands import advice, suggest_measure
    from tiny_gguf import save_tiny_gguf

    monkeypatch.setattr(suggest_measure, "MEASURE_TOKENS", 12)
    monkeypatch.setattr(suggest_measure, "MEASURE_THREADS", 1)
    monkeypatch.setattr(advice, "MEASURE_ROUNDS", 1)
    monkeypatch.setattr(advice, "MEASURE_ATTEMPTS", 1)

    target, _ = save_tiny_gguf(stores["files"], tokenizers["target"], layers=2, hidden=64,
                               name="target.gguf")
    save_tiny_gguf(stores["lmstudio"] / "pub" / "small", tokenizers["other"], layers=1,
                   hidden=32, seed=4, name="small.gguf")
    report = suggest(target, "--measure", "--top", "1")
    first = report["candidates"][0]
    assert first["ref"].endswith("small.gguf") and first["group"] == "same family"
    measured = first["measured"]
    assert measured is not None and "problem" not in measured, measured
    assert measured["cross_tokenizer"] and 0 <= measured["alpha"] <= 1
    assert measured["c"] > 0 and measured["best_k"] >= 0 and measured["tokens"] > 0


def test_a_speedup_the_timings_could_not_support_says_why_beside_the_table():
    """A measured candidate whose rounds were not steady shows n/a for its speedup, and a line
    under the table gives the reason (a busy machine), rather than a bare n/a."""
    from specchat.commands.suggest import Candidate, Suggestion, suggestion_lines
    from specchat.models.cards import ModelCard

    def card(ref: str, size: int) -> ModelCard:
        return ModelCard(ref, f"/m/{ref}", "catalog", "qwen2", ref, "qwen", size, "", "t", 10)

    busy = "the machine is busy: 31% spread between repeated timings"
    measured = {"alpha": 0.6, "c": 0.07, "best_k": 3, "projected_speedup": None,
                "timing_problem": busy}
    lines = suggestion_lines(Suggestion(card("big", 1000), [Candidate(card("small", 50), 1, 0.05,
                                                                      measured)]), "big", "p")
    assert "n/a" in next(line for line in lines if "1. small" in line)
    assert f"speedup n/a for small: {busy}" in lines
