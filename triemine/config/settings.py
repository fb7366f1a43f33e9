"""Settings as fields of frozen dataclasses: each declared once, with its default, help, range and
command-line flag, and everything else derived from that declaration.

A *settings tree* is a frozen dataclass whose fields are settings (:func:`setting`) or other
settings dataclasses, nested (:class:`triemine.mining.options.MineOptions` is the job's).
No field name occurs twice in a tree, so a setting is named by its field name alone: the API's
keyword arguments (``beam=5``), :func:`get`, :func:`with_values` and the flags' destinations.

* :func:`add_flags` builds an ``argparse`` parser's options from the tree's fields (a setting
  without a flag is Python-only); every flag's argparse default is ``None`` ("not given"), so
  :func:`given` returns exactly what the user set;
* :func:`check_value` refuses a value of the wrong type (from the field's annotation), out of
  its range (``low``, ``high``, ``choices``), an empty path or a file of the wrong kind
  (``path``, ``kind``), naming the flag (or the field, for Python callers);
* :func:`with_values` is the tree with some fields replaced, each checked first (a setting's
  ``also`` fields take its value unless named themselves).
"""
from __future__ import annotations

import argparse
import math
import os
from dataclasses import MISSING, Field, field, fields, is_dataclass, replace
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple

import numpy as np

from triemine.errors import InputError

_KINDS = {"int": "an integer", "bool": "True or False", "float": "a finite number",
          "Tuple[str, ...]": "a list of generator names", "str": "a string"}


def setting(default: Any, help: str = "", *, flag: Optional[str] = None,
            flags: Sequence[str] = (), const: Any = None, choices: Optional[Callable] = None,
            metavar: Optional[str] = None, low: Optional[float] = None, low_note: str = "",
            high: Optional[float] = None, high_note: str = "", path: bool = False,
            kind: Optional[Callable[[str], Optional[str]]] = None,
            parse: Optional[Callable[[str], Any]] = None, nargs: Optional[str] = None,
            group: Optional[str] = None, also: Sequence[str] = (),
            exclusive: Optional[Mapping[str, Any]] = None, transient: bool = False) -> Field:
    """A dataclass field declaring one setting.

    ``help`` is a ``str.format`` template filled by :func:`add_flags`; ``flag`` the option
    (``flags``: more spellings, e.g. ``("-o",)``); ``const``: the flag takes no value and
    sets ``const`` (``nargs="?"``: it may take one); ``choices``: a function returning the
    allowed values (read when the parser is built; a value outside them is refused by
    :func:`check_value` too, so the API refuses it as the flag does); ``parse``: the argparse
    type; ``low``/``high``: the smallest/largest allowed value (``low_note``/``high_note``
    explain them); ``path``: the value names a file (an empty string is refused); ``kind``: a
    function of a path returning why the file is not of the kind the setting needs (``None``:
    it is), checked before any work; ``group``: the parser's argument group;
    ``also``: other fields set to the same value (:func:`with_values`); ``exclusive``:
    ``{flag: (value, help)}`` for mutually exclusive flags that each set this field to their
    value; ``transient``: the setting never changes an output (threads, workers, progress, where
    work is kept), so it is left out of every key (:func:`key_of`)."""
    meta = {"help": help, "flag": flag, "flags": tuple(flags), "const": const,
            "choices": choices, "metavar": metavar, "low": low, "low_note": low_note,
            "high": high, "high_note": high_note, "path": path or kind is not None, "kind": kind,
            "parse": parse, "nargs": nargs, "group": group, "also": tuple(also),
            "exclusive": dict(exclusive or {}), "transient": bool(transient)}
    return field(default=default, metadata={"setting": meta})


def declared(tree_type, name: str) -> Field:
    """A new field of setting ``name`` of the tree type ``tree_type``, with its default and
    declaration: how another dataclass of options (``trie-mine-score``'s) holds a setting
    declared once in the tree, checked (:func:`check_value`) and flagged
    (:func:`add_flags_of`) by that one declaration."""
    f = setting_field(tree_type, name)
    return field(default=f.default, metadata=f.metadata)


def _meta(f: Field) -> dict:
    return f.metadata.get("setting", {})


