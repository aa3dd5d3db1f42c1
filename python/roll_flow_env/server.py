"""The env-server loop: JSON lines on stdin, JSON lines on stdout (docs/ENV_PROTOCOL.md).

Requests are read in chunks and every complete line in a chunk is answered before the
replies are written together, so a trainer that sends many requests at once gets their
replies in few writes. Stdout belongs to the protocol: anything the env prints goes to
stderr instead, where roll-flow keeps the last lines for its error messages.
"""

import json
import math
import os
import sys

PROTOCOL_VERSION = 1

_FLAGS = ("success", "action_is_valid", "action_is_effective")


def _info(info):
    """The JSON-safe part of a step's info: flags, numbers and strings."""
    out = {}
    for key, value in (info or {}).items():
        if isinstance(value, bool) or isinstance(value, str):
            out[key] = value
        elif isinstance(value, (int, float)):
            if math.isfinite(value):
                out[key] = value
        elif hasattr(value, "item"):  # numpy scalars
            value = value.item()
            if isinstance(value, (bool, int, float)) and (
                isinstance(value, bool) or math.isfinite(value)
            ):
                out[key] = value
    return out


def _reset_reply(result):
    """``reset`` may return the observation, or (observation, info)."""
    obs, info = (result if isinstance(result, tuple) else (result, {}))
    reply = {"obs": str(obs)}
    info = info or {}
    if "instruction" in info:
        reply["instruction"] = str(info["instruction"])
    if "valid_actions" in info:
        reply["valid_actions"] = [str(a) for a in info["valid_actions"]]
    return reply


def _step_reply(result):
    """gymnasium's 5-tuple, or gym's older (obs, reward, done, info)."""
    if len(result) == 5:
        obs, reward, terminated, truncated, info = result
    else:
        obs, reward, done, info = result
        terminated, truncated = done, False
    info = dict(info or {})
    reply = {
        "obs": str(obs),
        "reward": float(reward),
        "terminated": bool(terminated),
        "truncated": bool(truncated),
    }
    if "valid_actions" in info:
        reply["valid_actions"] = [str(a) for a in info.pop("valid_actions")]
    reply["info"] = _info(info)
    return reply


class _Server:
    def __init__(self, make_env, name, max_turns, actions):
        self.make_env = make_env
        self.name = name
        self.max_turns = max_turns
        self.actions = list(actions or [])
        self.envs = {}

    def handle(self, request):
        op = request.get("op")
        if op == "handshake":
            if request.get("protocol") != PROTOCOL_VERSION:
                raise ValueError(
                    f"this server speaks protocol {PROTOCOL_VERSION}, "
                    f"the client asked for {request.get('protocol')}"
                )
            hello = {"protocol": PROTOCOL_VERSION, "env": self.name}
            if self.max_turns is not None:
                hello["max_turns"] = int(self.max_turns)
            if self.actions:
                hello["actions"] = self.actions
            return hello
        instance = request["instance"]
        if op == "reset":
            env = self.envs.get(instance)
            if env is None:
                env = self.envs[instance] = self.make_env()
            return _reset_reply(env.reset(seed=request["seed"]))
        if op == "step":
            env = self.envs.get(instance)
            if env is None:
                raise KeyError(f"instance {instance} was never reset")
            return _step_reply(env.step(request["action"]))
        if op == "close":
            env = self.envs.pop(instance, None)
            if env is not None and hasattr(env, "close"):
                env.close()
            return {}
        raise ValueError(f"unknown op {op!r}")

    def reply(self, line):
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            reply = self.handle(request)
        except Exception as e:  # the trainer gets the reason, the server keeps serving
            reply = {"error": f"{type(e).__name__}: {e}"}
        reply["id"] = request_id
        return json.dumps(reply, allow_nan=False, ensure_ascii=False)


def serve(make_env, name=None, max_turns=None, actions=None, stdin_fd=0, stdout_fd=1):
    """Serves envs made by ``make_env()`` until stdin closes.

    ``make_env`` returns an object with ``reset(seed=...)`` (the observation text, or
    (observation, info)) and ``step(action_text)`` (gymnasium's 5-tuple or gym's 4-tuple).
    An info's ``instruction`` (on reset) is the system text, ``valid_actions`` the
    state's actions, ``success`` / ``action_is_valid`` / ``action_is_effective`` /
    ``format_penalty`` the standard step flags, and its other numbers become rollout
    metrics. ``name``, ``max_turns`` and ``actions`` (a fixed action set, for
    ``guide: Actions``) are sent in the handshake.
    """
    server = _Server(make_env, name or getattr(make_env, "__name__", "PythonEnv"), max_turns, actions)
    # Whatever the env prints must not corrupt the protocol stream.
    out = os.fdopen(os.dup(stdout_fd), "wb", buffering=0)
    sys.stdout = sys.stderr
    pending = b""
    try:
        while True:
            chunk = os.read(stdin_fd, 1 << 16)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            replies = [server.reply(line) for line in lines if line.strip()]
            if replies:
                out.write(("\n".join(replies) + "\n").encode("utf-8"))
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        pass
