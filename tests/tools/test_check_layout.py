"""scripts/check_layout.py: import cycles, subpackages importing each other, imports inside
functions, the launcher's imports, package folders, module and function lengths."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import check_layout  # noqa: E402


def _write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _package(tmp_path) -> Path:
    root = tmp_path / "pkg"
    _write(root, "__init__.py", '"""cheap"""\n')
    # a -> b at import time, b -> a inside a function: still a cycle
    _write(root, "sub/__init__.py", "from pkg.sub import a\n")
    _write(root, "sub/a.py", "from . import b\n")
    _write(root, "sub/b.py", "def f():\n    from pkg.sub.a import x\n    return x\n")
    # relative import two levels up, `import pkg.c` form, and a Cython module importing back
    _write(root, "c.py", "import pkg.other.d\n")
    _write(root, "other/__init__.py")
    _write(root, "other/d.py", "from ..fast import kernel\n")
    _write(root, "fast.pyx", "import numpy as np\ncimport numpy as cnp\nfrom pkg import c\n")
    # a folder of modules without __init__.py
    _write(root, "loose/e.py", "x = 1\n")
    return root


def test_cycles_resolve_relative_function_and_cython_imports(tmp_path):
    root = _package(tmp_path)
    cycles = check_layout.import_cycles(root)
    assert len(cycles) == 2, cycles
    ab = next(c for c in cycles if "pkg.sub.a" in c)
    assert "2 modules: pkg.sub.a, pkg.sub.b" in ab  # the package __init__ is no member
    assert "pkg/sub/b.py:2 -> pkg.sub.a" in ab
    cd = next(c for c in cycles if "pkg.c" in c)
    assert "3 modules: pkg.c, pkg.fast, pkg.other.d" in cd
    assert "pkg/fast.pyx:3 -> pkg.c" in cd


def test_missing_init_and_lengths(tmp_path):
    root = _package(tmp_path)
    assert check_layout.missing_inits(root) == ["package folder without __init__.py: pkg/loose"]
    def body(indent):
        return "".join(f"{' ' * indent}y = {i}\n" for i in range(8))

    # K.m: lines 2-21 (its nested inner() 3-12), then a blank line and 5 more: 27 lines
    _write(root, "long.py", "class K:\n    def m(self):\n        def inner():\n" + body(12)
           + "            return y\n" + body(8) + "        return inner\n" + "\n" + "z = 0\n" * 5)
    assert check_layout.long_modules(root, limit=20) == ["module over 20 lines: pkg/long.py (27)"]
    # the nested function counts in its outer method, which is reported once
    assert check_layout.long_functions(root, limit=10) == [
        "function over 10 lines: pkg/long.py:2 K.m (20)"]
    assert check_layout.long_functions(root, limit=20) == []
    problems = check_layout.layout_problems(root)
    assert len(problems) == 4 and problems[0].startswith("import cycle")
    assert "4 modules at the root of pkg/" in problems[2]  # __init__, c, fast, long


def _layered(tmp_path, name: str = "pkg") -> Path:
    """A package keeping issue 39's rules: subpackages import one way (mining -> decoding ->
    models, mining -> distributed -> filtering), root modules import subpackages (api -> mining)
    and are imported by them (paths), two imports of the package's modules inside functions."""
    root = tmp_path / name
    _write(root, "__init__.py", '"""cheap"""\n')
    _write(root, "paths.py", "import os\n")
    _write(root, "api.py", f"from {name}.mining import run\nfrom {name} import paths\n")
    _write(root, "models/__init__.py")
    _write(root, "models/m.py", f"from {name}.paths import os\n")
    _write(root, "decoding/__init__.py")
    _write(root, "decoding/d.py", f"from {name}.models import m\nimport {name}.paths\n")
    _write(root, "mining/__init__.py")
    _write(root, "mining/run.py",
           f"from {name}.decoding import d\nfrom {name}.distributed import pool\n"
           f"def f():\n    import torch\n    from ..models import m\n    return m, torch\n")
    _write(root, "filtering/__init__.py")
    _write(root, "filtering/f.py", "x = 1\n")
    _write(root, "distributed/__init__.py")
    _write(root, "distributed/pool.py",
           f"from {name}.filtering import f\nfrom {name} import paths\n"
           f"class P:\n    def g(self):\n        from {name}.paths import os\n        return os\n")
    return root


