"""Can SmolLM2-135M-Instruct learn to read a FrozenLake board at all in an hour of this CPU?
An upper bound for the RL runs of `pipelines/smollm2_frozen_lake.ron` with coordinates.

The RL runs (bench/history/smollm2.md) move the greedy policy from one fixed answer to
another and never to one that depends on the board. This probe asks whether the model can
learn the board-dependent answer when it is simply told it: supervised fine-tuning of every
weight (AdamW, the RL recipe's lr 3e-5 by default) on prompts as the pipeline writes them
(the env's instruction as the system message, RAGEN's coordinate observation as the user
message, the reply opening with `<answer>`), each labelled with a shortest path's first
actions (up to 5, breadth-first search from the goal around the holes). Cross-entropy over
the label and `</answer><|im_end|>` only. RL sees fewer useful labels per episode (a
sampled answer and a noisy advantage), so it cannot learn faster than this from as many
samples on the same machine.

Maps as the engine draws them (`operators/envs/src/frozen_lake/map.rs`: tiles frozen with
probability p, start and goal two distinct uniform cells, redrawn until a path joins them)
from Python's generator: not the engine's validation maps, the same distribution. Training
states are the start (half the samples) or any other cell the goal can be reached from.
Validation plays 64 fixed maps greedily from the start for up to 5 turns; each turn is a
fresh chat (the current state only, as GiGPO's `Step(history: 0)` prompts; the pipeline's
trajectory-wise chats also show earlier turns), so step 0 is the pretrained baseline of
this protocol, not of the pipeline's.

`--relative` adds the env's `CoordRelative` lines (the goal's offset and the neighbouring
tiles in words) to each board text, for both training and validation.

Run by hand (not in CI), alone, with the peer venv (torch, transformers, gguf, accelerate):
    python3 bench/smollm2_frozen_lake_supervised_probe.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --minutes 40 --out /tmp/probe.jsonl
"""
import argparse
import json
import os
import random
import time
from collections import deque

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

# The env's instruction for `observation_format: Coord` and 5 actions a turn
# (`operators/envs/src/frozen_lake/render.rs`), byte for byte.
INSTRUCTION = (
    "You are solving the FrozenLake puzzle. Walk from your position to the goal over frozen "
    "tiles without falling into a hole.\n"
    "Positions are (row, col), zero-indexed from the top left: Down adds 1 to the row, Up "
    "subtracts 1, Right adds 1 to the column, Left subtracts 1.\n"
    "Actions: Left, Down, Right, Up. Reward: 1 for reaching the goal.\n"
    "Answer with up to 5 actions separated by ||, for example <answer>Left || Up</answer>. "
    "You may think first inside <think>...</think>."
)
MOVES = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}
SIZE, P, MAX_ACTIONS, MAX_TURNS = 4, 0.8, 5, 5
RELATIVE = False  # `--relative`: the board text of `observation_format: CoordRelative`


class Board:
    """A map: holes, start and goal as (row, col); the engine's generator's rules."""

    def __init__(self, rng):
        cells = SIZE * SIZE
        while True:
            frozen = [rng.random() < P for _ in range(cells)]
            start = rng.randrange(cells)
            goal = rng.randrange(cells)
            while goal == start:
                goal = rng.randrange(cells)
            frozen[start] = frozen[goal] = True
            self.holes = {divmod(i, SIZE) for i in range(cells) if not frozen[i]}
            self.start, self.goal = divmod(start, SIZE), divmod(goal, SIZE)
            self.dist = self._distances()
            if self.start in self.dist:
                return

    def _distances(self):
        """Steps to the goal from each cell that reaches it (breadth-first from the goal)."""
        dist, queue = {self.goal: 0}, deque([self.goal])
        while queue:
            r, c = queue.popleft()
            for dr, dc in MOVES.values():
                n = (r + dr, c + dc)
                if 0 <= n[0] < SIZE and 0 <= n[1] < SIZE and n not in self.holes and n not in dist:
                    dist[n] = dist[(r, c)] + 1
                    queue.append(n)
        return dist

    def move(self, pos, action):
        dr, dc = MOVES[action]
        return (min(max(pos[0] + dr, 0), SIZE - 1), min(max(pos[1] + dc, 0), SIZE - 1))

    def label(self, pos):
        """A shortest path's first actions from `pos` (ties in the order of MOVES)."""
        out = []
        while pos != self.goal and len(out) < MAX_ACTIONS:
            action = next(a for a in MOVES if self.dist.get(self.move(pos, a), 99) < self.dist[pos])
            out.append(action)
            pos = self.move(pos, action)
        return " || ".join(out)

    def observation(self, player):
        """RAGEN's coordinate render as `coordinate_text` writes it; with RELATIVE, the
        env's `CoordRelative` (`render.rs`: `goal_offset_text`, `neighbours_text`)."""
        pair = lambda rc: f"({rc[0]}, {rc[1]})"
        lines = [
            f"Board size: {SIZE} rows x {SIZE} cols (zero-indexed).",
            f"Start: {pair(self.start)}",
            f"Goal: {pair(self.goal)}",
            f"Player: {pair(player)}",
        ]
        if self.holes:
            lines.append("Holes: " + ", ".join(pair(h) for h in sorted(self.holes)))
        if RELATIVE:
            lines += [self.goal_offset(player), self.neighbours(player)]
        return "\n".join(lines)

    def goal_offset(self, player):
        """`The goal is 2 rows down and 1 column right.` (never asked on the goal)."""
        dr, dc = self.goal[0] - player[0], self.goal[1] - player[1]
        rows = f"{abs(dr)} row{'s' * (abs(dr) > 1)} {'down' if dr > 0 else 'up'}" if dr else ""
        cols = f"{abs(dc)} column{'s' * (abs(dc) > 1)} {'right' if dc > 0 else 'left'}" if dc else ""
        return "The goal is " + " and ".join(p for p in (rows, cols) if p) + "."

    def neighbours(self, player):
        """`Next to you: Left: wall, Down: frozen, Right: goal, Up: hole.` (`wall` where a
        move leaves the player in place)."""
        def tile(cell):
            if cell == player:
                return "wall"
            return "goal" if cell == self.goal else "hole" if cell in self.holes else "frozen"
        return "Next to you: " + ", ".join(f"{a}: {tile(self.move(player, a))}" for a in MOVES) + "."