def leaves(tree_type, path: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], Field]]:
    """``(path, field)`` of every setting of the tree type ``tree_type``, in declaration order
    (a nested tree's settings where it is declared); ``path`` ends with the field's name."""
    for f in fields(tree_type):
        sub = f.default_factory if f.default_factory is not MISSING else None
        if sub is not None and is_dataclass(sub):
            yield from leaves(sub, path + (f.name,))
        else:
            yield path + (f.name,), f


def paths(tree_type) -> Dict[str, Tuple[str, ...]]:
    """Each setting's field name -> its path in the tree; a :class:`TypeError` when a name
    occurs twice (the tree's invariant)."""
    out: Dict[str, Tuple[str, ...]] = {}
    for path, _ in leaves(tree_type):
        if path[-1] in out:
            raise TypeError(f"setting {path[-1]!r} declared twice: {'.'.join(out[path[-1]])} "
                            f"and {'.'.join(path)}")
        out[path[-1]] = path
    return out


def setting_field(tree_type, name: str) -> Field:
    for path, f in leaves(tree_type):
        if path[-1] == name:
            return f
    raise KeyError(name)


def get(tree, name: str) -> Any:
    """The value of setting ``name`` anywhere in ``tree``."""
    node = tree
    for part in paths(type(tree))[name]:
        node = getattr(node, part)
    return node


def flag_of(f: Field) -> Optional[str]:
    return _meta(f).get("flag")


def _kind(f: Field) -> Tuple[str, bool]:
    """``(kind, whether None is allowed)`` of a field, from its annotation
    (``"Optional[int]"`` -> ``("int", True)``): the one place a setting's type is declared."""
    t = f.type if isinstance(f.type, str) else (f.type.__name__ if isinstance(f.type, type)
                                                else str(f.type).replace("typing.", ""))
    inner = t[len("Optional["):-1] if t.startswith("Optional[") else None
    return (inner, True) if inner else (t, False)


def check_value(f: Field, v: Any, label: Optional[str] = None) -> Any:
    """``v`` if it is of ``f``'s type and in its range, else an :class:`InputError` naming
    ``label`` (default: the field).  A list of names becomes a tuple."""
    kind, optional = _kind(f)
    label = label or f"option {f.name}"
    if v is None and optional:
        return v
    if _meta(f).get("path") and isinstance(v, os.PathLike):
        v = os.fspath(v)  # a path setting takes a Path as its string
    if kind == "int":
        ok = isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
    elif kind == "bool":
        ok = isinstance(v, bool)
    elif kind == "float":
        ok = (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
              and math.isfinite(v))
    elif kind == "Tuple[str, ...]":
        ok = isinstance(v, (tuple, list)) and all(isinstance(c, str) for c in v)
        v = tuple(v) if ok else v
    else:
        ok = isinstance(v, str)
    if not ok:
        expected = "a file path" if _meta(f).get("path") else _KINDS.get(kind, "a string")
        raise InputError(f"{label}: {v!r} is not a valid value (expected {expected})")
    meta, name = _meta(f), flag_of(f) or f.name
    low, high = meta.get("low"), meta.get("high")
    if low is not None and v < low:
        raise InputError(f"{name} must be >= {low:g}{meta.get('low_note', '')}")
    if high is not None and v > high:
        raise InputError(f"{name} must be <= {high:g}{meta.get('high_note', '')}")
    if meta.get("choices") and kind == "str" and v not in meta["choices"]():
        raise InputError(f"{name}: {v!r} is not one of {', '.join(map(str, meta['choices']()))}")
    if meta.get("path") and isinstance(v, str):
        if not v:
            raise InputError(f"{name}: an empty path")
        why = meta["kind"](v) if meta.get("kind") else None
        if why:
            raise InputError(f"{name} {v}: {why}")
    return v


def with_values(tree, values: Mapping[str, Any]):
    """``tree`` with the settings named in ``values`` replaced (each checked,
    :func:`check_value`); an unknown name is an :class:`InputError`."""
    where = paths(type(tree))
    unknown = sorted(set(values) - set(where))
    if unknown:
        raise InputError(f"unknown option(s): {', '.join(unknown)}")
    values = with_also(type(tree), values)
    by_node: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    for name, v in values.items():
        path = where[name]
        f = setting_field(type(tree), name)
        by_node.setdefault(path[:-1], {})[name] = check_value(f, v)
    return _replace_at(tree, (), by_node)


