"""Build a tiny Llama model and BPE tokenizer on disk, at test time, with no download.

The recipe (docs/architecture.md, "E2E harness"): `LlamaConfig(vocab_size=512,
hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
num_key_value_heads=1)`, random weights from a fixed seed, saved with `save_pretrained`, plus
a byte-level BPE tokenizer trained with `tokenizers`.
head_dim is 64, which vLLM's CPU attention backend accepts (it needs head_dim >= 32).

Needs torch, transformers and tokenizers (the e2e environment); imported lazily so that the light
dev environment can still collect the tests that skip.
"""

from __future__ import annotations

import json
from pathlib import Path

VOCAB_SIZE = 512
MAX_MODEL_LEN_TOKENS = 2048

# Training text for the tokenizer: varied enough that typical English prompts encode into many
# short tokens, so that a few sentences span several 32-token KV cache blocks.
_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A KV cache block holds the keys and values of thirty-two tokens.",
    "Prefill computes the prompt; decode produces one token at a time.",
    "The scheduler decides which requests run in the next step.",
    "Offloading moves finished blocks from the device to host memory.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20.",
    "Ascend NPUs and CPUs both run this tiny model for tests.",
    "Once upon a time there was a small language model with two layers.",
]


def build_tiny_llama(dst: Path, *, seed: int = 0, initializer_range: float = 0.02) -> Path:
    """Write a tiny Llama checkpoint and its tokenizer into `dst` and return `dst`.

    Args:
        dst: target folder (created if missing).
        seed: torch seed for the random weights; the same seed gives the same model.
        initializer_range: std of the weight init (transformers' `initializer_range`).

    Returns:
        `dst`, loadable by `transformers` and by `vllm.LLM(model=str(dst))`.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    dst.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=MAX_MODEL_LEN_TOKENS,
    )
    tokenizer.save_pretrained(dst)

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=MAX_MODEL_LEN_TOKENS,
        initializer_range=initializer_range,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model = model.bfloat16()  # saved as bf16, the dtype the tests serve
    model.save_pretrained(dst, safe_serialization=True)
    # A marker so that a cached folder is reused only when complete.
    (dst / "vam_tiny_model.json").write_text(json.dumps({"seed": seed}), encoding="utf-8")
    return dst
