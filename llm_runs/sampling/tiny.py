"""A tiny random Llama and a character-level tokenizer, built locally (nothing is downloaded).

For tests, benchmarks and smoke runs of the real entry point: ``make_tiny_model(path)`` writes a
Hugging Face folder that ``--model path`` loads like any other model. Every printable ASCII
character is one token, so any problem text round-trips; a chat template wraps messages in
``<|role|> ... </s>``.
"""

from __future__ import annotations

import string
from pathlib import Path

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def make_tokenizer(vocab_size: int = 256):
    """A character-level ``PreTrainedTokenizerFast`` with ``vocab_size`` entries (padded with fillers)."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    chars = [c for c in string.printable if c not in ("\x0b", "\x0c")]
    tokens = SPECIALS + chars
    if vocab_size < len(tokens):
        raise ValueError(f"vocab_size must be >= {len(tokens)}")
    tokens += [f"<extra_{i}>" for i in range(vocab_size - len(tokens))]
    vocab = {t: i for i, t in enumerate(tokens)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    core.add_special_tokens(SPECIALS)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def make_tiny_model(path: str | Path, seed: int = 0, vocab_size: int = 256, hidden_size: int = 32,
                    num_layers: int = 2, num_heads: int = 4) -> Path:
    """Write a randomly initialised tiny Llama and its tokenizer to ``path``; return the path."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = make_tokenizer(vocab_size)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_heads,
        max_position_embeddings=2048, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, tie_word_embeddings=True,  # tied, as SmolLM2 and Qwen3
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    path = Path(path)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
