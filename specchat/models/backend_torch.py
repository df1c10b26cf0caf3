"""The torch backend object: transformers weights loaded in a dtype on a device (spread by
accelerate, quantized by bitsandbytes), adapted to the engine by the forward adapter.py
chooses, and everything the loader asks of them (EOS, context, vocabulary, label).

Where the target's layers go is models/device's plan (`plan_for`), the model itself
models/weights.py's `load_model`; a `specchat distill` draft brings its reduced vocabulary
and int8 weights (draft_loader.distill_facts). A draft with a tokenizer of its own brings it
(models/vocabulary.py decides).
"""

from __future__ import annotations

from specchat.models.backend import LoadedModel, LoadRequest
from specchat.models.config.refs import ModelRef
from specchat.models.device.hardware import dtype_name
from specchat.models.device.memory import check_draft_size, main_device, plan_for
from specchat.models.device.placement import layer_summary
from specchat.models.torch_backend.adapter import TorchForward, torch_adapter


class TorchBackend:
    """transformers models on torch (models/backend.py's `ModelBackend`)."""

    name = "torch"

    def device(self, device: str, device_why: str, gpu: str | None) -> tuple[str, str]:
        return device, device_why

    def load_target(self, ref: ModelRef, request: LoadRequest) -> LoadedModel:
        from specchat.models.draft_loader import draft_folder
        from specchat.models.weights import eos_token_ids, load_model, model_folder

        pair, progress = request.pair, request.progress
        folder = model_folder(ref, progress)
        check_draft_size(pair, folder, draft_folder(pair, progress))
        placement = plan_for(pair, folder, request.dtype)
        model, tokenizer = load_model(ref, request.dtype, placement.device, pair.quantization,
                                      progress, placement)
        device = main_device(model, placement.device)
        spread = placement.device_map is not None
        return LoadedModel(
            model, head_rows(model), tokenizer, frozenset(eos_token_ids(model, tokenizer)),
            int(getattr(model.config, "max_position_embeddings", 2048) or 2048), device,
            placement.why or request.device_why, dtype_name(request.dtype), request.dtype_why,
            layer_summary(getattr(model, "hf_device_map", None), device),
            options={"quantized": pair.quantization != "none" or spread})

    def load_draft(self, ref: ModelRef, request: LoadRequest, target: LoadedModel) -> LoadedModel:
        from specchat.models.draft_loader import distill_facts
        from specchat.models.vocabulary import own_tokenizer
        from specchat.models.weights import load_model, model_folder

        quantization = request.pair.draft_quantization
        model, tokenizer = load_model(ref, request.dtype, target.device, quantization,
                                      request.progress)
        vocab, int8 = distill_facts(model_folder(ref, request.progress))
        return LoadedModel(model, head_rows(model), own_tokenizer(target.tokenizer, tokenizer),
                           device=target.device,
                           weights=dtype_name(request.dtype), weights_why=request.dtype_why,
                           options={"head_ids": vocab, "int8": int8,
                                    "quantized": quantization != "none"})

    def load_head(self, path, request: LoadRequest, target: LoadedModel) -> LoadedModel:
        """A draft head (models/head/) beside this target, in its dtype on its device."""
        from specchat.models.head_backends import loaded_head, torch_head

        runtime, head = torch_head(path, request.pair.name, target.raw, target.device,
                                   request.dtype)
        return loaded_head(runtime, head, target, dtype_name(request.dtype))

    def engine_model(self, loaded: LoadedModel, vocab_size: int, request: LoadRequest):
        return torch_adapter(loaded.raw, loaded.device, vocab_size,
                             how=TorchForward.of(request.pair), **loaded.options)


def head_rows(model) -> int:
    """Rows of a transformers model's output matrix (its logit columns)."""
    return int(model.get_output_embeddings().weight.shape[0])
