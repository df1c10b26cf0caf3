"""`python -m devtools scale`'s choices that only a GPU run would otherwise exercise, checked on
the CPU with tiny shapes: 8-bit and 4-bit weights are timed on the forward the chat runs for them
(transformers' eager one; neither static forward takes quantized weights), and the
speculative runs capture every step they time before the clock starts."""

from __future__ import annotations

import io

import torch

from devtools.gpu import scale
from devtools.gpu.scale import Recorder, ScaleSettings, measure_model
from specchat.models.torch_backend import synthetic
from specchat.models.torch_backend.static_llama import StaticLlama


class Int8Stored(torch.nn.Module):
    """A projection that holds int8 weights, as a bitsandbytes layer does (computing with a
    float copy: bitsandbytes itself needs CUDA)."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.weight = torch.nn.Parameter(linear.weight.detach().to(torch.int8), requires_grad=False)
        self.register_buffer("computed", linear.weight.detach().clone())

    def forward(self, x):
        return x @ self.computed.T


def int8_stored(model, quantization: str) -> None:
    for layer in model.get_decoder().layers:
        layer.mlp.down_proj = Int8Stored(layer.mlp.down_proj)


def recorder(tokens: int = 128) -> Recorder:
    return Recorder(ScaleSettings(device="cpu", tiny=True, tokens=tokens), io.StringIO(), "cpu",
                    "test", echo=lambda line: None)


def test_quantized_weights_are_timed_on_the_chats_eager_forward(monkeypatch):
    monkeypatch.setattr(synthetic, "quantize", int8_stored)
    measured = measure_model(recorder(), "8b", "8bit")
    assert measured.figures["forward"] == "HFCausalModel"
    assert measured.figures["captured"] is False and measured.figures["v"]
    assert measure_model(recorder(), "8b", "none").figures["forward"] == "StaticLlama"


def test_the_speculative_runs_time_only_steps_captured_before_the_clock(monkeypatch):
    """Every (width, attention span) a timed answer runs was run by `prepare` first: on CUDA
    a new one is a graph capture inside the timed answer."""
    steps, timing = {"prepared": set(), "timed": set()}, []
    original_run, original_prepare = StaticLlama._run, StaticLlama.prepare

    def run(self, ids, width, captured):
        out = original_run(self, ids, width, captured)
        if captured:
            steps["timed" if timing else "prepared"].add((self, width, self._span))
        return out

    def prepare(self, *args, **kwargs):
        timing.clear()
        original_prepare(self, *args, **kwargs)
        timing.append(True)

    monkeypatch.setattr(StaticLlama, "_run", run)
    monkeypatch.setattr(StaticLlama, "prepare", prepare)
    rec = recorder(tokens=200)  # past the first attention span (256 with the 128-token prompt)
    target, draft = measure_model(rec, "8b", "none"), measure_model(rec, "1b", "none")
    steps["prepared"].clear()
    steps["timed"].clear()
    scale.speculative_runs(rec, target, draft)
    spans = {span for _, _, span in steps["timed"]}
    assert len(spans) > 1, "the timed answers should cross an attention span"
    assert steps["timed"] <= steps["prepared"], steps["timed"] - steps["prepared"]


def test_the_gpu_commands_refuse_what_this_machine_or_the_options_cannot_do_in_one_line(tmp_path):
    from click.testing import CliRunner

    from devtools.cli import main

    out = str(tmp_path / "s.jsonl")
    cases = {("scale", "--shapes", "70b", "--out", out): "--shapes 70b: choose from 1b, 3b, 8b",
             ("scale", "--quant", "3bit", "--out", out): "--quant 3bit: choose from none",
             ("scale", "--device", "gpu", "--out", out): "--device 'gpu': choose cuda",
             ("scale", "--tiny", "--out", str(tmp_path / "no" / "s.jsonl")): "does not exist"}
    if not torch.cuda.is_available():
        cases[("scale", "--device", "cuda", "--out", out)] = "no CUDA GPU is visible here"
        cases[("campaign", "scale", "--out", str(tmp_path / "c"))] = "--dry-run runs every phase"
    for args, message in cases.items():
        done = CliRunner().invoke(main, list(args))
        assert done.exit_code == 2 and message in done.output, (args, done.output)
        assert "Traceback" not in done.output and not (tmp_path / "s.jsonl").exists()
