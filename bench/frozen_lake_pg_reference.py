"""A PyTorch reference of the default learning problem, to separate "the algorithm needs
this many episodes" from "roll-flow runs them this fast".

The same task as pipelines/frozen_lake_*.ron: FrozenLake 4x4, tiles frozen with p = 0.8,
random start and goal, a path guaranteed, non-slippery, up to 8 turns, reward 1 at the
goal. The same policy: a Tiny Qwen2 (2 layers, width 64, 4 heads, tied embeddings) from
random weights, reading one token per grid cell and choosing one of four action tokens
(what `guide: Actions` does). Step-wise prompts with no history (the grid is the state).
Update: `--adv grpo` (default): group-normalised episode returns (GRPO/StarPO advantages,
mean/std within groups of `group_size` episodes on one map) on every step sample of the
episode; `--adv gigpo`: GiGPO, the episode return minus its group mean plus the step's
discounted return (gamma 0.95) minus the mean over the group's samples with the same
state (anchor state). Vanilla policy gradient (one update per batch has ratio 1, so PPO
clipping is inactive), AdamW. Validation: greedy on 64 fixed maps.

Run by hand (not in CI), e.g. the settings quoted in bench/README.md:
    python3 bench/frozen_lake_pg_reference.py --lr 1e-3 --groups 8 --mini-batch 16
    python3 bench/frozen_lake_pg_reference.py --lr 3e-3 --groups 32 --mini-batch 0
    python3 bench/frozen_lake_pg_reference.py --lr 3e-3 --groups 32 --mini-batch 0 --adv gigpo --layers 4
"""
import argparse
import random
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

N = 4
CELL = {"_": 0, "O": 1, "G": 2, "P": 3}
NEWLINE, IM_START, USER, ASSISTANT, IM_END, ANSWER = 4, 5, 6, 7, 8, 9
ACTIONS = [(0, -1), (1, 0), (0, 1), (-1, 0)]  # Left Down Right Up
ACTION_TOKEN = 10  # action a is token 10 + a


def random_map(rng):
    """A map as RAGEN draws it: random tiles, distinct start and goal, a path between."""
    while True:
        tiles = ["_" if rng.random() < 0.8 else "O" for _ in range(N * N)]
        start = rng.randrange(N * N)
        goal = rng.choice([c for c in range(N * N) if c != start])
        tiles[start], tiles[goal] = "_", "G"
        seen, stack = {goal}, [goal]
        while stack:
            r, c = divmod(stack.pop(), N)
            for dr, dc in ACTIONS:
                n = (r + dr) * N + c + dc
                if 0 <= r + dr < N and 0 <= c + dc < N and tiles[n] != "O" and n not in seen:
                    seen.add(n)
                    stack.append(n)
        if start in seen:
            return tiles, start


def prompt(tiles, player):
    tokens = [IM_START, USER, NEWLINE]
    for i in range(N * N):
        tokens.append(CELL["P"] if i == player else CELL[tiles[i]])
        if i % N == N - 1:
            tokens.append(NEWLINE)
    return tokens + [IM_END, NEWLINE, IM_START, ASSISTANT, NEWLINE, ANSWER]


def step(tiles, player, action):
    """(new position, reward, done); walking into the border is a no-op."""
    r, c = divmod(player, N)
    dr, dc = ACTIONS[action]
    if not (0 <= r + dr < N and 0 <= c + dc < N):
        return player, 0.0, False
    n = (r + dr) * N + c + dc
    return n, float(tiles[n] == "G"), tiles[n] in "OG"


def tiny_model(layers, dim=64, heads=4, theta=10000.0, head_dim=None, window=None):
    """The Tiny Qwen2 of the pipelines (width 64, 4 heads by default), from random weights.
    `head_dim` (None: dim / heads) is Qwen2's config field of that name; `window` turns on
    Qwen2's sliding-window attention in every layer (each query sees its last `window` keys)."""
    config = Qwen2Config(vocab_size=16, hidden_size=dim, num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=heads, intermediate_size=4 * dim, max_position_embeddings=1024,
                         tie_word_embeddings=True, rope_theta=theta)
    # transformers >= 5 reads the rotary base from rope_parameters.
    config.rope_parameters = {"rope_type": "default", "rope_theta": theta}
    if head_dim is not None:
        config.head_dim = head_dim
    if window is not None:
        config.sliding_window = window
        config.layer_types = ["sliding_attention"] * layers
    return Qwen2ForCausalLM(config)


