"""Build the models' parameter dataclasses from plain mappings (YAML), with one clear error per mistake.

Every model validates its own values in its dataclass (``__post_init__``); this module checks what a
mapping can get wrong before that: unknown keys (with the allowed ones listed), wrong types (a string
where a number belongs, a scalar where a list belongs, a float where an integer belongs, ``yes`` for a
bool), and nested sections. Errors name the file and the dotted key path:

    config/search_rescue_2a.yaml: vehicle.gps_receiver.r_sigma_m: expected a number, got 'small'
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np
import yaml

from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.validation import ConfigError, shorten

T = TypeVar("T")


class Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans: only true/false. YAML 1.1 also reads on/off/yes/no as
    booleans, which would turn every ``on:`` key into ``True:``; ROS 2's parser (yaml-cpp) is 1.2."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
# YAML 1.2 (and yaml-cpp, which reads the nodes' parameters) read ``1e9`` and ``1.0e3`` as numbers;
# PyYAML's 1.1 resolver wants a dot and a signed exponent (``1.0e+9``) and would hand the launcher the
# string '1e9'.
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"), list("-+.0123456789")
)


#: Largest YAML document read [bytes] (a scenario file is ~1 KB; the limit is far above any real one).
MAX_YAML_BYTES = int(LIMITS["yaml_bytes"].hi)
#: Most nodes a document may have with every alias expanded (as a consumer walking it would see them):
#: a "billion laughs" alias bomb of 1.5 KB expands to ~1e9 nodes; real files have a few hundred, and a
#: file within MAX_YAML_BYTES holds at most ~500,000 without aliases, so only aliases can pass this.
MAX_YAML_NODES = int(LIMITS["yaml_nodes"].hi)


class YamlLimitError(yaml.YAMLError):
    """A YAML document is larger than MAX_YAML_BYTES or expands (through aliases) to more than
    MAX_YAML_NODES nodes; ``problem`` says which, ``problem_mark`` where (when known)."""

    def __init__(self, problem: str, problem_mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = problem_mark

    def __str__(self) -> str:
        return self.problem


class _LimitedLoader(Yaml12Loader):
    """Yaml12Loader that counts every node as a consumer would see it, aliases expanded, while composing:
    an anchored node's expanded size is computed once and an alias adds it again, so the count costs
    one addition per node and an alias bomb is refused as soon as it passes MAX_YAML_NODES (before any
    Python object is built)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        node = super().compose_node(parent, index)
        size = getattr(node, "qrsim_expanded_nodes", None)
        if size is None:  # a scalar, or a collection composed below (which set it)
            size = 1
            node.qrsim_expanded_nodes = size
        return node

    def compose_sequence_node(self, anchor: Any) -> Any:
        node = super().compose_sequence_node(anchor)
        return self._sized(node, 1 + sum(c.qrsim_expanded_nodes for c in node.value))

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        size = 1 + sum(k.qrsim_expanded_nodes + v.qrsim_expanded_nodes for k, v in node.value)
        return self._sized(node, size)

    @staticmethod
    def _sized(node: Any, size: int) -> Any:
        if size > MAX_YAML_NODES:
            raise YamlLimitError(f"more than {MAX_YAML_NODES} values with its aliases expanded (an alias "
                                 "bomb?); write the values out or use fewer nested aliases",
                                 node.start_mark)
        node.qrsim_expanded_nodes = size
        return node


def load_yaml(stream: Any) -> Any:
    """Parse YAML text or a text stream with YAML 1.2 booleans, within limits: at most MAX_YAML_BYTES
    characters and MAX_YAML_NODES nodes with aliases expanded (else YamlLimitError, a yaml.YAMLError).
    Ordinary anchors, aliases and merge keys (``<<: *base``) work as usual."""
    text = stream if isinstance(stream, (str, bytes)) else stream.read(MAX_YAML_BYTES + 1)
    if len(text) > MAX_YAML_BYTES:
        raise YamlLimitError(f"larger than {MAX_YAML_BYTES} bytes (the largest YAML document read)")
    return yaml.load(text, Loader=_LimitedLoader)


def _join(where: str, key: str) -> str:
    """Key path for messages: ``file: a.b.c``."""
    if not where:
        return key
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


class ScenarioError(ConfigError):
    """A scenario file or override is wrong; the message names the file and the key path."""


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, where: str) -> Any:
    """Convert a YAML value to the annotated type ``tp`` or raise ScenarioError naming ``where``."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None:
            if type(None) in options:
                return None
            raise ScenarioError(f"{where}: may not be null")
        others = [o for o in options if o is not type(None)]
        if len(others) == 1:  # Optional[X]: X's own error, with its full key path
            return _convert(value, others[0], where)
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(value, option, where)
            except ScenarioError as exc:
                # Drop the key path (re-added below); ``where`` itself contains ": " after the file name.
                msg, prefix = str(exc), f"{where}: "
                errors.append(msg[len(prefix):] if msg.startswith(prefix) else msg.split(": ", 1)[-1])
        raise ScenarioError(f"{where}: {' or '.join(dict.fromkeys(errors))}")
    if value is None:
        raise ScenarioError(f"{where}: may not be null (expected {_type_name(tp)})")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        return build(tp, value, where)
    if tp is bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise ScenarioError(f"{where}: expected true or false, got {shorten(value)}")
    if tp is int:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
        raise ScenarioError(f"{where}: expected an integer, got {shorten(value)}")
    if tp is float:
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            return float(value)
        raise ScenarioError(f"{where}: expected a number, got {shorten(value)}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ScenarioError(f"{where}: expected a string, got {shorten(value)}")
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ScenarioError(f"{where}: expected a list, got {shorten(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ScenarioError(f"{where}: expected a list of {len(args)} values, got {len(value)}")
        pairs = enumerate(zip(value, args, strict=True))
        return tuple(_convert(v, a, f"{where}[{i}]") for i, (v, a) in pairs)
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise ScenarioError(f"{where}: expected a mapping, got {shorten(value)}")
        return dict(value)
    return value


def build(cls: type[T], data: Mapping[str, Any] | None, where: str) -> T:
    """Instantiate dataclass ``cls`` from ``data`` (missing keys take the dataclass defaults).

    ``where`` is the prefix of every error message (file name and key path).
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where}: expected a mapping of {cls.__name__} settings, got {shorten(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    unknown = [k for k in data if k not in fields]
    if unknown:
        allowed = ", ".join(sorted(fields))
        raise ScenarioError(f"{_join(where, str(unknown[0]))}: unknown key (allowed: {allowed})")
    kwargs = {k: _convert(v, hints[k], _join(where, k)) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except (ConfigError, TypeError, ValueError) as exc:
        prefix = where.rstrip(":")
        raise ScenarioError(f"{prefix}: {exc}" if prefix else str(exc)) from None


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """Deep-merge ``overrides`` into ``base`` (mappings merge key by key; anything else replaces)."""
    out = dict(base)
    for key, value in (overrides or {}).items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
