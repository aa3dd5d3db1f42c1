"""Does a trained FrozenLake policy see the holes? Plays a run's checkpoint greedily on the
validation maps and sorts its decisions, to read the plateaus in bench/README.md.

For every turn on the way, the policy's move is compared with the cells around the player:
- a "toward" move brings the player closer to the goal (a row or column step);
- a decision "has a hole on a toward move" when one of those moves would enter a hole; the
  audit counts how often the policy then entered the hole and how often it avoided it;
- where it entered the hole, the policy's probability of that move (the log-prob that
  `play` prints), which shows learning that greedy play does not show yet;
- at those decisions, whether the hole is on the row step (Up/Down) or the column step
  toward the goal, and whether the move is the hole-blind "vertical-first" rule's (a row
  step toward the goal before a column step; bench/frozen_lake_heuristics.py);
- every fall into a hole is counted with whether a toward move without a hole existed.
Turn 1 holds only the first grid, later turns the whole chat so far, so both are reported.
A policy that never looks at holes avoids them only when its fixed preference happens to
point elsewhere, and those counts then stay the same from one checkpoint to the next.

The games come from the real binary (`roll-flow play --policy RUN_DIR`, greedy, the run's
own pipeline.ron and its `envs.val` seeds). Run by hand, not in CI:
    python3 bench/frozen_lake_policy_audit.py --roll-flow target/release/roll-flow \
        --run runs/frozen_lake_starpo --checkpoint 400 --maps 256
"""
import argparse
import math
import re
import subprocess
from collections import Counter

import frozen_lake_heuristics as rules

TURN = re.compile(r"--- turn (\d+) ---\nobservation \(user message\):\n(.*?)\nreply:.*?"
                  r"\naction: \"(\w+)\".*?\(sum\)\s+(-?[0-9.]+)", re.S)


def audit_turn(grid, action, logprob, counts, label):
    """Adds one decision's kind to `counts`; `label` is "turn 1" or "later turns". Also
    sums the probability of the chosen move where it entered a hole (`entered_prob`)."""
    p, goal = rules.find(grid, "P"), rules.find(grid, "G")

    def cell(move):
        r, c = rules.step_to(p, move)
        return grid[r][c] if rules.inside((r, c), len(grid)) else "#"

    toward = rules.toward(p, goal, list(rules.MOVES))
    hole_moves = [m for m in toward if cell(m) == "O"]
    entered = cell(action) == "O"
    if hole_moves:
        kind = "entered the hole" if entered else "avoided it"
        counts[(label, "hole on a toward move", kind)] += 1
        if entered:
            counts[(label, "entered_prob")] += math.exp(logprob)
        where = " and ".join(sorted({"row step" if m in ("Up", "Down") else "column step"
                                     for m in hole_moves}))
        counts[(label, "hole on a toward move", f"hole on the {where}: {kind}")] += 1
        rule = "same" if action == rules.vertical_first(grid, p, goal) else "differs"
        counts[(label, "hole on a toward move", f"move vs the vertical-first rule: {rule}")] += 1
    if entered:
        safe = len(hole_moves) < len(toward)
        counts[(label, "fell", "a safe toward move existed" if safe else "no safe toward move")] += 1


def audit(binary, run, checkpoint, seeds):
    counts = Counter()
    for seed in seeds:
        cmd = [binary, "play", "--env", "val", "--seed", str(seed), "--policy", run]
        if checkpoint is not None:
            cmd += ["--checkpoint", str(checkpoint)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        counts[("all", "episodes", "success" if "success: true" in out else "failure")] += 1
        for turn, obs, action, logprob in TURN.findall(out):
            label = "turn 1" if turn == "1" else "later turns"
            audit_turn(obs.strip().split("\n"), action, float(logprob), counts, label)
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--roll-flow", required=True, help="the roll-flow binary")
    ap.add_argument("--run", required=True, help="a run directory with checkpoints")
    ap.add_argument("--checkpoint", type=int, help="steps completed; default the newest")
    ap.add_argument("--maps", type=int, default=256)
    ap.add_argument("--first-seed", type=int, default=10000, help="envs.val's seed")
    args = ap.parse_args()
    seeds = range(args.first_seed, args.first_seed + args.maps)
    counts = audit(args.roll_flow, args.run, args.checkpoint, seeds)
    for label in ("turn 1", "later turns"):
        entered = counts.pop((label, "entered_prob"), 0.0)
        falls = counts[(label, "hole on a toward move", "entered the hole")]
        if falls:
            counts[(label, "hole on a toward move", "mean probability of the hole move")] = \
                round(entered / falls, 3)
    for key in sorted(counts):
        print(" | ".join(key), counts[key], sep=": ")


if __name__ == "__main__":
    main()
