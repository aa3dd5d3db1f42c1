"""What fixed rules score on FrozenLake 4x4 (p = 0.8, random start and goal, 8 turns): the
levels a learned policy passes through, to read the learning curves in bench/README.md.

Rules, each greedy and deterministic:
- vertical-first: step toward the goal, rows before columns, never looking at holes;
- horizontal-first: the same, columns before rows;
- toward, avoiding holes: a step toward the goal that does not enter a hole, else any step
  that does not;
- shortest path: breadth-first search from the goal (an optimal policy).

Scored on the pipelines' validation maps, taken from the real env through
`roll-flow play --env val --seed S` (seeds 10000.., as `envs.val` plays them), and on
4,000 fresh maps from bench/frozen_lake_pg_reference.py's generator (the train
distribution). Run by hand, not in CI:
    python3 bench/frozen_lake_heuristics.py --roll-flow target/release/roll-flow --maps 256
"""
import argparse
import json
import random
import subprocess
from collections import deque

MOVES = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}


def val_maps(binary, pipeline, count):
    """The first observation of each validation seed, as rows of text."""
    maps = []
    for seed in range(10000, 10000 + count):
        out = subprocess.run([binary, "play", pipeline, "--env", "val", "--seed", str(seed)],
                             input="", capture_output=True, text=True, check=True).stdout
        maps.append(json.loads(out.splitlines()[0])["obs"].split("\n"))
    return maps


def fresh_maps(count, seed=1):
    # Imported here, not at the top: the reference needs torch, and the rules below are
    # also used without it (bench/frozen_lake_policy_audit.py).
    import frozen_lake_pg_reference as ref

    rng, n = random.Random(seed), ref.N
    maps = []
    for _ in range(count):
        tiles, player = ref.random_map(rng)
        maps.append(["".join("P" if r * n + c == player else tiles[r * n + c] for c in range(n))
                     for r in range(n)])
    return maps


def find(rows, symbol):
    """The (row, column) of `symbol` in a grid given as rows of text."""
    return next((r, row.index(symbol)) for r, row in enumerate(rows) if symbol in row)


def inside(cell, n):
    return 0 <= cell[0] < n and 0 <= cell[1] < n


def toward(p, goal, order):
    return [a for a in order if (MOVES[a][0] * (goal[0] - p[0]) > 0)
            or (MOVES[a][1] * (goal[1] - p[1]) > 0)]


def vertical_first(tiles, p, goal):
    return toward(p, goal, ["Up", "Down", "Left", "Right"])[0]


def horizontal_first(tiles, p, goal):
    return toward(p, goal, ["Left", "Right", "Up", "Down"])[0]


def avoiding_holes(tiles, p, goal):
    n = len(tiles)
    safe = [a for a in MOVES
            if inside(step_to(p, a), n) and tiles[step_to(p, a)[0]][step_to(p, a)[1]] != "O"]
    preferred = [a for a in toward(p, goal, list(MOVES)) if a in safe]
    return (preferred or safe or ["Up"])[0]


def shortest_path(tiles, p, goal):
    n, distance, queue = len(tiles), {goal: 0}, deque([goal])
    while queue:
        cell = queue.popleft()
        for a in MOVES:
            nxt = step_to(cell, a)
            if inside(nxt, n) and nxt not in distance and tiles[nxt[0]][nxt[1]] != "O":
                distance[nxt] = distance[cell] + 1
                queue.append(nxt)
    return min((distance.get(step_to(p, a), 99), a) for a in MOVES if inside(step_to(p, a), n))[1]


def step_to(p, action):
    return (p[0] + MOVES[action][0], p[1] + MOVES[action][1])


def play(rows, rule, max_turns=8):
    """1 if `rule` reaches the goal within `max_turns` moves, else 0."""
    n = len(rows)
    p, goal = find(rows, "P"), find(rows, "G")
    tiles = [row.replace("P", "_") for row in rows]
    for _ in range(max_turns):
        nxt = step_to(p, rule(tiles, p, goal))
        p = nxt if inside(nxt, n) else p
        if tiles[p[0]][p[1]] == "O":
            return 0
        if p == goal:
            return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--roll-flow", default="target/release/roll-flow")
    ap.add_argument("--pipeline", default="pipelines/frozen_lake_gigpo.ron")
    ap.add_argument("--maps", type=int, default=256, help="validation seeds 10000..")
    args = ap.parse_args()
    sets = {f"val seeds 10000-{10000 + k - 1}": None for k in (64, args.maps)}
    val = val_maps(args.roll_flow, args.pipeline, args.maps)
    for k, name in zip((64, args.maps), list(sets)):
        sets[name] = val[:k]
    sets["4000 fresh maps"] = fresh_maps(4000)
    rules = [("vertical-first", vertical_first), ("horizontal-first", horizontal_first),
             ("toward, avoiding holes", avoiding_holes), ("shortest path", shortest_path)]
    print("| rule | " + " | ".join(sets) + " |")
    print("|---|" + "---:|" * len(sets))
    for name, rule in rules:
        scores = [sum(play(m, rule) for m in maps) / len(maps) for maps in sets.values()]
        print(f"| {name} | " + " | ".join(f"{s:.3f}" for s in scores) + " |")


if __name__ == "__main__":
    main()