def with_also(tree_type, values: Mapping[str, Any]) -> Dict[str, Any]:
    """``values`` with, for each setting that declares ``also``, those fields set to its value
    unless ``values`` names them too."""
    out = dict(values)
    names = paths(tree_type)
    for name, v in values.items():
        if name in names:
            for other in _meta(setting_field(tree_type, name)).get("also", ()):
                out.setdefault(other, v)
    return out


def _replace_at(node, path, by_node):
    changes = dict(by_node.get(path, {}))
    for f in fields(node):
        sub = getattr(node, f.name)
        if is_dataclass(sub) and any(p[:len(path) + 1] == path + (f.name,) for p in by_node):
            changes[f.name] = _replace_at(sub, path + (f.name,), by_node)
    return replace(node, **changes) if changes else node


def add_flags(parser: argparse.ArgumentParser, tree_type, groups: Mapping[str, Any],
              fmt: Mapping[str, Any]) -> None:
    """Add a flag for every setting of ``tree_type`` that declares one, in declaration order,
    to ``parser`` or to ``groups[meta.group]``; ``fmt`` fills the help templates."""
    for _, f in leaves(tree_type):
        meta = _meta(f)
        _add_flag(groups[meta["group"]] if meta.get("group") else parser, f, fmt)


def add_flags_of(parser: argparse.ArgumentParser, tree_type, names: Sequence[str],
                 fmt: Mapping[str, Any]) -> None:
    """Add the flags of the settings ``names`` of ``tree_type`` (as :func:`add_flags` does)."""
    for name in names:
        _add_flag(parser, setting_field(tree_type, name), fmt)


def _add_flag(where, f: Field, fmt: Mapping[str, Any]) -> None:
    """The flag(s) setting ``f`` declares, added to ``where`` (a parser or a group)."""
    meta = _meta(f)
    if meta.get("exclusive"):
        mx = where.add_mutually_exclusive_group()
        for flag, (value, text) in meta["exclusive"].items():
            mx.add_argument(flag, dest=f.name, action="store_const", const=value,
                            help=text.format(**fmt))
        return
    if not meta.get("flag"):
        return
    kw: Dict[str, Any] = {"dest": f.name, "default": None, "help": meta["help"].format(**fmt)}
    if meta.get("nargs"):
        kw.update(nargs=meta["nargs"], const=meta["const"])
    elif meta.get("const") is not None:
        kw.update(action="store_const", const=meta["const"])
    if "action" not in kw:
        kind, _ = _kind(f)
        kw["type"] = meta.get("parse") or {"int": int, "float": float}.get(kind, str)
        if meta.get("choices"):
            kw["choices"] = meta["choices"]()
        if meta.get("metavar"):
            kw["metavar"] = meta["metavar"]
    where.add_argument(*meta["flags"], meta["flag"], **kw)


def given(args: argparse.Namespace, tree_type) -> Dict[str, Any]:
    """The settings the user gave on the command line (flags left out are ``None``)."""
    out: Dict[str, Any] = {}
    for _, f in leaves(tree_type):
        v = getattr(args, f.name, None)
        if v is None:
            continue
        out[f.name] = v
    return out


def finite(text: str) -> float:
    """argparse type: a finite number (``nan``/``inf`` are refused, not silently used)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return v


def key_of(tree) -> Dict[str, Any]:
    """The settings of ``tree`` (a settings tree or one node of it) that may change an output,
    by field name in declaration order: every setting but the ``transient`` ones, a tuple as a
    list (as JSON has it).  What the keys of stages, caches and jobs record of their settings: a
    setting declared in a node is in every key built from that node, with no list to update."""
    out: Dict[str, Any] = {}
    for path, f in leaves(type(tree)):
        if _meta(f).get("transient"):
            continue
        value = tree
        for part in path:
            value = getattr(value, part)
        out[path[-1]] = list(value) if isinstance(value, tuple) else value
    return out
