"""Read a CTranslate2 model directory (``model.bin`` + ``config.json`` + vocabularies) into numpy.

The binary layout follows CTranslate2's own writer (``python/ctranslate2/specs/model_spec.py``,
``ModelSpec._serialize``) and reader (``src/models/model.cc``), all little-endian:

* ``uint32`` binary version (1..6 known; current writers use 6);
* version >= 2: ``string`` spec name, ``uint32`` spec revision (version 1: no name, revision 1);
* ``uint32`` number of variables, then per variable: ``string`` name, ``uint8`` rank,
  ``rank x uint32`` dimensions, then
  - version >= 4: ``uint8`` type id (float32, int8, int16, int32, float16, bfloat16 in the order
    of CTranslate2's ``DataType`` enum) and ``uint32`` number of bytes,
  - version < 4: ``uint8`` element width (4: float32, 2: int16, 1: int8) and ``uint32`` number of
    elements;
  followed by the raw data;
* version >= 3: ``uint32`` number of aliases, then pairs ``string`` alias, ``string`` target.

A ``string`` is ``uint16`` length (including the trailing NUL), the UTF-8 bytes and a NUL.

Quantised weights (int8 / int16 with a ``<name>_scale`` sibling) are dequantised by
:func:`dequantize` as CTranslate2 quantises them: ``value = q / scale`` with one scale per output
row (int8) or one global scale (int16).
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from triemine.errors import InputError

KNOWN_BINARY_VERSIONS = (1, 2, 3, 4, 5, 6)
# CTranslate2 DataType enum order (include/ctranslate2/types.h, model_spec._dtype_to_type_id).
_TYPE_IDS = ("float32", "int8", "int16", "int32", "float16", "bfloat16")
_WIDTHS = {4: "float32", 2: "int16", 1: "int8"}


@dataclass
class CT2Model:
    """The raw content of a CTranslate2 model directory."""

    path: Path
    binary_version: int
    spec: str
    revision: int
    variables: Dict[str, np.ndarray]
    aliases: Dict[str, str]
    config: dict
    source_vocabulary: List[str]
    target_vocabulary: List[str]
    shared_vocabulary: bool = field(default=False)

    def has(self, name: str) -> bool:
        return name in self.variables or name in self.aliases

    def resolve(self, name: str) -> str:
        """Follow aliases to the stored variable name."""
        seen = set()
        while name in self.aliases:
            if name in seen:
                raise InputError(f"alias cycle at variable {name!r}", self.path / "model.bin")
            seen.add(name)
            name = self.aliases[name]
        return name

    def raw(self, name: str) -> np.ndarray:
        """The stored array of ``name`` (following aliases), without dequantisation."""
        try:
            return self.variables[self.resolve(name)]
        except KeyError:
            raise InputError(f"missing variable {name!r}", self.path / "model.bin") from None

    def get(self, name: str) -> np.ndarray:
        """``name`` as float32, dequantised with ``<name>_scale`` when it is stored quantised.

        As in CTranslate2's ``Model::register_variable_alias``, an aliased weight uses the scale
        stored next to the variable it aliases.
        """
        value = self.raw(name)
        scale_name = name + "_scale"
        if not self.has(scale_name):
            scale_name = self.resolve(name) + "_scale"
        if value.dtype in (np.int8, np.int16) and self.has(scale_name):
            return dequantize(value, self.raw(scale_name))
        if value.dtype in (np.int8, np.int16) and value.ndim >= 2:
            raise InputError(f"quantised variable {name!r} has no {scale_name!r}",
                             self.path / "model.bin")
        return value.astype(np.float32) if value.dtype != np.float32 else value

    def scalar(self, name: str, default=None):
        if not self.has(name):
            return default
        value = self.raw(name)
        if value.dtype == np.int8 and value.ndim == 1 and value.size > 1:
            return value.tobytes().decode("utf-8")  # strings are stored as int8 arrays
        return value.reshape(-1)[0].item()


def dequantize(value: np.ndarray, scale: np.ndarray) -> np.ndarray:
    value = value.astype(np.float32)
    scale = np.asarray(scale, dtype=np.float32)
    if scale.ndim == 0 or scale.size == 1:
        return value / scale.reshape(())
    if scale.shape[0] != value.shape[0]:
        raise InputError(f"scale of shape {scale.shape} does not fit weight {value.shape}")
    return value / scale.reshape((-1,) + (1,) * (value.ndim - 1))


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.data = data
        self.pos = 0
        self.path = path

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise InputError(f"truncated model file (wanted {n} bytes at offset {self.pos}, "
                             f"file has {len(self.data)})", self.path)
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return struct.unpack("<H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def string(self) -> str:
        n = self.u16()
        raw = self.take(n)
        if n == 0 or raw[-1] != 0:
            raise InputError(f"malformed string at offset {self.pos - n}", self.path)
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"string at offset {self.pos - n} is not UTF-8", self.path) from None


def _decode(raw: bytes, dtype: str, shape: tuple, path: Path, name: str) -> np.ndarray:
    if dtype == "bfloat16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        arr = bits.view(np.float32)
    else:
        arr = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
    expected = int(np.prod(shape)) if shape else 1
    if arr.size != expected:
        raise InputError(f"variable {name!r}: {arr.size} values for shape {shape}", path)
    return arr.reshape(shape).astype(arr.dtype.newbyteorder("="), copy=False)


def read_model_bin(path: Path) -> tuple:
    """Parse ``model.bin``: (binary_version, spec, revision, variables, aliases)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("missing CTranslate2 model file model.bin", path)
    data = path.read_bytes()
    r = _Reader(data, path)
    version = r.u32()
    if version not in KNOWN_BINARY_VERSIONS:
        raise InputError(f"unknown CTranslate2 binary version {version} (known: "
                         f"{', '.join(map(str, KNOWN_BINARY_VERSIONS))}); not a CTranslate2 "
                         f"model.bin?", path)
    if version >= 2:
        spec = r.string()
        revision = r.u32()
    else:
        spec, revision = "", 1
    n_vars = r.u32()
    if n_vars > 1_000_000:
        raise InputError(f"implausible variable count {n_vars}; not a CTranslate2 model.bin?", path)
    variables: Dict[str, np.ndarray] = {}
    for _ in range(n_vars):
        name = r.string()
        rank = r.u8()
        shape = tuple(r.u32() for _ in range(rank))
        code = r.u8()
        size = r.u32()
        if version >= 4:
            if code >= len(_TYPE_IDS):
                raise InputError(f"variable {name!r} has unknown type id {code}", path)
            dtype = _TYPE_IDS[code]
            nbytes = size
        else:
            if code not in _WIDTHS:
                raise InputError(f"variable {name!r} has unknown element width {code}", path)
            dtype = _WIDTHS[code]
            nbytes = size * code
        variables[name] = _decode(r.take(nbytes), dtype, shape, path, name)
    aliases: Dict[str, str] = {}
    if version >= 3:
        for _ in range(r.u32()):
            alias = r.string()
            aliases[alias] = r.string()
    if r.pos != len(data):
        raise InputError(f"{len(data) - r.pos} unexpected trailing bytes after the aliases", path)
    return version, spec, revision, variables, aliases


