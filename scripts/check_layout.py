"""Check the layout rules of the ``triemine`` package (issues 21 and 39), reading the source only.

Problems reported, one line each:

* import cycles among the package's modules (``.pyx`` included, their one-line Python
  imports read): every ``import`` statement counts, those inside
  functions too (a lazy import only moves a cycle from import time to call time). Each strongly
  connected component of the import graph is one problem, naming its modules and the import
  lines inside it. Edges: ``import triemine.a.b`` -> ``triemine.a.b``; ``from triemine.a
  import b`` -> ``triemine.a.b`` where ``b`` is a submodule, else ``triemine.a``; relative
  imports resolved against the importing module's package; a package stands for its
  ``__init__.py``. Parent packages that Python initialises on the way are not counted as edges
  (a package re-exporting its submodules is not a cycle);
* pairs of subpackages importing each other (same edges, inside functions too): one problem per
  pair, naming the import lines both ways. A module's subpackage is the first component after
  the package's name (``triemine.mining.run`` -> ``mining``); a module at the package's root
  is one of its own (``triemine.api`` -> ``api``), so the root keeps the rule too;
* more than :data:`MAX_ROOT_MODULES` modules at the package's root (``__init__.py`` counted):
  one problem naming them (the root holds the package's face, ``api`` and ``errors``; the rest
  lives in a named subpackage);
* more than :data:`MAX_INNER_IMPORTS` imports of the package's modules inside functions (any
  ``def`` body, nested ones too; one per statement; a ``.pyx`` file's imports count as module
  level): one problem listing them (``file:line``). Imports inside functions are for optional
  or heavy third-party dependencies (torch, fairseq, transformers, Ray), not for dodging a cycle;
* imports from :data:`LAUNCHER` (``triemine/distributed/``, which ships work to pools and Ray)
  of :data:`LAUNCHER_FORBIDDEN` (the job and the models it runs): one problem per import line;
* calls of :data:`RUNNER_ONLY` (``ShardStore(``, ``plan_shards(``, ``progress_bar(``) outside
  :data:`LAUNCHER`: one problem per call (a stage describes itself as a ``Stage``; the one
  runner, ``triemine.distributed.stage``, opens its store, plans its shards and shows progress);
* stage drivers (functions outside :data:`LAUNCHER` calling ``Stage(``, ``run_stage(`` or
  ``run_stages(``) over :data:`MAX_DRIVER_LINES` lines;
* a thick command-line layer: a ``*_main`` function of ``cli.py`` at the package's root or of a
  module of the ``cli/`` subpackage over
  :data:`MAX_MAIN_LINES` lines, its nested functions included (its parser belongs in
  ``_NAME_parser()``, its work beside the code it serves);
* a thick ``api.py`` (at the package's root): over :data:`MAX_API_LINES` lines, or importing
  from :data:`API_FORBIDDEN` directly (inside functions too): the public API checks its
  arguments, takes the lock and calls the job driver, which owns the pool and the stages;
* the digest of a file's content (``content_sha256(``) called from more than
  :data:`MAX_DIGEST_FILES` modules: one problem listing them (a key takes its inputs' digests
  from ``triemine.io.keys``, a stage's from the runner, not each caller from the hash);
* imports of :data:`TESTING` (``triemine/testing/``: the tiny models, the local Ray cluster) from
  any module outside it (inside functions too): one problem per import line; the test fixtures
  serve the tests, benchmarks and scripts, never the package's own code;
* imports of a module inside :data:`FRONT_DOORS` (``triemine/io/``) from a module outside it
  (inside functions too): one problem per import line; the package's other modules import the
  wing's names from the wing (``from triemine.io import atomic_write``), so its files can be
  split or joined without touching their users;
* package folders (any folder under the package holding ``.py`` / ``.pyx`` files) without an
  ``__init__.py`` (setuptools' ``find:`` skips them, so the wheel would lack their modules);
* modules over :data:`MAX_MODULE_LINES` lines (``.py`` and ``.pyx``);
* functions over :data:`MAX_FUNCTION_LINES` lines, from ``def`` to the last line of the body;
  methods count as functions, functions nested in a function count in the outer one;
* measurement history in ``.py`` files: an ISO date (``2026-11-25``) anywhere in the file, or a
  commit hash in a comment or a docstring (a word of 7-40 hex digits with at least one digit and
  one letter; hex constants in code are never read). Docstrings and comments state contracts;
  what was measured and when goes to ``docs/decisions.md`` and the benchmark records;
* a link ``docs/decisions.md#anchor`` in a ``.py`` file whose anchor is no heading there;
* marks of one machine or one run in ``README.md`` beside the package folder (the wheel's long
  description): an ISO date, a commit hash, an absolute path (``/path/to/...`` placeholders
  allowed) or a load figure; they belong in ``docs/results.md``.

Usage::

    python scripts/check_layout.py [PACKAGE_DIR]     # default: triemine/ beside scripts/

prints one line per problem and exits 1 if there is any; then, on stderr, the size of the import
graph (:func:`import_stats`: modules, module-to-module imports, depth). From Python:
``layout_problems(root) -> list[str]`` (``root`` the package folder), or the single checks
:func:`import_cycles`, :func:`package_cycles`, :func:`root_modules`, :func:`inner_imports`
(its sites: :func:`inner_import_sites`), :func:`launcher_imports`, :func:`runner_calls`,
:func:`long_stage_drivers`, :func:`long_mains`, :func:`thick_api`, :func:`testing_imports`,
:func:`back_doors`,
:func:`missing_inits`, :func:`long_modules`, :func:`long_functions`, :func:`history_marks`,
:func:`decision_links`, :func:`digest_callers`.
"""
from __future__ import annotations

