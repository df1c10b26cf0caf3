"""Tiny random Llama models and a toy byte-level tokenizer, built in memory and saved
to a folder so the real loading code runs. No hub, a second or two to build.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
CORPUS = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Speculative decoding lets a small draft model propose tokens for a large target.",
    "def add(a, b):\n    return a + b\n",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u2014 \u65e5\u672c\u8a9e \U0001f600 emoji",
    "SELECT name FROM users WHERE age > 30;",
]


def build_tokenizer(vocab_size: int = 320):
    """A byte-level BPE tokenizer: multi-byte characters span several tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(CORPUS * 4, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>",
                                        bos_token="<|endoftext|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(vocab_size: int, layers: int = 2, hidden: int = 64, seed: int = 0,
                eos_token_id: int = 2):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, eos_token_id=eos_token_id,
                         bos_token_id=0, pad_token_id=0, tie_word_embeddings=False,
                         initializer_range=0.3)
    # a wide init gives varied greedy text with clear argmax margins (the default
    # init and tied embeddings collapse into repeating one token)
    return LlamaForCausalLM(config).eval()


def save_tiny(folder: Path, tokenizer, layers: int, hidden: int, seed: int) -> Path:
    model = build_model(len(tokenizer), layers, hidden, seed,
                        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_truncated(target_folder: Path, folder: Path, layers: int = 1) -> Path:
    """The target cut to its first `layers` layers: a draft that agrees only partly."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(target_folder)
    model.model.layers = model.model.layers[:layers]
    model.config.num_hidden_layers = layers
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(target_folder).save_pretrained(folder)
    return folder


def write_models_toml(root: Path) -> Path:
    """Tiny target, a truncated-copy draft, and pairs over them; returns the toml path."""
    tokenizer = build_tokenizer()
    target = save_tiny(root / "target", tokenizer, layers=2, hidden=64, seed=1)
    draft = save_truncated(target, root / "draft")
    toml = root / "models.toml"
    toml.write_text(f'''default = "tiny"

[pairs.tiny]
target = "{target}"
draft = "{draft}"
k = 3
dtype = "float32"

[pairs.tiny-self]
target = "{target}"
draft = "{target}"
k = 4
dtype = "float32"

[pairs.tiny-ngram]
target = "{target}"
draft = "ngram"
k = 4
dtype = "float32"

[pairs.tiny-plain]
target = "{target}"
k = 0
dtype = "float32"
''')
    return toml


CONTROL_WORDS = ["\x1b]0;PWNED\x07", "\x1b[2J", "\x1b[31m", "\x9b1;1H", "\x07", "\x1b",
                 "\x9d8;;x\x9c", "\r", "\x7f", " ok", " go", "\n", "\t"]
"""A vocabulary of terminal escapes (OSC title, CSI clear screen and colour, a C1 CSI and OSC,
BEL, ESC, CR, DEL) and a few words: whatever a model over it writes carries them."""


def build_control_tokenizer():
    """A word-level tokenizer whose tokens are CONTROL_WORDS, decoded by joining them as
    they are (no spaces added)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {word: n for n, word in enumerate(SPECIALS + ["<unk>"] + CONTROL_WORDS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    alternatives = "|".join(sorted((w.replace("[", r"\[") for w in CONTROL_WORDS), key=len,
                                   reverse=True))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(alternatives), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>",
                                        bos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                        unk_token="<unk>")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def write_control_pair(root: Path, seed: int = 3) -> Path:
    """models.toml with the pair `controls`: a tiny random target over CONTROL_WORDS and its
    one-layer copy as the draft (greedy, k = 3), whose answers and rejected drafts are
    terminal escapes; returns the toml path."""
    target = save_tiny(root / "target", build_control_tokenizer(), layers=2, hidden=64, seed=seed)
    draft = save_truncated(target, root / "draft")
    toml = root / "models.toml"
    toml.write_text(f'default = "controls"\n\n[pairs.controls]\ntarget = "{target}"\n'
                    f'draft = "{draft}"\nk = 3\ntemperature = 0.0\ndtype = "float32"\n')
    return toml
