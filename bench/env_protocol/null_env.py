"""A null env over the env-server protocol: what the protocol itself costs per step."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from roll_flow_env import serve  # noqa: E402


class Null:
    def reset(self, seed):
        return "state"

    def step(self, action):
        return "state", 0.0, False, False, {}


serve(Null, name="Null", max_turns=1000000)