import argparse
import ast
import functools
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 120
MAX_INNER_IMPORTS = 10
MAX_ROOT_MODULES = 3
LAUNCHER = "distributed"
LAUNCHER_FORBIDDEN = ("mining", "decoding", "embedding", "scoring", "models")
# what only the one runner (triemine/distributed/) calls: a stage describes itself, it runs there
RUNNER_ONLY = ("ShardStore", "plan_shards", "progress_bar")
RUNNER_CALLS = ("Stage", "run_stage", "run_stages")  # a function calling one is a stage driver
MAX_DRIVER_LINES = 30
MAX_MAIN_LINES = 25  # a console script's *_main in cli.py: its parser and the call of its work
MAX_API_LINES = 200
API_FORBIDDEN = ("decoding", "distributed")  # api.py reaches them through the job driver
DIGEST_CALL = "content_sha256"  # the hash every key's input digests come from
MAX_DIGEST_FILES = 3            # modules calling it: triemine.io.keys and the copies' own checks
TESTING = "testing"  # the test fixtures' subpackage: imported by tests, benches and scripts only
FRONT_DOORS = ("io",)  # wings whose users import their names from the wing, never its modules
SOURCE_SUFFIXES = (".py", ".pyx")
SKIP_DIRS = {"__pycache__", "build", ".git"}


@dataclass(frozen=True)
class Module:
    name: str          # dotted name; a package's is that of its __init__.py
    path: Path
    is_package: bool


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int
    inner: bool = False  # the import statement sits inside a function


def _source_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.suffix in SOURCE_SUFFIXES and path.is_file() and \
                not SKIP_DIRS.intersection(path.relative_to(root).parts):
            yield path


def find_modules(root) -> Dict[str, Module]:
    """The modules under package folder ``root`` by dotted name (``.py`` and Cython ``.pyx``)."""
    root = Path(root)
    modules: Dict[str, Module] = {}
    for path in _source_files(root):
        parts = (root.name,) + path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = Module(".".join(parts), path, is_package)
    return modules


def _parse(path: Path) -> ast.Module:
    """A ``.py`` file's syntax tree; of a ``.pyx`` file, only its one-line Python ``import``
    statements (``cimport`` is C-level; the rest is not Python syntax). Parsed once per text
    (every check reads the whole package); the tree must not be changed."""
    return _parse_text(str(path), path.suffix, path.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=4096)