def test_subpackages_importing_each_other(tmp_path):
    root = _layered(tmp_path)
    assert check_layout.package_cycles(root) == []
    # models -> decoding inside a function closes a pair (and a module cycle, reported apart);
    # root modules (api imports mining, decoding imports api) never form a pair
    _write(root, "models/fidelity.py",
           "import os\ndef check():\n    from pkg.decoding.d import x\n    return x\n")
    _write(root, "filtering/g.py", "from pkg.mining import run\n")  # one way: no pair
    assert check_layout.package_cycles(root) == [
        "subpackages import each other: pkg.decoding <-> pkg.models "
        "(pkg/decoding/d.py:1 -> pkg.models.m | pkg/models/fidelity.py:3 -> pkg.decoding.d)"]
    assert check_layout.import_cycles(root) == []  # fidelity and d: no module circle
    _write(root, "mining/more.py", "import pkg.filtering.g\n")
    _write(root, "filtering/h.py", "from ..mining import more\n")
    pairs = check_layout.package_cycles(root)
    assert len(pairs) == 2 and pairs[1] == (
        "subpackages import each other: pkg.filtering <-> pkg.mining (pkg/filtering/g.py:1 -> "
        "pkg.mining.run; pkg/filtering/h.py:1 -> pkg.mining.more | pkg/mining/more.py:1 -> "
        "pkg.filtering.g)")


def test_imports_inside_functions_are_counted(tmp_path):
    root = _layered(tmp_path)
    # the package's modules only (relative ones too, methods too), one per statement; torch not
    assert check_layout.inner_import_sites(root) == ["pkg/distributed/pool.py:5",
                                                    "pkg/mining/run.py:5"]
    assert check_layout.inner_imports(root, limit=2) == []
    _write(root, "filtering/f.py", "def outer():\n    def inner():\n"
           "        from pkg import paths, api\n        return paths, api\n    return inner\n")
    assert check_layout.inner_imports(root, limit=3) == []
    assert check_layout.inner_imports(root, limit=2) == [
        "3 imports of pkg modules inside functions (at most 2; move them to the module top, or "
        "move code where they form a cycle): pkg/distributed/pool.py:5, pkg/filtering/f.py:3, "
        "pkg/mining/run.py:5"]


def test_the_launcher_imports_none_of_the_job(tmp_path):
    root = _layered(tmp_path)
    assert check_layout.launcher_imports(root) == []
    _write(root, "distributed/worker.py", "import pkg.models.m\nfrom pkg.filtering import f\n"
           "def run():\n    from ..mining import run\n    from pkg.scoring import s\n")
    _write(root, "scoring/__init__.py")
    _write(root, "scoring/s.py", "x = 1\n")
    assert check_layout.launcher_imports(root) == [
        f"launcher import in pkg/distributed/worker.py:{line}: {name} (pkg/distributed/ imports "
        "nothing from mining, decoding, embedding, scoring, models)"
        for line, name in ((1, "pkg.models.m"), (4, "pkg.mining.run"), (5, "pkg.scoring.s"))]


def test_only_the_runner_opens_stores_plans_and_shows_progress(tmp_path):
    root = _layered(tmp_path)
    _write(root, "distributed/__init__.py")
    _write(root, "distributed/stage.py", "def run(s):\n    return ShardStore(s), plan_shards(s)\n")
    assert check_layout.runner_calls(root) == []
    _write(root, "mining/shards.py", "from x import progress_bar, shards\n"
           "def f(n):\n    bar = progress_bar(n)\n    return shards.ShardStore(n)\n")
    assert check_layout.runner_calls(root) == [
        f"runner call outside pkg/distributed/: pkg/mining/shards.py:{line} {name}("
        for line, name in ((3, "progress_bar"), (4, "ShardStore"))]


def test_a_stage_driver_is_at_most_30_lines(tmp_path):
    root = _layered(tmp_path)
    body = "".join(f"    x{i} = {i}\n" for i in range(28))
    _write(root, "mining/drive.py", "def short(pool):\n" + body + "    return run_stage(x, pool)\n"
           "def long(pool):\n" + body + "    y = 1\n    return run_stage(x, pool)\n"
           "def other(pool):\n" + body * 2 + "    return pool\n")
    assert check_layout.long_stage_drivers(root) == [
        "stage driver over 30 lines: pkg/mining/drive.py:31 long (31)"]


