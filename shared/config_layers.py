"""The layers a configuration is read from, before it is validated: YAML files merged key by key,
`--set dotted.key=value` overrides, `${NAME}` replaced from the environment; and a validation
error said as one line per dotted key.

    raw = deep_merge(read_yaml(Path("conf/local.yaml")), read_yaml(Path("conf/standalone.yaml")))
    apply_override(raw, "hot_pages.threshold=100")
    raw = substitute_environment(raw)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from shared.errors import ConfigError

class Section(BaseModel):
    """A section of the configuration: a key it does not declare is a typo, said as one."""

    model_config = ConfigDict(extra="forbid", frozen=True)


_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def apply_override(data: dict[str, Any], item: str) -> None:
    """Set one `dotted.key=value` in `data`, the value read as YAML."""
    key, value = _parse_override(item)
    _set_dotted(data, key, value)


def as_overrides(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    """A layer as `--set` items, e.g. {"kafka": {"partitions": 2}} -> ["kafka.partitions=2"]."""
    items = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            items += as_overrides(value, f"{prefix}{key}.")
        else:
            # a scalar is dumped as a one-item document, `value\n...\n`: keep the value
            written = yaml.safe_dump(value, default_flow_style=True, width=float("inf")).strip()
            items.append(f"{prefix}{key}={written.removesuffix('...').strip()}")
    return items


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as error:
        raise ConfigError(f"config file {path} cannot be read: {error.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections, got {type(data).__name__}")
    return data


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _parse_override(item: str) -> tuple[str, Any]:
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {item!r}: expected dotted.key=value, e.g. --set hot_pages.threshold=100")
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        value = text
    return key, value


#: Maps whose own keys contain dots: `--set spark.conf.spark.sql.x=1` sets the key 'spark.sql.x'.
_FREE_FORM_MAPS = ("spark.conf.",)


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    for prefix in _FREE_FORM_MAPS:
        if key.startswith(prefix) and len(key) > len(prefix):
            parts = [*prefix.rstrip(".").split("."), key[len(prefix):]]
    node = data
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            prefix = ".".join(parts[: depth + 1])
            raise ConfigError(f"--set {key}: {prefix} is a value, not a section")
        node = child
    node[parts[-1]] = value


def substitute_environment(value: Any, prefix: str = "", required: bool = True) -> Any:
    if isinstance(value, dict):
        return {k: substitute_environment(v, f"{prefix}{k}.", required) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_environment(v, prefix, required) for v in value]
    if isinstance(value, str):

        def lookup(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                if not required:
                    return match.group(0)
                raise ConfigError(f"{prefix.rstrip('.')}: environment variable {name} is not set")
            return os.environ[name]

        return _ENV_REFERENCE.sub(lookup, value)
    return value


def describe(error: ValidationError) -> str:
    lines = []
    for problem in error.errors():
        key = ".".join(str(part) for part in problem["loc"])
        if problem["type"] == "extra_forbidden":
            message = "unknown key (a typo? see conf/local.yaml for the keys)"
        elif problem["type"] == "missing":
            message = "missing"
        elif problem["type"] in ("model_type", "dict_type"):
            message = f"must be a section of keys, got {problem['input']!r}"
        elif problem["type"] == "value_error":
            message = problem["msg"].removeprefix("Value error, ")
        else:
            message = f"{problem['msg']} (got {problem['input']!r})"
        lines.append(f"{key or 'config'}: {message}")
    return "invalid configuration:\n  " + "\n  ".join(lines)