def _parse_text(filename: str, suffix: str, text: str) -> ast.Module:
    if suffix == ".py":
        return ast.parse(text, filename=filename)
    tree = ast.Module(body=[], type_ignores=[])
    for lineno, line in enumerate(text.splitlines(), 1):
        if not re.match(r"\s*(import|from)\s", line) or "cimport" in line:
            continue
        try:
            stmt = ast.parse(line.strip()).body[0]
        except SyntaxError:
            continue
        ast.increment_lineno(stmt, lineno - 1)
        tree.body.append(stmt)
    return tree


def _resolve_from(module: Module, node: ast.ImportFrom) -> Optional[str]:
    """The absolute module name an ``ImportFrom`` names (before its imported names)."""
    if node.level == 0:
        return node.module
    package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    if node.level - 1 > len(package):
        return None
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_edges(modules: Dict[str, Module]) -> List[Edge]:
    """Every import between the package's modules (inside functions too, marked ``inner``), one
    edge per name."""
    edges: List[Edge] = []
    for module in modules.values():
        for node, inner in _import_statements(_parse(module.path)):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve_from(module, node)
                if base is None:
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a non-module c
                    target = target.rpartition(".")[0]
                if target and target != module.name:
                    edges.append(Edge(module.name, target, node.lineno, inner))
    return edges


def _import_statements(tree: ast.AST) -> Iterator[Tuple[ast.stmt, bool]]:
    """Every ``import`` statement of ``tree`` in source order, with whether it sits inside a
    function (one walk of the tree)."""
    stack: List[Tuple[ast.AST, bool]] = [(tree, False)]
    found = []
    while stack:
        node, inside = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, inside))
        inside = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        stack.extend((child, inside) for child in ast.iter_child_nodes(node))
    return iter(sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset)))


