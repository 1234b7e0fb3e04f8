"""Reads a compose file into the topology a runner needs, resolving what docker compose would.

For each service: the argv the container runs (entrypoint + command; an entrypoint the compose file
does not give is taken from the ENTRYPOINT of the service's Dockerfile build target, following
FROM <stage> chains), its environment, its mounts (bind sources resolved against the compose file's
folder), depends_on with conditions, the healthcheck (argv, interval, timeout, retries,
start_period; None when disabled or absent) and the restart policy. one_shot() names the services
that others wait for to complete (service_completed_successfully), start_order() a start order. ${VAR}, ${VAR:-default},
${VAR-default}, ${VAR:?message} and $$ are interpolated from the given environment.

Used by deploy/emulate/netns_run.py (to run the services) and deploy/validate/policy.py (to check
them), so both see the file the same way. Errors raise TopologyError with a message naming the
service and key. Only the compose features this project uses are understood; anything that would
change what runs (e.g. `scale`, `deploy.replicas`, `profiles`, `extends`) is rejected rather than
silently ignored.
"""
from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml


class TopologyError(Exception):
    pass


@dataclass
class Mount:
    target: str               # path inside the container
    source: str               # host path (bind) or volume name
    kind: str                 # "bind" | "volume" | "tmpfs"
    read_only: bool = False


@dataclass
class Healthcheck:
    argv: list[str]           # CMD form; CMD-SHELL becomes ["/bin/sh", "-c", text]
    interval: float = 30.0
    timeout: float = 30.0
    retries: int = 3
    start_period: float = 0.0


@dataclass
class Service:
    name: str
    argv: list[str]
    environment: dict[str, str]
    mounts: list[Mount]
    depends_on: dict[str, str]            # service -> condition
    healthcheck: Healthcheck | None
    healthcheck_declared: bool            # a healthcheck key exists (a test, or disable: true)
    restart: str | None
    build_target: str | None
    raw: dict = field(repr=False, default_factory=dict)


_UNSUPPORTED = ("scale", "extends", "profiles", "network_mode", "pid", "ipc")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")


