#!/usr/bin/env python3
"""List the scalars of a roll-flow run with TensorBoard's own event reader.

roll-flow writes TensorBoard event files (events.out.tfevents.*) beside metrics.jsonl.
This script checks them with the reader `tensorboard --logdir` uses, outside CI
(CI needs no Python):

    pip install tensorboard
    python3 bench/tensorboard_check.py runs/frozen_lake_starpo

It prints every scalar tag with its number of points, first and last (step, value), and
exits 1 when a tag of the last metrics.jsonl record is missing from the event files or
its last value differs (beyond float32 rounding).
"""

import json
import math
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator,
    SCALARS,
)


def main(run_dir: Path) -> int:
    accumulator = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0})
    accumulator.Reload()
    tags = sorted(accumulator.Tags()[SCALARS])
    print(f"{len(tags)} scalar tags in {run_dir}")
    for tag in tags:
        events = accumulator.Scalars(tag)
        first, last = events[0], events[-1]
        print(
            f"  {tag:40s} {len(events):4d} points  "
            f"first (step {first.step}, {first.value:.6g})  last (step {last.step}, {last.value:.6g})"
        )
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    record = json.loads(lines[-1])
    problems = []
    for key, value in record.items():
        if key == "step" or not isinstance(value, (int, float)):
            continue
        if key not in tags:
            problems.append(f"{key}: not in the event files")
            continue
        got = accumulator.Scalars(key)[-1]
        if got.step != record["step"] or not math.isclose(got.value, value, rel_tol=1e-6, abs_tol=1e-6):
            problems.append(f"{key}: event (step {got.step}, {got.value}) != metrics.jsonl (step {record['step']}, {value})")
    for p in problems:
        print("MISMATCH", p)
    print("ok: the last metrics.jsonl record matches the event files" if not problems else f"{len(problems)} mismatches")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tensorboard_check.py RUN_DIR")
    sys.exit(main(Path(sys.argv[1])))
