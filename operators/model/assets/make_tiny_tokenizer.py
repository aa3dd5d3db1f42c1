"""Makes tiny_tokenizer.json: the Tiny preset's built-in tokenizer (dev-time script, not run by CI).

A byte-level BPE like Qwen2's (same pre-tokenizer regex, ByteLevel bytes, NFC normalizer), trained
on texts shaped like the environments' prompts and answers (FrozenLake/Sokoban grids with
P _ O G X √ # S, action words, <answer>/<think> tags, digits), with Qwen's ChatML special tokens.
Byte-level means every UTF-8 text still encodes. Run: python make_tiny_tokenizer.py

Grid cells stay one token each. A small model trained from scratch reads a board far more easily
when every cell (and every line break) is exactly one token at a regular position, so the trained
merges are filtered: a merge is dropped when its result holds `_`, `#` or a newline, or when it
glues grid symbols together (two or more of them, or a symbol and a piece of `√`). `√`'s own
byte merges stay, so `√` is one token. A merge whose parts were dropped is dropped too, and
training asks for more merges than fit, so the vocabulary keeps its size: ids 0-2 are the
ChatML specials, then the 256 byte symbols, then the kept merges up to id 511, then the four
tags at 512-515. Action words are frequent enough in the corpus to be single tokens.
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
# Cell symbols of FrozenLake and Sokoban (both Sokoban vocabularies) and the row separator.
GRID = "P_OGX√#S" + "W.CBA@" + "\n"
NEVER_MERGED = b"_#\n"
ACTIONS = ["Left", "Down", "Right", "Up", "left", "down", "right", "up"]


def byte_decoder():
    """Byte-level BPE's printable stand-in character -> the byte it stands for."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes)}


BYTES = byte_decoder()


def to_bytes(token):
    return bytes(BYTES[c] for c in token)


def grid_units(piece, first=True):
    """How many grid cells (or cut pieces of one) the bytes `piece` span if they can occur
    inside grid text; None if they cannot."""
    if not piece:
        return 0
    symbols = [s.encode() for s in GRID]
    heads = [s[k:] for s in symbols for k in range(1, len(s))] if first else []
    for unit in symbols + heads:
        if piece.startswith(unit):
            rest = grid_units(piece[len(unit):], first=False)
            if rest is not None:
                return rest + 1
    if any(s.startswith(piece) for s in symbols):
        return 1
    return None


def keep_merge(result):
    piece = to_bytes(result)
    if any(b in piece for b in NEVER_MERGED):
        return False
    units = grid_units(piece)
    return units is None or units < 2


def corpus(rng):
    words = (
        "You are playing FrozenLake Sokoban . Reach the goal G without falling into a hole O . "
        "Push every box X onto a target O . The player is P . Walls are # . Your answer must be "
        "one action , for example <answer>Left</answer> . Think step by step inside <think> "
        "</think> then answer . Valid actions : Left, Down, Right, Up . Reward : 1 . "
        "The answer is correct . Unfortunately your answer is wrong . Let's try again . "
        "Congratulations! You are correct! What is 12 + 7 ? Compute 3 * 4 - 5 = 7 . "
        "Turn 1 : State : Action : You chose which arm to pull ? Phoenix || Dragon "
        # The environments' instructions.
        "You are solving the puzzle . Walk from your position to the goal over frozen tiles "
        "without falling into a hole . The ice is slippery : Symbols : you , frozen tile , "
        "goal , you in a hole , you on the goal . Actions : Reward : 1 for reaching the goal . "
        "Answer with up to 3 actions separated by || , for example . You may think first "
        "inside . Push every box onto a target . You push a box by walking into it ; you "
        "cannot pull boxes or push two at once . wall , floor , target , box , box on target , "
        "you on a target . Rewards : -0.1 per step , +1 for a box onto a target , -1 for a box "
        "off a target , +10 when all boxes are on targets ."
    ).split()
    actions = ACTIONS + ["Phoenix", "Dragon"]
    for _ in range(4000):
        size = rng.choice([4, 6, 8])
        grid = "\n".join(
            "".join(rng.choice("P_OGX√#S_") for _ in range(size)) for _ in range(size)
        )
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(4, 16)))
        act = rng.choice(actions)
        num = str(rng.randint(0, 999))
        moves = " ".join(rng.choice(ACTIONS) for _ in range(6))
        yield (f"{sentence}\n{grid}\n<think>{moves} {sentence}</think>"
               f"<answer>{act}</answer> {num}")


def filtered(trained):
    """The trained BPE's vocabulary and merges without the merges that join grid cells."""
    model = json.loads(trained.to_str())["model"]
    by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for token, _ in by_id[: len(SPECIAL) + 256]:
        vocab[token] = len(vocab)
    merges = []
    for pair in model["merges"]:
        a, b = pair if isinstance(pair, list) else pair.split(" ")
        if len(vocab) == VOCAB_SIZE:
            break
        if a in vocab and b in vocab and keep_merge(a + b) and a + b not in vocab:
            vocab[a + b] = len(vocab)
            merges.append((a, b))
    assert len(vocab) == VOCAB_SIZE, f"only {len(vocab)} tokens; train more merges"
    return vocab, merges


def main():
    rng = random.Random(0)
    split = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trained = Tokenizer(models.BPE())
    trained.normalizer = normalizers.NFC()
    trained.pre_tokenizer = split
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE + 256,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    trained.train_from_iterator(corpus(rng), trainer=trainer)
    vocab, merges = filtered(trained)

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = split
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAGS])
    check(tok, rng)
    tok.save("tiny_tokenizer.json")
    print("vocab", tok.get_vocab_size(), "merges", len(merges))


def check(tok, rng):
    assert tok.get_vocab_size() == VOCAB_SIZE + len(TAGS)
    assert [tok.token_to_id(t) for t in SPECIAL] == [0, 1, 2]
    assert [tok.token_to_id(t) for t in TAGS] == list(range(VOCAB_SIZE, VOCAB_SIZE + 4))
    text = "<|im_start|>user\nP_O\n√#S<|im_end|>\n<think>go</think><answer>Left</answer>"
    assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text
    for _ in range(2000):
        rows, cols = rng.randint(1, 9), rng.randint(1, 9)
        symbols = rng.choice(["P_OGX√", "#_OX√PS", "W.GCBA@"])
        grid = "\n".join("".join(rng.choice(symbols) for _ in range(cols)) for _ in range(rows))
        for text in [grid, f"State:\n{grid}\n", f"Turn 2: {grid}"]:
            ids = tok.encode(text).ids
            assert tok.decode(ids) == text
        ids = tok.encode(grid).ids
        assert len(ids) == len(grid), (grid, tok.encode(grid).tokens)
    for word in ACTIONS:
        tokens = tok.encode(word).tokens
        assert len(tokens) == 1, (word, tokens)


if __name__ == "__main__":
    main()