def strongly_connected(nodes: List[str], succ: Dict[str, Set[str]]) -> List[List[str]]:
    """Tarjan's strongly connected components (iterative), each sorted, in a stable order."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on_stack: Set[str] = set()
    stack: List[str] = []
    out: List[List[str]] = []
    for start in nodes:
        if start in index:
            continue
        work: List[Tuple[str, Iterator[str]]] = [(start, iter(sorted(succ.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(succ.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return sorted(out)


def _relpath(module: Module, root: Path) -> str:
    return str(module.path.relative_to(root.parent))


def import_cycles(root) -> List[str]:
    """One line per strongly connected component of more than one module."""
    root = Path(root)
    modules = find_modules(root)
    edges = import_edges(modules)
    succ: Dict[str, Set[str]] = {}
    for e in edges:
        succ.setdefault(e.importer, set()).add(e.imported)
    problems = []
    for component in strongly_connected(sorted(modules), succ):
        if len(component) < 2:
            continue
        members = set(component)
        inside = sorted({(e.importer, e.line, e.imported) for e in edges
                         if e.importer in members and e.imported in members})
        lines = "; ".join(f"{_relpath(modules[a], root)}:{line} -> {b}" for a, line, b in inside)
        problems.append(f"import cycle among {len(component)} modules: {', '.join(component)} "
                        f"({lines})")
    return problems


def _subpackage(name: str, modules: Dict[str, Module]) -> Optional[str]:
    """The subpackage ``name`` belongs to (``pkg.a.b`` -> ``a`` when ``pkg.a`` is a package); a
    module at the package's root is its own (``pkg.api`` -> ``api``); ``None`` for the package
    itself."""
    parts = name.split(".")
    return parts[1] if len(parts) >= 2 else None


def root_modules(root, limit: int = MAX_ROOT_MODULES) -> List[str]:
    """One line naming the modules at the package's root (``.py`` and ``.pyx``, ``__init__.py``
    counted) when there are more than ``limit``; none otherwise."""
    root = Path(root)
    names = sorted(p.name for p in root.iterdir()
                   if p.is_file() and p.suffix in SOURCE_SUFFIXES)
    if len(names) <= limit:
        return []
    return [f"{len(names)} modules at the root of {root.name}/ (at most {limit}): "
            f"{', '.join(names)} (move them into a named subpackage)"]


def import_stats(root) -> Dict[str, int]:
    """The size of the package's import graph (every import, inside functions too):
    ``modules``; ``imports``, the module-to-module imports (distinct importer and imported
    pairs); ``depth``, the most imports in a chain of distinct modules (the longest path of
    the graph of its strongly connected components)."""
    modules = find_modules(Path(root))
    succ: Dict[str, Set[str]] = {}
    for e in import_edges(modules):
        succ.setdefault(e.importer, set()).add(e.imported)
    component = {m: i for i, comp in enumerate(strongly_connected(sorted(modules), succ))
                 for m in comp}
    down: Dict[int, Set[int]] = {}
    for a, targets in succ.items():
        down.setdefault(component[a], set()).update(
            component[b] for b in targets if component[b] != component[a])
    depth: Dict[int, int] = {}

    def longest(c: int) -> int:
        stack = [(c, False)]
        while stack:
            node, ready = stack.pop()
            if node in depth:
                continue
            if ready:
                depth[node] = max((1 + depth[x] for x in down.get(node, ())), default=0)
                continue
            stack.append((node, True))
            stack.extend((x, False) for x in down.get(node, ()) if x not in depth)
        return depth[c]

    return {"modules": len(modules), "imports": sum(len(t) for t in succ.values()),
            "depth": max((longest(c) for c in set(component.values())), default=0)}


def _sites(edges, modules: Dict[str, Module], root: Path) -> str:
    lines = sorted({(e.importer, e.line, e.imported) for e in edges})
    return "; ".join(f"{_relpath(modules[a], root)}:{line} -> {b}" for a, line, b in lines)


def package_cycles(root) -> List[str]:
    """One line per pair of subpackages that import each other (any import, inside functions
    too), naming the import lines of both directions."""
    root = Path(root)
    modules = find_modules(root)
    between: Dict[Tuple[str, str], List[Edge]] = {}
    for e in import_edges(modules):
        a, b = _subpackage(e.importer, modules), _subpackage(e.imported, modules)
        if a and b and a != b:
            between.setdefault((a, b), []).append(e)
    problems = []
    for a, b in sorted(between):
        if a < b and (b, a) in between:
            problems.append(f"subpackages import each other: {root.name}.{a} <-> {root.name}.{b} "
                            f"({_sites(between[a, b], modules, root)} | "
                            f"{_sites(between[b, a], modules, root)})")
    return problems


def inner_import_sites(root) -> List[str]:
    """``file:line`` of every import statement inside a function that names a module of the
    package, in file and line order."""
    root = Path(root)
    modules = find_modules(root)
    sites = {(_relpath(modules[e.importer], root), e.line)
             for e in import_edges(modules) if e.inner}
    return [f"{path}:{line}" for path, line in sorted(sites)]


def inner_imports(root, limit: int = MAX_INNER_IMPORTS) -> List[str]:
    """One line listing the imports of the package's modules inside functions when there are
    more than ``limit``; none otherwise."""
    sites = inner_import_sites(root)
    if len(sites) <= limit:
        return []
    return [f"{len(sites)} imports of {Path(root).name} modules inside functions (at most {limit}; "
            f"move them to the module top, or move code where they form a cycle): "
            f"{', '.join(sites)}"]


def launcher_imports(root) -> List[str]:
    """One line per import from the :data:`LAUNCHER` subpackage of a :data:`LAUNCHER_FORBIDDEN`
    one (inside functions too)."""
    root = Path(root)
    modules = find_modules(root)
    problems = set()
    for e in import_edges(modules):
        if _subpackage(e.importer, modules) == LAUNCHER and \
                _subpackage(e.imported, modules) in LAUNCHER_FORBIDDEN:
            problems.add((_relpath(modules[e.importer], root), e.line, e.imported))
    return [f"launcher import in {path}:{line}: {name} ({root.name}/{LAUNCHER}/ imports nothing "
            f"from {', '.join(LAUNCHER_FORBIDDEN)})" for path, line, name in sorted(problems)]


def _called(node: ast.AST) -> Iterator[Tuple[int, str]]:
    """``(line, name)`` of every call in ``node`` (``f(...)`` or ``x.f(...)``: ``f``)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                else None
            if name is not None:
                yield sub.lineno, name


