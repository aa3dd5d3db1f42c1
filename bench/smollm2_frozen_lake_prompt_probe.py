"""What SmolLM2-135M-Instruct answers on FrozenLake before any training, per instruction.

For each instruction variant (the env's, `operators/envs/src/frozen_lake/render.rs`, three
rewrites of its example, and ROLL's one-action answer) and each board text (RAGEN's
coordinates, `observation_format: Coord`, then the same with the goal's offset and the four
neighbouring tiles in words, `CoordRelative`), on 48 boards of the validation distribution,
from the start: the probability mass of the four action tokens right after `<answer>`, the
argmax action on each board and how often it is a shortest path's first move, the share of
the action mass on such moves (0.35 for a uniform choice on these boards), and one sampled
reply per board (the pipelines' sampling: temperature 0.99, top-k 100, top-p 0.99): how many
are valid answers, how many distinct, how many reach the goal. An RL run can only sharpen a
board-dependent preference this shows; in every variant that gives the actions any mass the
argmax is the example's first action on every board, whatever the board text says
(bench/history/smollm2.md, 2026-12-05 19:31 and 22:21).

Run by hand (not in CI) with the peer venv (torch, transformers, gguf, accelerate):
    python3 bench/smollm2_frozen_lake_prompt_probe.py models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import collections
import itertools
import os
import random
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smollm2_frozen_lake_supervised_probe as probe  # noqa: E402  (boards, prompt, parse)

EXAMPLE = "for example <answer>Left || Up</answer>"
VARIANTS = {
    "the env's": probe.INSTRUCTION,
    "placeholder": probe.INSTRUCTION.replace(EXAMPLE, "as <answer>action || action</answer>"),
    "three examples": probe.INSTRUCTION.replace(
        EXAMPLE,
        "for example <answer>Down</answer>, <answer>Right || Up</answer> or "
        "<answer>Up || Left || Left</answer>",
    ),
    "no example": probe.INSTRUCTION.replace(", " + EXAMPLE, " inside <answer>...</answer>"),
    # ROLL's FrozenLake answer (`env_instruction`: one action a turn, "<answer>Right</answer>").
    "ROLL's one action": probe.INSTRUCTION.replace(
        "Answer with up to 5 actions separated by ||, " + EXAMPLE,
        "The answer must be one action, for example <answer>Right</answer>",
    ),
}


BOARD_TEXTS = {  # the env's `observation_format: Coord`, then `CoordRelative`
    "coordinates": False,
    "coordinates + offset + neighbours": True,
}
ACTIONS = ["Left", "Down", "Right", "Up"]


def reaches_goal(board, actions):
    pos = board.start
    for a in actions:
        pos = board.move(pos, a)
        if pos == board.goal or pos in board.holes:
            break
    return pos == board.goal


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--boards", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    directory, name = os.path.dirname(os.path.abspath(args.gguf)), os.path.basename(args.gguf)
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32).eval()
    rng = random.Random(10000)
    boards = [probe.Board(rng) for _ in range(args.boards)]
    ids = [tok(a, add_special_tokens=False)["input_ids"][0] for a in ACTIONS]
    for (label, instruction), (text_label, relative) in itertools.product(VARIANTS.items(), BOARD_TEXTS.items()):
        probe.INSTRUCTION, probe.RELATIVE = instruction, relative
        batch = tok([probe.prompt(tok, b, b.start) for b in boards], return_tensors="pt",
                    padding=True, add_special_tokens=False)
        probs = model(**batch).logits[:, -1].softmax(-1)[:, ids]
        argmax = [ACTIONS[int(i)] for i in probs.argmax(-1)]
        first_moves = [[b.dist.get(b.move(b.start, a), 99) < b.dist[b.start] for a in ACTIONS] for b in boards]
        toward = sum(moves[ACTIONS.index(a)] for moves, a in zip(first_moves, argmax))
        toward_mass = float((probs * torch.tensor(first_moves)).sum(-1).div(probs.sum(-1)).mean())
        out = model.generate(**batch, max_new_tokens=16, do_sample=True, temperature=0.99, top_k=100,
                             top_p=0.99, pad_token_id=tok.pad_token_id)
        replies = tok.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        valid = [probe.parse(r) for r in replies]
        answers = [tuple(v) for v in valid if v]
        wins = sum(reaches_goal(b, v) for b, v in zip(boards, valid) if v)
        print(f"{label}, {text_label}: action mass {float(probs.sum(-1).mean()):.2f}, argmax "
              f"{dict(collections.Counter(argmax))}, argmax a shortest path's first move on {toward}/{len(boards)}, "
              f"of the action mass {toward_mass:.2f} on such moves, sampled valid {len(answers)}/{len(boards)}, "
              f"distinct {len(set(answers))}, reach the goal {wins}", flush=True)

if __name__ == "__main__":
    main()