def prompt(tok, board, player):
    chat = [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": board.observation(player)}]
    return tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) + "<answer>"


def parse(reply):
    """The actions of a reply that continues `<answer>`, or None for a format error."""
    if "</answer>" not in reply:
        return None
    actions = [a.strip() for a in reply.split("</answer>")[0].split("||")]
    if not 1 <= len(actions) <= MAX_ACTIONS or any(a not in MOVES for a in actions):
        return None
    return actions


@torch.no_grad()
def validate(model, tok, boards):
    """Greedy play from each start, up to MAX_TURNS fresh single-state chats."""
    model.eval()
    pos = [b.start for b in boards]
    done = [False] * len(boards)
    won = [False] * len(boards)
    format_errors = turns = 0
    for _ in range(MAX_TURNS):
        live = [i for i in range(len(boards)) if not done[i]]
        if not live:
            break
        batch = tok([prompt(tok, boards[i], pos[i]) for i in live], return_tensors="pt", padding=True,
                    add_special_tokens=False)
        out = model.generate(**batch, max_new_tokens=24, do_sample=False, pad_token_id=tok.pad_token_id)
        replies = tok.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        for i, reply in zip(live, replies):
            turns += 1
            actions = parse(reply)
            if actions is None:
                format_errors += 1
                continue
            for a in actions:
                pos[i] = boards[i].move(pos[i], a)
                if pos[i] == boards[i].goal or pos[i] in boards[i].holes:
                    done[i] = True
                    won[i] = pos[i] == boards[i].goal
                    break
    model.train()
    return sum(won) / len(boards), format_errors / max(turns, 1)


def training_batch(tok, rng, size):
    """Prompt + label token ids with the loss on the label and the end of the reply only."""
    ids, targets = [], []
    for _ in range(size):
        board = Board(rng)
        cells = [c for c in board.dist if c != board.goal]
        player = board.start if rng.random() < 0.5 else rng.choice(cells)
        head = tok(prompt(tok, board, player), add_special_tokens=False)["input_ids"]
        tail = tok(board.label(player) + "</answer><|im_end|>", add_special_tokens=False)["input_ids"]
        ids.append(head + tail)
        targets.append([-100] * len(head) + tail)
    width = max(len(x) for x in ids)
    pad = tok.pad_token_id
    input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids])
    labels = torch.tensor([t + [-100] * (width - len(t)) for t in targets])
    mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
    return input_ids, mask, labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--minutes", type=float, default=40.0, help="stop after this much training time")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--val-maps", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="JSON lines, one per evaluation")
    ap.add_argument("--relative", action="store_true",
                    help="the goal's offset and the neighbouring tiles after the coordinates")
    args = ap.parse_args()
    global RELATIVE
    RELATIVE = args.relative
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    directory, name = os.path.dirname(os.path.abspath(args.gguf)), os.path.basename(args.gguf)
    tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    val_rng, rng = random.Random(10000 + args.seed), random.Random(args.seed)
    boards = [Board(val_rng) for _ in range(args.val_maps)]
    out = open(args.out, "w") if args.out else None
    train_s, step, samples = 0.0, 0, 0
    while True:
        if step % args.eval_every == 0 or train_s >= args.minutes * 60:
            t = time.time()
            success, fmt = validate(model, tok, boards)
            row = {"step": step, "samples": samples, "train_min": round(train_s / 60, 2),
                   "val_success": success, "val_format_errors": round(fmt, 3),
                   "eval_s": round(time.time() - t, 1)}
            print(json.dumps(row), flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
            if train_s >= args.minutes * 60:
                break
        t = time.time()
        input_ids, mask, labels = training_batch(tok, rng, args.batch)
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        optim.zero_grad()
        train_s += time.time() - t
        step += 1
        samples += args.batch
        print(f"step {step} loss {loss.item():.4f} {time.time() - t:.1f}s", flush=True)


if __name__ == "__main__":
    main()