def _read_vocab(path: Path) -> List[str]:
    if path.suffix == ".json":
        try:
            with open(path, encoding="utf-8") as f:
                vocab = json.load(f)
        except json.JSONDecodeError as exc:
            raise InputError(f"vocabulary is not valid JSON: {exc.msg}", path, exc.lineno) from None
        if not isinstance(vocab, list) or not all(isinstance(t, str) for t in vocab):
            raise InputError("vocabulary JSON must be a list of strings", path)
        return vocab
    tokens = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            token = line.rstrip("\r\n")
            if token == "":
                raise InputError("empty vocabulary entry", path, lineno)
            tokens.append(token)
    return tokens


def _find_vocab(model_dir: Path, name: str) -> Optional[Path]:
    for suffix in (".json", ".txt"):
        p = model_dir / f"{name}{suffix}"
        if p.is_file():
            return p
    return None


def read_ct2_vocabularies(model_dir) -> Tuple[List[str], List[str], bool]:
    """(source vocabulary, target vocabulary, shared?) of a CTranslate2 model directory, without
    reading ``model.bin``: ``shared_vocabulary.{json,txt}``, else ``source_vocabulary`` and
    ``target_vocabulary``. The one vocabulary reader of the package."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise InputError("CTranslate2 model directory not found", model_dir)
    shared = _find_vocab(model_dir, "shared_vocabulary")
    if shared is not None:
        vocab = _read_vocab(shared)
        return vocab, vocab, True
    src_path = _find_vocab(model_dir, "source_vocabulary")
    tgt_path = _find_vocab(model_dir, "target_vocabulary")
    if src_path is None or tgt_path is None:
        raise InputError("missing vocabulary: expected shared_vocabulary.{json,txt} or "
                         "source_vocabulary.{json,txt} and target_vocabulary.{json,txt}",
                         model_dir)
    return _read_vocab(src_path), _read_vocab(tgt_path), False


def read_ct2_model(model_dir) -> CT2Model:
    """Read a CTranslate2 model directory; clear :class:`InputError` for anything missing."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise InputError("CTranslate2 model directory not found", model_dir)
    version, spec, revision, variables, aliases = read_model_bin(model_dir / "model.bin")
    config: dict = {}
    config_path = model_dir / "config.json"
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", config_path, exc.lineno) from None
    src, tgt, shared = read_ct2_vocabularies(model_dir)
    return CT2Model(path=model_dir, binary_version=version, spec=spec, revision=revision,
                    variables=variables, aliases=aliases, config=config, source_vocabulary=src,
                    target_vocabulary=tgt, shared_vocabulary=shared)
