"""Serve a gym-style text environment to roll-flow over its env-server protocol.

    from roll_flow_env import serve

    class Guess:
        def reset(self, seed):
            self.secret = seed % 10
            return "Guess a digit."
        def step(self, action):
            right = action.strip().endswith(str(self.secret))
            return ("Right!" if right else "Wrong."), float(right), right, False, {"success": right}

    serve(Guess)

and in the pipeline: ``env: Process(command: ["python3", "guess.py"])``. The protocol is
``docs/ENV_PROTOCOL.md`` in the roll-flow repository; adapters for GEM and gymnasium envs
are ``python -m roll_flow_env.gem ENV_ID`` and ``python -m roll_flow_env.gymnasium ENV_ID``.
"""

from .server import PROTOCOL_VERSION, serve

__all__ = ["PROTOCOL_VERSION", "serve"]