def _outside_launcher(root: Path) -> Iterator[Tuple[Module, ast.Module]]:
    """``(module, parsed)`` of every ``.py`` module outside the :data:`LAUNCHER` subpackage."""
    modules = find_modules(root)
    for module in modules.values():
        if module.path.suffix == ".py" and _subpackage(module.name, modules) != LAUNCHER:
            yield module, _parse(module.path)


def runner_calls(root) -> List[str]:
    """One line per call of a :data:`RUNNER_ONLY` name outside the :data:`LAUNCHER` subpackage
    (a stage builds a ``Stage`` and the runner opens its store, plans and shows progress)."""
    root = Path(root)
    problems = []
    for module, tree in _outside_launcher(root):
        for line, name in _called(tree):
            if name in RUNNER_ONLY:
                problems.append(f"runner call outside {root.name}/{LAUNCHER}/: "
                                f"{_relpath(module, root)}:{line} {name}(")
    return sorted(problems)


def long_stage_drivers(root, limit: int = MAX_DRIVER_LINES) -> List[str]:
    """One line per stage driver (a function outside :data:`LAUNCHER` that calls one of
    :data:`RUNNER_CALLS`) over ``limit`` lines."""
    root = Path(root)
    problems = []
    for module, tree in _outside_launcher(root):
        for name, fn in _outer_functions(tree):
            n = fn.end_lineno - fn.lineno + 1
            if n > limit and any(c in RUNNER_CALLS for _, c in _called(fn)):
                problems.append(f"stage driver over {limit} lines: {_relpath(module, root)}:"
                                f"{fn.lineno} {name} ({n})")
    return sorted(problems)


def long_mains(root, limit: int = MAX_MAIN_LINES) -> List[str]:
    """One line per ``*_main`` function over ``limit`` lines, from ``def`` to the end of its
    body (nested functions included), of ``cli.py`` at the package's root and of the modules
    of its ``cli/`` subpackage; none without them."""
    root = Path(root)
    paths = [root / "cli.py"] if (root / "cli.py").is_file() else []
    paths += sorted((root / "cli").glob("*.py"))
    problems = []
    for path, (name, fn) in ((p, f) for p in paths for f in _outer_functions(_parse(p))):
        n = fn.end_lineno - fn.lineno + 1
        if name.endswith("_main") and n > limit:
            problems.append(f"command over {limit} lines: {path.relative_to(root.parent)}:"
                            f"{fn.lineno} {name} ({n}; its parser goes in _{name[:-5]}_parser(), "
                            f"its work beside the code it serves)")
    return problems


def thick_api(root, limit: int = MAX_API_LINES) -> List[str]:
    """``api.py`` at the package's root over ``limit`` lines (one line), and one line per
    import of it from an :data:`API_FORBIDDEN` subpackage (inside functions too); none
    without that file."""
    root = Path(root)
    path = root / "api.py"
    if not path.is_file():
        return []
    rel = path.relative_to(root.parent)
    problems = []
    n = len(path.read_text(encoding="utf-8").splitlines())
    if n > limit:
        problems.append(f"api over {limit} lines: {rel} ({n}; what is not the public API's "
                        f"argument checks, lock and driver call goes beside what it serves)")
    modules = find_modules(root)
    api = f"{root.name}.api"
    for line, name in sorted({(e.line, e.imported) for e in import_edges(modules)
                              if e.importer == api
                              and _subpackage(e.imported, modules) in API_FORBIDDEN}):
        problems.append(f"api import in {rel}:{line}: {name} (the job driver imports "
                        f"{', '.join(API_FORBIDDEN)}; api.py calls the driver)")
    return problems