def test_a_command_main_is_at_most_25_lines(tmp_path):
    root = _layered(tmp_path)
    assert check_layout.long_mains(root) == []  # no cli.py: nothing to check
    body = "".join(f"    x{i} = {i}\n" for i in range(23))
    # short_main: 25 lines; long_main: 26 lines, its nested body counted; _long_parser: no
    # command; cli.py elsewhere than at the root: not the command-line layer
    _write(root, "cli.py", "def short_main(argv=None):\n" + body + "    return 0\n"
           "def long_main(argv=None):\n    def body(args):\n" + body.replace("    ", "        ")
           + "        return 0\n"
           "def _long_parser():\n" + body * 2 + "    return 0\n")
    _write(root, "mining/cli.py", "def deep_main(argv=None):\n" + body * 2 + "    return 0\n")
    assert check_layout.long_mains(root) == [
        "command over 25 lines: pkg/cli.py:26 long_main (26; its parser goes in "
        "_long_parser(), its work beside the code it serves)"]
    assert check_layout.long_mains(root, limit=26) == []
    assert check_layout.layout_problems(root) == \
        check_layout.root_modules(root) + check_layout.long_mains(root)  # cli.py: a 4th module


def test_the_api_is_at_most_200_lines_and_imports_no_decoding_or_launcher(tmp_path):
    root = _layered(tmp_path)
    assert check_layout.thick_api(root) == []  # api.py imports mining only
    _write(root, "api.py", "from pkg.mining import run\n" + "x = 1\n" * 199)
    assert check_layout.thick_api(root) == []  # 200 lines
    _write(root, "api.py", "from pkg.mining import run\nimport pkg.decoding.d\n"
           "def f():\n    from pkg.distributed import pool\n    return pool\n" + "x = 1\n" * 196)
    assert check_layout.thick_api(root) == [
        "api over 200 lines: pkg/api.py (201; what is not the public API's argument checks, "
        "lock and driver call goes beside what it serves)",
        "api import in pkg/api.py:2: pkg.decoding.d (the job driver imports decoding, "
        "distributed; api.py calls the driver)",
        "api import in pkg/api.py:4: pkg.distributed.pool (the job driver imports decoding, "
        "distributed; api.py calls the driver)"]
    assert check_layout.thick_api(root, limit=201)[0].startswith("api import in pkg/api.py:2")


def test_only_the_testing_folder_imports_the_test_fixtures(tmp_path):
    root = _layered(tmp_path)
    _write(root, "testing/__init__.py")
    _write(root, "testing/tiny.py", "from pkg.models import m\nfrom pkg.testing import t\n")
    _write(root, "testing/t.py", "x = 1\n")
    assert check_layout.testing_imports(root) == []  # testing imports models and itself
    _write(root, "decoding/d.py", "from pkg.models import m\ndef f():\n"
           "    from pkg.testing.tiny import x\n    return x\n")
    _write(root, "api.py", "import pkg.testing\n")
    assert check_layout.testing_imports(root) == [
        "testing import in pkg/api.py:1: pkg.testing (pkg/testing/ serves the tests, benchmarks "
        "and scripts, not the package)",
        "testing import in pkg/decoding/d.py:3: pkg.testing.tiny (pkg/testing/ serves the "
        "tests, benchmarks and scripts, not the package)"]
    assert check_layout.layout_problems(root) == check_layout.testing_imports(root)


def test_the_io_wing_is_entered_by_its_front_door(tmp_path):
    root = _layered(tmp_path)
    _write(root, "io/__init__.py", "from pkg.io.files import atomic_write\n")
    _write(root, "io/files.py", "from pkg.io.text import describe\natomic_write = describe\n")
    _write(root, "io/text.py", "describe = 1\n")
    _write(root, "filtering/f.py", "from pkg.io import atomic_write\n")
    assert check_layout.back_doors(root) == []  # the wing's modules import each other freely
    _write(root, "filtering/f.py", "from pkg.io import atomic_write\nfrom pkg.io import files\n")
    _write(root, "mining/m.py", "def f():\n    from pkg.io.text import describe\n"
           "    return describe\n")
    assert check_layout.back_doors(root) == [
        "back-door import in pkg/filtering/f.py:2: pkg.io.files (import its names from pkg.io)",
        "back-door import in pkg/mining/m.py:2: pkg.io.text (import its names from pkg.io)"]
    assert check_layout.layout_problems(root) == check_layout.back_doors(root)


