"""specchat's own GGUF header reader (models/gguf/header.py) against gguf's `GGUFReader`: the
same tensors (names, shapes, types, sizes) and the same model shape (`gguf_shape`: what the
int8 backend's kernel choice and `pairs --check` read). gguf's reader parsed every token
string of the vocabulary for that and took 5.4-5.8 s of every load of the Qwen2.5-Coder
1.5B target (2026-11-29); the header reader takes 0.09 s. A damaged tensor info is named,
never followed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specchat.errors import DamagedWeights
from specchat.models.gguf.shape import gguf_shape
from specchat.models.gguf.header import leading_metadata, read_header, read_metadata

VOCAB = 5000


def write_file(path: Path, alignment: int = 0) -> Path:
    """A small llama-shaped GGUF: float32, float16 and q8_0 tensors, a token list first;
    its data aligned to `alignment` bytes where given (else GGUF's default, 32)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment:
        writer.add_custom_alignment(alignment)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"tok{i}" for i in range(VOCAB)])
    writer.add_context_length(2048)
    writer.add_block_count(2)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_size_label("tiny")
    rng = np.random.default_rng(0)
    writer.add_tensor("token_embd.weight", rng.standard_normal((100, 64), dtype=np.float32))
    for layer in range(2):
        writer.add_tensor(f"blk.{layer}.attn_norm.weight", np.ones(64, dtype=np.float32))
        writer.add_tensor(f"blk.{layer}.attn_q.weight",
                          rng.standard_normal((64, 64)).astype(np.float16))
        quantized = gguf.quantize(rng.standard_normal((32, 64), dtype=np.float32),
                                  gguf.GGMLQuantizationType.Q8_0)
        writer.add_tensor(f"blk.{layer}.ffn_up.weight", quantized,
                          raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def as_gguf_reads_them(path: Path) -> list[tuple]:
    import gguf

    return [(t.name, tuple(int(d) for d in t.shape), int(t.tensor_type), int(t.n_elements),
             int(t.n_bytes)) for t in gguf.GGUFReader(str(path)).tensors]


def as_header_reads_them(path: Path) -> list[tuple]:
    return [(t.name, t.shape, t.kind, t.elements, t.stored_bytes) for t in read_header(path).tensors]


@pytest.fixture
def small(tmp_path) -> Path:
    return write_file(tmp_path / "small.gguf")


def test_the_header_reader_lists_the_tensors_gguf_itself_reads(small):
    found = as_header_reads_them(small)
    assert len(found) == 7 and {kind for _, _, kind, _, _ in found} == {0, 1, 8}  # f32, f16, q8_0
    assert found == as_gguf_reads_them(small)


def test_the_packaged_models_tensors_read_as_gguf_reads_them():
    from specchat.models.config.refs import builtin_gguf

    path = Path(builtin_gguf("smollm2-135m-instruct"))
    assert as_header_reads_them(path) == as_gguf_reads_them(path)  # Q4_1, Q8_0 and f32


def test_the_model_shape_counts_what_gguf_reads(small):
    shape = gguf_shape(small)
    tensors = as_gguf_reads_them(small)
    blocks = [t for t in tensors if t[0].startswith("blk.") and "norm" not in t[0]]
    assert shape is not None
    assert shape.size.parameters == sum(t[3] for t in tensors)
    assert shape.size.linear == sum(t[3] for t in blocks)
    assert shape.size.stored_bytes == sum(t[4] for t in tensors)
    assert (shape.context_length, shape.claimed_label) == (2048, "tiny")


def test_a_tensor_info_with_too_many_dimensions_is_named_and_the_shape_unknown(small):
    data = bytearray(small.read_bytes())
    name = b"blk.0.attn_q.weight"
    at = data.index(len(name).to_bytes(8, "little") + name) + 8 + len(name)
    data[at:at + 4] = (9).to_bytes(4, "little")  # its dimension count
    small.write_bytes(bytes(data))
    with pytest.raises(DamagedWeights, match="tensor blk.0.attn_q.weight 9 dimensions"):
        read_header(small)
    assert read_metadata(small)["general.size_label"] == b"tiny"  # the metadata still reads
    assert gguf_shape(small) is None


@pytest.mark.parametrize("alignment", [0, 256])
def test_each_tensors_data_starts_where_gguf_reads_it_and_a_whole_file_needs_its_size(
        tmp_path, alignment):
    import gguf

    path = write_file(tmp_path / "aligned.gguf", alignment)
    header = read_header(path)
    starts = [header.data_start + t.offset for t in header.tensors]
    assert starts == [int(t.data_offset) for t in gguf.GGUFReader(str(path)).tensors]
    assert header.data_start % (alignment or 32) == 0
    padding = path.stat().st_size - header.needed_bytes  # the writer pads the last tensor too
    assert 0 <= padding < (alignment or 32)


def test_the_packaged_model_needs_exactly_its_own_size():
    from specchat.models.config.refs import builtin_gguf

    path = Path(builtin_gguf("smollm2-135m-instruct"))
    assert read_header(path).needed_bytes == path.stat().st_size


def test_leading_metadata_is_what_comes_before_the_tokenizer_as_text(small, tmp_path):
    assert read_metadata(small)["llama.context_length"] == 2048  # written after the tokens
    assert leading_metadata(small) == {"general.architecture": "llama"}
    text = tmp_path / "notes.gguf"
    text.write_text("not a model, just text renamed to .gguf\n")
    assert leading_metadata(text) == {} and leading_metadata(tmp_path / "absent.gguf") == {}
