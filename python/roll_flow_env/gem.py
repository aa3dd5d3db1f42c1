"""Serve a GEM env (PyPI ``gem-llm``, the env library ROLL uses) to roll-flow:

    python -m roll_flow_env.gem game:GuessTheNumber-v0-easy

GEM's ``reset(seed)`` gives (observation, info) and ``step(text)`` gymnasium's 5-tuple;
both pass through unchanged; the seed is taken mod 2**32 (GEM seeds numpy). An episode counts as a success when it terminates (not
truncated) with a positive reward, unless GEM's info says ``success`` itself.
"""

import argparse

from .server import serve


class GemEnv:
    def __init__(self, env_id, kwargs):
        import gem

        self.env = gem.make(env_id, **kwargs)

    def reset(self, seed):
        # GEM seeds numpy, which takes 32-bit seeds; roll-flow's are 64-bit. Folding keeps
        # equal seeds equal, so a group still shares its episode.
        obs, info = self.env.reset(seed=seed % 2**32)
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info or {})
        info.setdefault("success", bool(terminated and not truncated and reward > 0))
        return obs, reward, terminated, truncated, info


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_id", help="a GEM env id, e.g. game:GuessTheNumber-v0-easy")
    parser.add_argument("--max-turns", type=int, default=None, help="the env's turn limit, sent in the handshake")
    parser.add_argument("--kwarg", action="append", default=[], metavar="KEY=INT",
                        help="an integer keyword for gem.make (repeatable)")
    parser.add_argument("--boxed", metavar="LOW-HIGH",
                        help="a fixed action set \\boxed{LOW} .. \\boxed{HIGH} (GEM games answer in "
                             "\\boxed{}), so `guide: Actions` can constrain replies to it")
    args = parser.parse_args(argv)
    actions = []
    if args.boxed:
        low, high = (int(x) for x in args.boxed.split("-"))
        actions = [f"\\boxed{{{k}}}" for k in range(low, high + 1)]
    kwargs = {k: int(v) for k, v in (kv.split("=", 1) for kv in args.kwarg)}
    probe = GemEnv(args.env_id, kwargs)
    max_turns = args.max_turns or getattr(probe.env.unwrapped, "max_turns", None)
    serve(lambda: GemEnv(args.env_id, kwargs), name=args.env_id, max_turns=max_turns, actions=actions)


if __name__ == "__main__":
    main()