def test_main_exit_status(tmp_path, capsys):
    root = tmp_path / "clean"
    _write(root, "__init__.py", "from clean import m\n")
    _write(root, "m.py", "import os\n")
    assert check_layout.main([str(root)]) == 0
    assert check_layout.main([str(_layered(tmp_path, "layered"))]) == 0
    assert check_layout.main([str(_package(tmp_path))]) == 1
    assert capsys.readouterr().out.count("\n") == 3


def test_the_package_keeps_the_layout_rules():
    """Every rule on the whole package: no import circle and no two subpackages importing each
    other (imports inside functions count), at most 10 imports of triemine modules inside
    functions, a launcher (triemine/distributed/) that imports no stage, no *_main in cli.py
    over 25 lines, an api.py of at most 200 lines importing neither decoding nor distributed,
    every package folder with an __init__.py, no module over 500 lines, no function over 120,
    no dates or commit hashes, no broken link to docs/decisions.md."""
    root = Path(__file__).resolve().parents[2] / "triemine"
    assert check_layout.layout_problems(root) == []


def test_history_marks_in_comments_and_docstrings_only(tmp_path):
    root = tmp_path / "pkg"
    _write(root, "__init__.py", '"""cheap"""\n')
    _write(
        root,
        "clean.py",
        '"""Hashes of chunks: ``sha256(...)``; 123456789 is digits only, deadbeefcafe letters."""\n'
        "PRIME = 1000003  # a constant\n"
        "MASK = 0xdeadbeef1234\n"
        "KEY = 'abc1234def'  # a string in code, not a docstring\n",
    )
    _write(root, "dirty.py",
           '"""Scores.\n\nFaster since 1593d58 (measured 2026-11-25)."""\n'
           "X = 1  # chunk of 428 pairs, see 44e2d76\n"
           "def f():\n"
           '    """Inner docstring naming ab12cd3ef."""\n'
           "STAMP = '2026-11-26'\n")
    problems = check_layout.history_marks(root)
    assert problems == sorted([
        "commit hash in pkg/dirty.py:3: 1593d58 (history belongs in docs/decisions.md)",
        "commit hash in pkg/dirty.py:4: 44e2d76 (history belongs in docs/decisions.md)",
        "commit hash in pkg/dirty.py:6: ab12cd3ef (history belongs in docs/decisions.md)",
        "date in pkg/dirty.py:3: 2026-11-25 (history belongs in docs/decisions.md)",
        "date in pkg/dirty.py:7: 2026-11-26 (history belongs in docs/decisions.md)",
    ]), problems
    assert all("history belongs" in p for p in check_layout.layout_problems(root))


def test_package_has_no_history_marks():
    root = Path(__file__).resolve().parents[2] / "triemine"
    assert check_layout.history_marks(root) == []


def test_decision_links_name_headings(tmp_path):
    root = tmp_path / "pkg"
    _write(root, "__init__.py",
           "# see docs/decisions.md#why-numpys-blas and docs/decisions.md#gone\n")
    assert check_layout.decision_links(root) == []          # no docs/decisions.md: nothing to check
    _write(tmp_path, "docs/decisions.md", "# Decisions\n\n## Area\n\n### Why numpy's BLAS\n")
    assert check_layout.decision_links(root) == [
        "broken link in pkg/__init__.py:1: docs/decisions.md#gone (no such heading)"]


def test_readme_marks_of_a_machine_or_a_run(tmp_path):
    root = tmp_path / "pkg"
    _write(root, "__init__.py", '"""cheap"""\n')
    assert check_layout.readme_marks(root) == []            # no README.md: nothing to check
    _write(tmp_path, "README.md",
           "# Tool\n"
           "Install into `/path/to/env`; read `../shared`, `docs/x.md`, `$HOME/.cache/x`.\n"
           "Measured 2026-11-26 at commit `f4f83f1060`, load 0.6 at start.\n"
           "`bench.py --work /work/b39/bb` on ~/data, sha 0x1f; 1,000 pairs in 4 min 22 s.\n")
    assert check_layout.readme_marks(root) == [
        "date in README.md:3: 2026-11-26 (machine facts and history belong in docs/results.md)",
        "commit hash in README.md:3: f4f83f1060 (machine facts and history belong in "
        "docs/results.md)",
        "load figure in README.md:3: load 0.6 (machine facts and history belong in "
        "docs/results.md)",
        "absolute path in README.md:4: /work/ (machine facts and history belong in "
        "docs/results.md)",
    ]


def test_the_readme_holds_no_machine_facts():
    root = Path(__file__).resolve().parents[2] / "triemine"
    assert check_layout.readme_marks(root) == []