def testing_imports(root) -> List[str]:
    """One line per import of the :data:`TESTING` subpackage from a module outside it (inside
    functions too)."""
    root = Path(root)
    modules = find_modules(root)
    sites = {(_relpath(modules[e.importer], root), e.line, e.imported)
             for e in import_edges(modules)
             if _subpackage(e.imported, modules) == TESTING
             and _subpackage(e.importer, modules) != TESTING}
    return [f"testing import in {path}:{line}: {name} ({root.name}/{TESTING}/ serves the tests, "
            f"benchmarks and scripts, not the package)" for path, line, name in sorted(sites)]


def back_doors(root, wings=FRONT_DOORS) -> List[str]:
    """One line per import of a module inside one of ``wings`` (subpackages) from a module
    outside it (inside functions too); importing the wing itself (its ``__init__``) is the
    front door."""
    root = Path(root)
    modules = find_modules(root)
    sites = set()
    for e in import_edges(modules):
        wing = _subpackage(e.imported, modules)
        if wing in wings and e.imported != f"{root.name}.{wing}" and \
                _subpackage(e.importer, modules) != wing:
            sites.add((_relpath(modules[e.importer], root), e.line, e.imported, wing))
    return [f"back-door import in {path}:{line}: {name} (import its names from "
            f"{root.name}.{wing})" for path, line, name, wing in sorted(sites)]


def missing_inits(root) -> List[str]:
    root = Path(root)
    folders = sorted({p.parent for p in _source_files(root)})
    return [f"package folder without __init__.py: {folder.relative_to(root.parent)}"
            for folder in folders if not (folder / "__init__.py").is_file()]


def long_modules(root, limit: int = MAX_MODULE_LINES) -> List[str]:
    root = Path(root)
    problems = []
    for path in _source_files(root):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            problems.append(f"module over {limit} lines: {path.relative_to(root.parent)} ({n})")
    return problems