def action_logits(model, prompts):
    """Action logits at each prompt's last token. Prompts of unequal length (whole chats)
    are left-padded, masked and numbered from their first real token."""
    width = max(len(p) for p in prompts)
    if all(len(p) == width for p in prompts):
        return model(torch.tensor(prompts)).logits[:, -1, ACTION_TOKEN:ACTION_TOKEN + 4]
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(ids, attention_mask=mask, position_ids=positions).logits
    return logits[:, -1, ACTION_TOKEN:ACTION_TOKEN + 4]


def play(model, maps, greedy, max_turns=8, prompt_of=None):
    """Plays every map once; returns each episode's (prompt, action) steps and return.
    `prompt_of(tiles, turns, position)` builds a prompt from the episode's earlier
    (position, action) turns; default: the current grid alone."""
    prompt_of = prompt_of or (lambda tiles, _turns, player: prompt(tiles, player))
    position = [start for _, start in maps]
    done = [False] * len(maps)
    steps, returns = [[] for _ in maps], [0.0] * len(maps)
    turns = [[] for _ in maps]
    for _ in range(max_turns):
        live = [i for i in range(len(maps)) if not done[i]]
        if not live:
            break
        prompts = [prompt_of(maps[i][0], turns[i], position[i]) for i in live]
        with torch.no_grad():
            logits = action_logits(model, prompts)
        actions = logits.argmax(-1) if greedy else torch.distributions.Categorical(logits=logits).sample()
        for j, i in enumerate(live):
            a = actions[j].item()
            steps[i].append((prompts[j], a))
            turns[i].append((position[i], a))
            position[i], reward, done[i] = step(maps[i][0], position[i], a)
            returns[i] += reward
    return steps, returns


def grpo(steps, returns, args):
    """Every step sample of an episode gets its group-normalised return."""
    r = torch.tensor(returns).view(args.groups, args.group_size)
    adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)).view(-1)
    return [(p, a, adv[i].item()) for i in range(len(steps)) for p, a in steps[i]]


def gigpo(steps, returns, args, gamma=0.95):
    """GiGPO (mean norm): episode advantage plus step advantage over anchor states."""
    samples = []
    for g in range(args.groups):
        episodes = range(g * args.group_size, (g + 1) * args.group_size)
        mean_return = sum(returns[i] for i in episodes) / args.group_size
        # The only reward is the last step's, so the return-to-go of step t is R * gamma^(n-1-t).
        to_go = {i: [returns[i] * gamma ** (len(steps[i]) - 1 - t) for t in range(len(steps[i]))]
                 for i in episodes}
        anchors = {}
        for i in episodes:
            for t, (p, _) in enumerate(steps[i]):
                anchors.setdefault(tuple(p), []).append(to_go[i][t])
        for i in episodes:
            for t, (p, a) in enumerate(steps[i]):
                same_state = anchors[tuple(p)]
                step_adv = to_go[i][t] - sum(same_state) / len(same_state)
                samples.append((p, a, returns[i] - mean_return + step_adv))
    return samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--mini-batch", type=int, default=16, help="0: the whole batch")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--adv", default="grpo", choices=["grpo", "gigpo"])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = tiny_model(args.layers, args.dim, args.heads)
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr)
    rng, val_rng = random.Random(0), random.Random(10000)
    val_maps = [random_map(val_rng) for _ in range(64)]
    start = time.time()
    for it in range(1, args.steps + 1):
        maps = [m for m in (random_map(rng) for _ in range(args.groups)) for _ in range(args.group_size)]
        steps, returns = play(model, maps, greedy=False)
        samples = (gigpo if args.adv == "gigpo" else grpo)(steps, returns, args)
        samples = [s for s in samples if s[2] != 0]
        random.shuffle(samples)
        size = args.mini_batch or max(1, len(samples))
        for b in range(0, len(samples), size):
            chunk = samples[b:b + size]
            logp = torch.log_softmax(action_logits(model, [p for p, _, _ in chunk]), -1)
            taken = logp.gather(1, torch.tensor([[a] for _, a, _ in chunk]))[:, 0]
            loss = -(torch.tensor([v for _, _, v in chunk]) * taken).mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
        if it % 25 == 0:
            _, val_returns = play(model, val_maps, greedy=True)
            print(f"step {it} train_success {sum(returns) / len(returns):.3f} "
                  f"val_success {sum(val_returns) / 64:.3f} wall {time.time() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
