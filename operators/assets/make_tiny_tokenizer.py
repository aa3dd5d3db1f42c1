"""Makes tiny_tokenizer.json: the Tiny preset's built-in tokenizer (dev-time script, not run by CI).

A byte-level BPE like Qwen2's (same pre-tokenizer regex, ByteLevel bytes, NFC normalizer), trained
on texts shaped like the environments' prompts and answers (FrozenLake/Sokoban grids with
P _ O G X √ # S, action words, <answer>/<think> tags, digits), with Qwen's ChatML special tokens.
Byte-level means every UTF-8 text still encodes. Run: python make_tiny_tokenizer.py
"""
import json
import random

from tokenizers import Tokenizer, Regex, models, normalizers, pre_tokenizers, decoders, trainers
from tokenizers import processors, AddedToken

QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAGS = ["<think>", "</think>", "<answer>", "</answer>"]
VOCAB_SIZE = 512


def corpus(rng):
    actions = ["Left", "Down", "Right", "Up", "left", "down", "right", "up", "Phoenix", "Dragon"]
    words = (
        "You are playing FrozenLake Sokoban . Reach the goal G without falling into a hole O . "
        "Push every box X onto a target O . The player is P . Walls are # . Your answer must be "
        "one action , for example <answer>Left</answer> . Think step by step inside <think> "
        "</think> then answer . Valid actions : Left, Down, Right, Up . Reward : 1 . "
        "The answer is correct . Unfortunately your answer is wrong . Let's try again . "
        "Congratulations! You are correct! What is 12 + 7 ? Compute 3 * 4 - 5 = 7 . "
        "Turn 1 : State : Action : You chose which arm to pull ? Phoenix || Dragon"
    ).split()
    for _ in range(4000):
        size = rng.choice([4, 6, 8])
        grid = "\n".join(
            "".join(rng.choice("P_OGX√#S_") for _ in range(size)) for _ in range(size)
        )
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(4, 16)))
        act = rng.choice(actions)
        num = str(rng.randint(0, 999))
        yield f"{sentence}\n{grid}\n<think>{sentence}</think><answer>{act}</answer> {num}"


def main():
    rng = random.Random(0)
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(rng), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAGS])
    tok.save("tiny_tokenizer.json")
    text = "<|im_start|>user\nP_O\n√#S<|im_end|>\n<think>go</think><answer>Left</answer>"
    ids = tok.encode(text).ids
    assert tok.decode(ids, skip_special_tokens=False) == text
    print("vocab", tok.get_vocab_size(), "tokens for sample", len(ids))


if __name__ == "__main__":
    main()
