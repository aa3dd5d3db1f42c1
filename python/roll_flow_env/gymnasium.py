"""Serve a gymnasium env with a text rendering to roll-flow:

    python -m roll_flow_env.gymnasium FrozenLake-v1 --kwarg is_slippery=false

The env is made with ``render_mode="ansi"``; the observation the model reads is the
rendering, its colour highlights (FrozenLake's agent cell, Taxi's taxi) shown as
``[brackets]``. Discrete action spaces only: the model answers an
action's name (``<answer>Left</answer>`` or just ``Left``, any case). The toy-text envs'
names are built in (FrozenLake, CliffWalking, Taxi); ``--actions A,B,...`` names any
other env's actions in index order, else they are ``0`` .. ``n-1``. A reply naming no
action leaves the env where it is and reports ``action_is_valid: false`` with reward
``--format-penalty`` (default 0). Success is a termination with a positive reward.
"""

import argparse
import json
import re

from .server import serve

# Action names of gymnasium's toy-text envs, in index order (their docs' tables).
KNOWN_ACTIONS = {
    "FrozenLake": ["Left", "Down", "Right", "Up"],
    "CliffWalking": ["Up", "Right", "Down", "Left"],
    "Taxi": ["South", "North", "East", "West", "Pickup", "Dropoff"],
}

_HIGHLIGHT = re.compile(r"\x1b\[[0-9;]*[1-9][0-9;]*m(.*?)\x1b\[0?m", re.S)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def action_names(env_id, space_size, given):
    if given:
        names = [n.strip() for n in given.split(",")]
    else:
        names = KNOWN_ACTIONS.get(env_id.split("-")[0], [str(k) for k in range(space_size)])
    if len(names) != space_size:
        raise SystemExit(f"{env_id} has {space_size} actions, {len(names)} names were given")
    return names


class GymEnv:
    def __init__(self, env_id, kwargs, names, format_penalty):
        import gymnasium

        self.env = gymnasium.make(env_id, render_mode="ansi", **kwargs)
        self.names = names
        self.lookup = {n.lower(): k for k, n in enumerate(names)}
        self.format_penalty = format_penalty

    def text(self):
        highlighted = _HIGHLIGHT.sub(r"[\1]", self.env.render())
        return _ANSI.sub("", highlighted).strip("\n")

    def reset(self, seed):
        # gymnasium seeds numpy, which takes 32-bit seeds; equal seeds stay equal.
        self.env.reset(seed=seed % 2**32)
        return self.text()

    def step(self, action_text):
        found = _ANSWER.search(action_text)
        name = (found.group(1) if found else action_text).strip().lower()
        if name not in self.lookup:
            info = {"action_is_valid": False, "action_is_effective": False,
                    "format_penalty": self.format_penalty}
            return self.text(), self.format_penalty, False, False, info
        _, reward, terminated, truncated, info = self.env.step(self.lookup[name])
        info = dict(info or {})
        info.setdefault("success", bool(terminated and reward > 0))
        return self.text(), float(reward), terminated, truncated, info


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_id", help="a gymnasium env id, e.g. FrozenLake-v1")
    parser.add_argument("--kwarg", action="append", default=[], metavar="KEY=JSON",
                        help="a keyword for gymnasium.make, its value as JSON (repeatable): "
                             "is_slippery=false, map_name='\"8x8\"'")
    parser.add_argument("--actions", help="the action names in index order, comma-separated")
    parser.add_argument("--max-turns", type=int, default=None,
                        help="the turn limit sent in the handshake (default: the env's "
                             "max_episode_steps)")
    parser.add_argument("--format-penalty", type=float, default=0.0,
                        help="the reward of a reply that names no action")
    args = parser.parse_args(argv)
    kwargs = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.kwarg)}
    import gymnasium

    probe = gymnasium.make(args.env_id, render_mode="ansi", **kwargs)
    if not isinstance(probe.action_space, gymnasium.spaces.Discrete):
        raise SystemExit(f"{args.env_id}'s action space is {probe.action_space}, not Discrete")
    names = action_names(args.env_id, int(probe.action_space.n), args.actions)
    max_turns = args.max_turns or (probe.spec.max_episode_steps if probe.spec else None)
    serve(lambda: GymEnv(args.env_id, kwargs, names, args.format_penalty),
          name=args.env_id, max_turns=max_turns, actions=names)


if __name__ == "__main__":
    main()