def parse_duration(value, where: str) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * units[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise TopologyError(f"{where}: '{value}' is not a duration like 2s or 1m30s")
    return total


def interpolate(value, env: dict[str, str], where: str):
    """Interpolates every string in a YAML tree (compose rules, the subset listed above)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("braced") or m.group("plain")
        op, arg = m.group("op"), m.group("arg") or ""
        current = env.get(name)
        if op == ":-":
            return current if current else arg
        if op == "-":
            return current if current is not None else arg
        if op == ":?":
            if not current:
                raise TopologyError(f"{where}: required variable {name} is not set: {arg}")
            return current
        return current or ""

    pattern = re.compile(r"\$\$|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|-|:\?)(?P<arg>[^}]*))?\}"
                         r"|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)")
    return pattern.sub(replace, value)


def _as_argv(value, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v) for v in value]
    raise TopologyError(f"{where}: expected a string or a list of strings")


def _environment(value, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        env = {}
        for item in value:
            key, _, val = str(item).partition("=")
            env[key] = val
        return env
    raise TopologyError(f"{where}: expected a mapping or a list of KEY=VALUE")


def _mounts(service: dict, base: Path, where: str) -> list[Mount]:
    mounts = []
    for i, v in enumerate(service.get("volumes") or []):
        if isinstance(v, dict):
            kind, source, target = v.get("type", "volume"), str(v.get("source", "")), str(v["target"])
            read_only = bool(v.get("read_only", False))
        else:
            parts = str(v).split(":")
            if len(parts) == 1:
                kind, source, target, read_only = "volume", "", parts[0], False
            else:
                source, target = parts[0], parts[1]
                read_only = len(parts) > 2 and "ro" in parts[2].split(",")
                kind = "bind" if source.startswith((".", "/", "~")) else "volume"
        if kind == "bind":
            source = str((base / os.path.expanduser(source)).resolve())
        mounts.append(Mount(target=target, source=source, kind=kind, read_only=read_only))
    tmpfs = service.get("tmpfs") or []
    for t in [tmpfs] if isinstance(tmpfs, str) else tmpfs:
        mounts.append(Mount(target=str(t).split(":")[0], source="", kind="tmpfs"))
    return mounts


def _healthcheck(value, where: str) -> tuple[Healthcheck | None, bool]:
    if value is None:
        return None, False
    if value.get("disable"):
        return None, True
    test = value.get("test")
    if isinstance(test, str):
        argv = ["/bin/sh", "-c", test]
    elif isinstance(test, list) and test and test[0] == "CMD":
        argv = [str(t) for t in test[1:]]
    elif isinstance(test, list) and test and test[0] == "CMD-SHELL":
        argv = ["/bin/sh", "-c", " ".join(str(t) for t in test[1:])]
    elif isinstance(test, list) and test == ["NONE"]:
        return None, True
    else:
        raise TopologyError(f"{where}.test: expected CMD, CMD-SHELL, NONE or a string")
    return Healthcheck(
        argv=argv,
        interval=parse_duration(value.get("interval", "30s"), f"{where}.interval"),
        timeout=parse_duration(value.get("timeout", "30s"), f"{where}.timeout"),
        retries=int(value.get("retries", 3)),
        start_period=parse_duration(value.get("start_period", "0s"), f"{where}.start_period"),
    ), True


def dockerfile_entrypoint(dockerfile: Path, target: str | None) -> list[str]:
    """The exec-form ENTRYPOINT that the given build target ends up with."""
    if not dockerfile.is_file():
        raise TopologyError(f"Dockerfile {dockerfile} does not exist")
    stages: dict[str, tuple[str | None, list[str] | None]] = {}
    order: list[str] = []
    current = None
    for line in _logical_lines(dockerfile.read_text()):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else f"#{len(order)}"
            parent = words[0] if words[0] in stages else None
            stages[name] = (parent, None)
            order.append(name)
            current = name
        elif keyword == "ENTRYPOINT" and current is not None:
            try:
                argv = json.loads(rest)
            except json.JSONDecodeError:
                argv = ["/bin/sh", "-c", rest]
            stages[current] = (stages[current][0], argv)
    if not order:
        raise TopologyError(f"{dockerfile}: no FROM")
    name = target or order[-1]
    if name not in stages:
        raise TopologyError(f"{dockerfile}: no build stage named '{name}'")
    while name is not None:
        parent, argv = stages[name]
        if argv is not None:
            return [str(a) for a in argv]
        name = parent
    return []


def _logical_lines(text: str):
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        yield (buf + line).strip()
        buf = ""


def load(compose_file: str | Path, env: dict[str, str] | None = None) -> dict[str, Service]:
    path = Path(compose_file).resolve()
    env = dict(os.environ if env is None else env)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise TopologyError(f"{path}: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict) or not data["services"]:
        raise TopologyError(f"{path}: no services")
    data = interpolate(data, env, "")
    services = {}
    for name, raw in data["services"].items():
        where = f"services.{name}"
        if not isinstance(raw, dict):
            raise TopologyError(f"{where}: expected a mapping")
        for key in _UNSUPPORTED:
            if key in raw:
                raise TopologyError(f"{where}.{key}: not supported by this runner")
        if (raw.get("deploy") or {}).get("replicas", 1) != 1:
            raise TopologyError(f"{where}.deploy.replicas: not supported by this runner (one process per service)")
        build = raw.get("build")
        target = None
        if "entrypoint" in raw:
            entrypoint = _as_argv(raw["entrypoint"], f"{where}.entrypoint")
        elif isinstance(build, dict):
            context = (path.parent / build.get("context", ".")).resolve()
            target = build.get("target")
            entrypoint = dockerfile_entrypoint(context / build.get("dockerfile", "Dockerfile"), target)
        else:
            raise TopologyError(f"{where}: no entrypoint and no build section to take it from")
        depends = raw.get("depends_on") or {}
        if isinstance(depends, list):
            depends = {d: "service_started" for d in depends}
        depends = {k: (v or {}).get("condition", "service_started") for k, v in depends.items()}
        for d in depends:
            if d not in data["services"]:
                raise TopologyError(f"{where}.depends_on: unknown service '{d}'")
        health, declared = _healthcheck(raw.get("healthcheck"), f"{where}.healthcheck")
        services[name] = Service(
            name=name,
            argv=entrypoint + _as_argv(raw.get("command"), f"{where}.command"),
            environment=_environment(raw.get("environment"), f"{where}.environment"),
            mounts=_mounts(raw, path.parent, where),
            depends_on=depends,
            healthcheck=health,
            healthcheck_declared=declared,
            restart=None if raw.get("restart") is None else str(raw.get("restart")),
            build_target=target,
            raw=raw,
        )
    return services


COMPLETED = "service_completed_successfully"
HEALTHY = "service_healthy"


def one_shot(services: dict[str, Service]) -> set[str]:
    """Services that others wait for to complete (depends_on condition service_completed_successfully),
    such as a step that makes certificates: they run to completion, exit 0, and only then do their
    dependents start. A service waited for both to complete and to be healthy (or started) is an error."""
    waited = {}
    for s in services.values():
        for dep, condition in s.depends_on.items():
            waited.setdefault(dep, set()).add(condition)
    shots = {d for d, conditions in waited.items() if COMPLETED in conditions}
    for d in sorted(shots):
        if waited[d] != {COMPLETED}:
            others = sorted(waited[d] - {COMPLETED})
            raise TopologyError(f"services.{d}: waited for with {COMPLETED} and with {', '.join(others)}: "
                                "a service either runs to completion or keeps running")
    return shots


def start_order(services: dict[str, Service]) -> list[str]:
    """Services ordered so that each comes after what it depends on; a cycle is an error."""
    order, state = [], {}

    def visit(name: str, chain: list[str]):
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise TopologyError("depends_on cycle: " + " -> ".join(chain + [name]))
        state[name] = "visiting"
        for dep in sorted(services[name].depends_on):
            visit(dep, chain + [name])
        state[name] = "done"
        order.append(name)

    for name in sorted(services):
        visit(name, [])
    return order
