"""GEM's own Python loop, the peer: steps/s of GuessTheNumber played directly."""

import sys
import time

import gem

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
env = gem.make("game:GuessTheNumber-v0-easy")
steps, seed = 0, 0
start = time.perf_counter()
env.reset(seed=seed)
while time.perf_counter() - start < seconds:
    for guess in range(1, 11):
        _, _, terminated, truncated, _ = env.step(f"\\boxed{{{guess}}}")
        steps += 1
        if terminated or truncated:
            seed += 1
            env.reset(seed=seed)
            break
print(steps / (time.perf_counter() - start))