def _outer_functions(node: ast.AST, prefix: str = "") -> Iterator[Tuple[str, ast.AST]]:
    """Functions not nested in another function, with their qualified names (Class.method)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + child.name, child
        elif isinstance(child, ast.ClassDef):
            yield from _outer_functions(child, f"{prefix}{child.name}.")
        else:
            yield from _outer_functions(child, prefix)


def long_functions(root, limit: int = MAX_FUNCTION_LINES) -> List[str]:
    root = Path(root)
    problems = []
    for module in find_modules(root).values():
        if module.path.suffix != ".py":
            continue
        for name, fn in _outer_functions(_parse(module.path)):
            n = fn.end_lineno - fn.lineno + 1
            if n > limit:
                problems.append(f"function over {limit} lines: {_relpath(module, root)}:"
                                f"{fn.lineno} {name} ({n})")
    return sorted(problems)


ISO_DATE = re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b")
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")


def _prose(text: str) -> Iterator[Tuple[int, str]]:
    """``(line, text)`` of every comment and every docstring (any statement that is a bare string
    literal) of a Python source, one item per line of it."""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str):
            for i, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + i, line


def history_marks(root) -> List[str]:
    """One line per ISO date in a ``.py`` file and per commit hash in its comments and
    docstrings (approximate line numbers inside a docstring with escapes or continuations)."""
    root = Path(root)
    problems = []
    for path in _source_files(root):
        if path.suffix != ".py":
            continue
        rel = path.relative_to(root.parent)
        text = path.read_text(encoding="utf-8")
        for lineno, line in enumerate(text.splitlines(), 1):
            for m in ISO_DATE.finditer(line):
                problems.append(f"date in {rel}:{lineno}: {m.group(0)} (history belongs in "
                                f"docs/decisions.md)")
        for lineno, line in _prose(text):
            for m in COMMIT_HASH.finditer(line):
                problems.append(f"commit hash in {rel}:{lineno}: {m.group(0)} (history belongs "
                                f"in docs/decisions.md)")
    return sorted(set(problems))


ABSOLUTE_PATH = re.compile(r"(?<![\w.~$/-])/(?!path/to/)[A-Za-z0-9._-]+/")
LOAD_FIGURE = re.compile(r"\bload(?:avg| average)?:?\s+[0-9][0-9.]*", re.I)


def readme_marks(root) -> List[str]:
    """One line per mark of one machine or one run in ``README.md`` beside the package folder
    (the wheel's long description): an ISO date, a commit hash, an absolute path (placeholders
    under ``/path/to/`` allowed) or a load figure; none without that file."""
    page = Path(root).parent / "README.md"
    if not page.is_file():
        return []
    problems = []
    for lineno, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for what, rx in (("date", ISO_DATE), ("commit hash", COMMIT_HASH),
                         ("absolute path", ABSOLUTE_PATH), ("load figure", LOAD_FIGURE)):
            for m in rx.finditer(line):
                problems.append(f"{what} in README.md:{lineno}: {m.group(0)} (machine facts "
                                f"and history belong in docs/results.md)")
    return problems


DECISION_LINK = re.compile(r"docs/decisions\.md#([a-z0-9_-]+)")


def _anchor(title: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^a-z0-9 _-]", "", title.strip().lower()).replace(" ", "-")


def decision_links(root) -> List[str]:
    """One line per ``docs/decisions.md#anchor`` named in a ``.py`` file under ``root`` that no
    heading of ``docs/decisions.md`` (beside the package folder) has; none without that file."""
    root = Path(root)
    page = root.parent / "docs" / "decisions.md"
    if not page.is_file():
        return []
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.*)$", page.read_text(encoding="utf-8"),
                                               re.M)}
    problems = []
    for path in _source_files(root):
        if path.suffix != ".py":
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in DECISION_LINK.finditer(line):
                if m.group(1) not in anchors:
                    problems.append(f"broken link in {path.relative_to(root.parent)}:{lineno}: "
                                    f"{m.group(0)} (no such heading)")
    return problems


def digest_callers(root, limit: int = MAX_DIGEST_FILES) -> List[str]:
    """One problem when more than ``limit`` ``.py`` modules call :data:`DIGEST_CALL`, naming
    each with its lines (its definition is no call)."""
    root = Path(root)
    sites = {}
    for module in find_modules(root).values():
        if module.path.suffix == ".py":
            lines = [line for line, name in _called(_parse(module.path)) if name == DIGEST_CALL]
            if lines:
                sites[_relpath(module, root)] = lines
    if len(sites) <= limit:
        return []
    return [f"{DIGEST_CALL}( called from {len(sites)} modules (at most {limit}; take a key's "
            "digests from triemine.io.keys): " + "; ".join(
                f"{path}:{','.join(map(str, lines))}" for path, lines in sorted(sites.items()))]


def layout_problems(root) -> List[str]:
    """Every problem, in the order: cycles, subpackages importing each other, modules at the
    root, imports inside functions, launcher imports, runner calls outside the launcher, long
    stage drivers, long ``*_main`` commands, a thick ``api.py``, imports of the test fixtures,
    back-door imports of a wing, missing ``__init__.py``, long modules, long functions, dates and
    commit hashes, broken links
    to ``docs/decisions.md``, machine facts in the README, too many callers of the content
    digest."""
    return import_cycles(root) + package_cycles(root) + root_modules(root) + \
        inner_imports(root) + \
        launcher_imports(root) + runner_calls(root) + long_stage_drivers(root) + \
        long_mains(root) + thick_api(root) + testing_imports(root) + back_doors(root) + \
        missing_inits(root) + long_modules(root) + long_functions(root) + history_marks(root) + \
        decision_links(root) + readme_marks(root) + digest_callers(root)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[1] /
                                                  "triemine"),
                    help="the package folder (default: triemine/ of this checkout)")
    args = ap.parse_args(argv)
    root = Path(args.root)
    if not (root / "__init__.py").is_file():
        print(f"{root}: not a package folder (no __init__.py)", file=sys.stderr)
        return 2
    problems = layout_problems(root)
    for line in problems:
        print(line)
    stats = import_stats(root)
    print(f"import graph of {root.name}/: {stats['modules']} modules, {stats['imports']} "
          f"module-to-module imports, depth {stats['depth']}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
