"""How many labelled states the Tiny Qwen2 needs to play FrozenLake well: an upper bound on
what reinforcement learning can do with the same model and the same number of samples.

The same model, prompts and validation as bench/frozen_lake_pg_reference.py, but trained
by supervised learning: each sample is a random map and a random cell from which the goal
can be reached, labelled with a shortest-path action (breadth-first search from the goal);
cross-entropy over the four action tokens, AdamW, batches of 256 fresh samples. Greedy
validation on the 64 fixed maps every 50 steps. RL sees fewer useful labels per episode
(a sampled action and a noisy advantage), so it cannot need fewer samples than this.

`--history K` puts up to K earlier turns (a random walk that ends at the labelled cell)
before the grid, each as the engine's trajectory-wise chats have it (the grid, then the
answer), and validation plays whole chats: what a StarPO policy reads, where the step-wise
prompts (no history) are what GiGPO's `Step(history: 0)` reads.

Run by hand (not in CI), e.g. the settings quoted in bench/README.md:
    python3 bench/frozen_lake_supervised_probe.py --steps 400
    python3 bench/frozen_lake_supervised_probe.py --steps 300 --layers 4
    python3 bench/frozen_lake_supervised_probe.py --steps 1000 --heads 8 --theta 3 --val-maps 256
    python3 bench/frozen_lake_supervised_probe.py --steps 300 --heads 8 --theta 10 --head-dim 16 --val-maps 256
    python3 bench/frozen_lake_supervised_probe.py --steps 150 --heads 8 --theta 10 --val-maps 256 --history 7
"""
import argparse
import random
import time
from collections import deque

import torch

import frozen_lake_pg_reference as ref

N = ref.N


def shortest_path_action(tiles, player):
    """An action that starts a shortest path to the goal, or None if there is no path."""
    goal = tiles.index("G")
    distance, queue = {goal: 0}, deque([goal])
    while queue:
        cell = queue.popleft()
        r, c = divmod(cell, N)
        for dr, dc in ref.ACTIONS:
            n = (r + dr) * N + c + dc
            if 0 <= r + dr < N and 0 <= c + dc < N and n not in distance and tiles[n] != "O":
                distance[n] = distance[cell] + 1
                queue.append(n)
    r, c = divmod(player, N)
    moves = [(distance[(r + dr) * N + c + dc], a) for a, (dr, dc) in enumerate(ref.ACTIONS)
             if 0 <= r + dr < N and 0 <= c + dc < N and (r + dr) * N + c + dc in distance]
    return min(moves)[1] if moves else None


ANSWER_END = 14


def chat(tiles, turns, player):
    """The multi-turn chat of a trajectory-wise sample: each earlier turn's grid and
    answer, then the current grid (`turns` is a list of (position, action))."""
    tokens = []
    for pos, a in turns:
        tokens += ref.prompt(tiles, pos) + [ref.ACTION_TOKEN + a, ANSWER_END, ref.IM_END, ref.NEWLINE]
    return tokens + ref.prompt(tiles, player)


def random_history(rng, tiles, player, k):
    """k earlier moves that ended at `player` (a random walk backwards over safe cells)."""
    turns, pos = [], player
    for _ in range(k):
        options = []
        for a, (dr, dc) in enumerate(ref.ACTIONS):
            r, c = divmod(pos, N)
            pr, pc = r - dr, c - dc
            if 0 <= pr < N and 0 <= pc < N and tiles[pr * N + pc] == "_":
                options.append((pr * N + pc, a))
        if not options:
            break
        pos, a = rng.choice(options)
        turns.append((pos, a))
    return list(reversed(turns))


def labelled_batch(rng, size, history=0):
    prompts, labels = [], []
    while len(prompts) < size:
        tiles, _ = ref.random_map(rng)
        player = rng.choice([i for i in range(N * N) if tiles[i] == "_"])
        action = shortest_path_action(tiles, player)
        if action is not None:
            turns = random_history(rng, tiles, player, rng.randint(0, history)) if history else []
            prompts.append(chat(tiles, turns, player))
            labels.append(action)
    return prompts, torch.tensor(labels)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--theta", type=float, default=10000.0, help="rope_theta")
    ap.add_argument("--head-dim", type=int, default=None, help="Qwen2 head_dim (default dim / heads)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the initial weights")
    ap.add_argument("--val-maps", type=int, default=64)
    ap.add_argument("--window", type=int, default=None,
                    help="Qwen2 sliding-window attention in every layer, this many keys")
    ap.add_argument("--history", type=int, default=0,
                    help="up to this many earlier turns in each prompt (trajectory-wise chats)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = ref.tiny_model(args.layers, args.dim, args.heads, args.theta, args.head_dim, args.window)
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr)
    rng, val_rng = random.Random(0), random.Random(10000)
    val_maps = [ref.random_map(val_rng) for _ in range(args.val_maps)]
    start = time.time()
    for it in range(1, args.steps + 1):
        prompts, labels = labelled_batch(rng, args.batch, args.history)
        loss = torch.nn.functional.cross_entropy(ref.action_logits(model, prompts), labels)
        optim.zero_grad()
        loss.backward()
        optim.step()
        if it % 50 == 0:
            _, val_returns = ref.play(model, val_maps, greedy=True, prompt_of=chat if args.history else None)
            print(f"step {it} labelled_states {it * args.batch} loss {loss.item():.3f} "
                  f"val_success {sum(val_returns) / len(val_maps):.3f} wall {time.time() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