def test_every_environment_variable_is_documented():
    """docs/environment.md names every ``TRIEMINE_*`` variable the package, benches, scripts or
    tests read, and none that nothing reads."""
    import re

    repo = Path(__file__).resolve().parents[2]
    used = set()
    for folder in ("triemine", "bench", "scripts", "tests"):
        for path in (repo / folder).rglob("*"):
            if path.suffix in (".py", ".pyx", ".sh") and path.is_file():
                used |= set(re.findall(r"\bTRIEMINE_[A-Z_]+\b", path.read_text(encoding="utf-8")))
    used |= set(re.findall(r"\bTRIEMINE_[A-Z_]+\b", (repo / "Makefile").read_text()))
    page = (repo / "docs" / "environment.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(TRIEMINE_[A-Z_]+)` \|", page, re.M))
    assert used and used == documented, (sorted(used - documented), sorted(documented - used))


def test_the_content_digest_is_called_from_at_most_three_modules(tmp_path):
    root = tmp_path / "pkg"
    _write(root, "__init__.py")
    _write(root, "paths.py", "def content_sha256(p):\n    return p\n")  # its definition: no call
    for name in ("keys", "a", "b"):
        _write(root, f"{name}.py", "from pkg.paths import content_sha256\n"
               "d = content_sha256('x')\n")
    assert check_layout.digest_callers(root) == []  # three
    _write(root, "sub/__init__.py")
    _write(root, "sub/c.py",
           "import pkg.paths\n\n\ndef f(p):\n    return pkg.paths.content_sha256(p)\n")
    assert check_layout.digest_callers(root) == [
        "content_sha256( called from 4 modules (at most 3; take a key's digests from "
        "triemine.io.keys): pkg/a.py:2; pkg/b.py:2; pkg/keys.py:2; pkg/sub/c.py:5"]
    assert check_layout.digest_callers(root, limit=4) == []


def test_the_package_calls_the_content_digest_from_its_keys_and_copies_only():
    root = Path(__file__).resolve().parents[2] / "triemine"
    assert check_layout.digest_callers(root) == []


def test_the_root_holds_at_most_3_modules(tmp_path):
    root = _layered(tmp_path)  # __init__.py, api.py, paths.py
    assert check_layout.root_modules(root) == []
    _write(root, "extra.py", "x = 1\n")
    assert check_layout.root_modules(root) == [
        "4 modules at the root of pkg/ (at most 3): __init__.py, api.py, extra.py, paths.py "
        "(move them into a named subpackage)"]
    assert check_layout.layout_problems(root) == check_layout.root_modules(root)
    assert check_layout.root_modules(root, limit=4) == []


def test_a_root_module_and_a_subpackage_may_not_import_each_other(tmp_path):
    root = _layered(tmp_path)
    assert check_layout.package_cycles(root) == []  # api -> mining, paths imported by all
    _write(root, "filtering/f.py", "def f():\n    from pkg import api\n    return api\n")
    _write(root, "api.py", "from pkg.filtering import f\n")
    assert check_layout.package_cycles(root) == [
        "subpackages import each other: pkg.api <-> pkg.filtering (pkg/api.py:1 -> "
        "pkg.filtering.f | pkg/filtering/f.py:2 -> pkg.api)"]


def test_import_stats_count_modules_imports_and_the_longest_chain(tmp_path):
    root = tmp_path / "pkg"
    _write(root, "__init__.py", '"""cheap"""\n')
    _write(root, "a.py", "from pkg import b\nfrom pkg import c\n")
    _write(root, "b.py", "def f():\n    from pkg import c\n    return c\n")  # inner: counted
    _write(root, "c.py", "import os\nfrom pkg import d\n")
    _write(root, "d.py", "from pkg import c\n")  # c <-> d: one component, no infinite depth
    stats = check_layout.import_stats(root)
    assert stats == {"modules": 5, "imports": 5, "depth": 2}  # a -> b -> {c, d}


def test_long_mains_reads_the_cli_subpackage(tmp_path):
    root = _layered(tmp_path)
    body = "".join(f"    x{i} = {i}\n" for i in range(24))
    _write(root, "cli/__init__.py")
    _write(root, "cli/mine.py", "def mine_main(argv=None):\n" + body + "    return 0\n")
    assert check_layout.long_mains(root) == [
        "command over 25 lines: pkg/cli/mine.py:1 mine_main (26; its parser goes in "
        "_mine_parser(), its work beside the code it serves)"]
