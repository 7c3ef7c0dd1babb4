"""Mutation runs over the central modules: does a test fail when the code is
wrong? Not part of CI (a run takes tens of minutes); run it after changing one
of these modules, and list what survives in docs/architecture.md ("Tests").

    .venv/bin/python scripts/mutate.py                      # every target
    .venv/bin/python scripts/mutate.py --target layout --max 20
    .venv/bin/python scripts/mutate.py --list               # the mutants only

Each target is a module, the functions in it that carry a promise, and the
tests that hold it to them. A mutant is one small change at one place in those
functions, of the kinds a slip makes: a comparison turned (``<`` to ``<=``,
``==`` to ``!=``, ``in`` to ``not in``), ``and`` for ``or``, a ``not`` dropped,
``True`` for ``False``, a small number off by one, ``min`` for ``max``, a
``return x`` returning None, a call made for its effect left out. Each runs in
a copy of the checkout (the working tree is never touched), with that target's
tests, stopping at the first failure: a failing or hanging run kills the
mutant; one that passes is a survivor, printed with its place. Mutants that do
not compile are skipped. The tests run offline, as the default suite does.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    module: str                   # path under the repository
    functions: tuple[str, ...]    # where mutants go
    tests: tuple[str, ...]        # pytest arguments that hold them


TARGETS = {
    "lock-read": Target(
        "stacklock/lock/read.py",
        ("parse_lock_document", "_check_unique", "_check_sources", "_check_url",
         "_package"),
        ("tests/integration/test_lock.py", "tests/integration/test_hostile_input.py",
         "tests/integration/test_foreign_locks.py")),
    "lock-write": Target(
        "stacklock/lock/write.py",
        ("_value", "_lines", "_wheel", "_package", "_tool_table", "render_lock"),
        ("tests/integration/test_lock_render.py", "tests/integration/test_lock.py")),
    "choice": Target(
        "stacklock/resolve/preferences.py", ("locked_first",),
        ("tests/integration/test_resolve_choices.py",
         "tests/integration/test_resolve_keeps_lock.py")),
    "provider": Target(
        "stacklock/resolve/provider.py",
        ("find_matches", "_preference", "_match", "_versions"),
        ("tests/integration/test_resolve_choices.py",
         "tests/integration/test_resolve_keeps_lock.py",
         "tests/unit/test_resolve_provider.py", "tests/unit/test_resolve.py",
         "tests/unit/test_resolve_learned.py")),
    "tag-rank": Target(
        "stacklock/index/evaluate.py", ("evaluate",),
        ("tests/unit/test_finder.py", "tests/integration/test_resolve_choices.py")),
    "native-verdict": Target(
        "stacklock/native/check.py",
        ("find_incompatibilities", "_judge_family", "_missing_sonames",
         "_missing_symbols", "_selected"),
        ("tests/unit/test_native_check.py", "tests/integration/test_native_cli.py")),
    "layout": Target(
        "stacklock/install/layout.py",
        ("current_generation", "holds_lock", "refuse_running_environment",
         "recover", "swap_in", "rollback", "_replaced", "prune"),
        ("tests/integration/test_install_venv.py",
         "tests/integration/test_install_faults.py",
         "tests/integration/test_install_own_venv.py",
         "tests/integration/test_install_stopped.py")),
    "diff": Target(
        "stacklock/diff/compare.py",
        ("_diff_package", "_version_change", "_build_change", "_index_moved",
         "_hash_change"),
        ("tests/integration/test_diff.py", "tests/integration/test_diff_kinds.py",
         "tests/integration/test_patches_verbs.py")),
    "hashes": Target(
        "stacklock/store.py", ("path_for", "fetch", "_keep", "_known"),
        ("tests/unit/test_store.py", "tests/integration/test_install_uv_fetch.py")),
    "resolve-hashes": Target(
        "stacklock/resolve/hashes.py", ("settle_wheel", "known_wheel", "_chosen_file"),
        ("tests/integration/test_resolve_indexes.py",
         "tests/integration/test_resolve_keeps_lock.py", "tests/unit/test_resolve.py")),
    "generation-check": Target(
        "stacklock/install/verify.py", ("_installed", "check_generation"),
        ("tests/integration/test_install_faults.py",
         "tests/integration/test_install_venv.py",
         "tests/integration/test_hostile_install.py::"
         "test_a_directory_installs_as_it_is_when_install_runs")),
}

_TURN = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
         ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn,
         ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


@dataclass(frozen=True)
class Mutant:
    line: int
    what: str
    source: str  # the whole module, mutated


class _Mutator(ast.NodeTransformer):
    """Makes the ``n``-th possible mutation in the chosen functions; counts
    them all (``seen``) whichever it makes."""

    def __init__(self, functions: tuple[str, ...], n: int) -> None:
        self.functions, self.n, self.seen = functions, n, 0
        self.inside = 0
        self.made: tuple[int, str] | None = None

    def _hit(self, node: ast.AST, what: str) -> bool:
        if not self.inside:
            return False
        self.seen += 1
        if self.seen - 1 == self.n:
            self.made = (getattr(node, "lineno", 0), what)
            return True
        return False

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        mine = node.name in self.functions
        self.inside += mine
        self.generic_visit(node)
        self.inside -= mine
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        turned = _TURN.get(type(node.ops[0]))
        if turned is not None and self._hit(
                node, f"{type(node.ops[0]).__name__} -> {turned.__name__}"):
            node.ops = [turned(), *node.ops[1:]]
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        other = ast.Or if isinstance(node.op, ast.And) else ast.And
        if self._hit(node, f"{type(node.op).__name__} -> {other.__name__}"):
            node.op = other()
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self._hit(node, "not dropped"):
            return node.operand
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, bool):
            if self._hit(node, f"{node.value} -> {not node.value}"):
                return ast.copy_location(ast.Constant(not node.value), node)
        elif isinstance(node.value, int) and 0 <= node.value <= 64 and \
                self._hit(node, f"{node.value} -> {node.value + 1}"):
            return ast.copy_location(ast.Constant(node.value + 1), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = getattr(node.func, "id", None)
        if name in ("min", "max") and self._hit(
                node, f"{name} -> {'max' if name == 'min' else 'min'}"):
            node.func = ast.copy_location(
                ast.Name("max" if name == "min" else "min", ast.Load()), node.func)
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        self.generic_visit(node)
        if node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None) \
                and self._hit(node, "returns None"):
            node.value = ast.copy_location(ast.Constant(None), node.value)
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Call) and self._hit(node, "call left out"):
            return ast.copy_location(ast.Pass(), node)
        return node


def mutants(target: Target) -> list[Mutant]:
    text = (ROOT / target.module).read_text("utf-8")
    counter = _Mutator(target.functions, -1)
    counter.visit(ast.parse(text))
    found = []
    for n in range(counter.seen):
        mutator = _Mutator(target.functions, n)
        tree = ast.fix_missing_locations(mutator.visit(ast.parse(text)))
        assert mutator.made is not None
        try:
            source = ast.unparse(tree)
            compile(source, target.module, "exec")
        except (SyntaxError, ValueError):
            continue
        found.append(Mutant(line=mutator.made[0], what=mutator.made[1],
                            source=source))
    return found


def _copy() -> Path:
    """The checkout's tracked and untracked files (not .git, not the venv)."""
    where = Path(tempfile.mkdtemp(prefix="stacklock-mutate-"))
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True)
    for name in listed.stdout.splitlines():
        source = ROOT / name
        if source.is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, where / name)
    return where


def run_tests(copy: Path, tests: tuple[str, ...], timeout: float) -> str:
    """``killed``, ``survived`` or ``timeout`` (killed: a hang is a failure)."""
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0",
             "-p", "no:cacheprovider", *tests], cwd=copy, env=env,
            capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "timeout"
    return "survived" if done.returncode == 0 else "killed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", action="append", choices=sorted(TARGETS),
                        help="only this target (repeatable; default all)")
    parser.add_argument("--max", type=int, default=0,
                        help="at most N mutants a target, spread over it")
    parser.add_argument("--timeout", type=float, default=0.0,
                        help="seconds one run may take (a hang kills the mutant; "
                        "default: 5 times the unmutated run, at least 30)")
    parser.add_argument("--lines", type=lambda t: {int(n) for n in t.split(",")},
                        help="only the mutants at these lines (comma-separated): "
                        "the survivors of the last run, once tests were added")
    parser.add_argument("--tests", nargs="+", metavar="TEST",
                        help="pytest arguments instead of the target's tests (to "
                        "try a new test against the survivors)")
    parser.add_argument("--list", action="store_true", help="list, run nothing")
    args = parser.parse_args(argv)
    names = args.target or sorted(TARGETS)
    copy = None if args.list else _copy()
    survivors: list[str] = []
    try:
        for name in names:
            target = TARGETS[name]
            tests = tuple(args.tests) if args.tests else target.tests
            found = mutants(target)
            if args.lines:
                found = [m for m in found if m.line in args.lines]
            if args.max and len(found) > args.max:  # evenly over the module
                found = [found[i * len(found) // args.max] for i in range(args.max)]
            timeout = args.timeout
            if copy is not None:  # the unmutated tests pass first
                started = time.monotonic()
                assert run_tests(copy, tests, timeout or 600.0) == "survived", \
                    f"{name}: the tests fail without a mutant"
                timeout = timeout or max(30.0, 5 * (time.monotonic() - started))
            killed = 0
            for mutant in found:
                place = f"{target.module}:{mutant.line}: {mutant.what}"
                if copy is None:
                    print(place)
                    continue
                module = copy / target.module
                original = module.read_text("utf-8")
                module.write_text(mutant.source, "utf-8")
                started = time.monotonic()
                try:
                    verdict = run_tests(copy, tests, timeout)
                finally:
                    module.write_text(original, "utf-8")
                print(f"{verdict:8} {time.monotonic() - started:6.1f} s  {place}",
                      flush=True)
                if verdict == "survived":
                    survivors.append(place)
                else:
                    killed += 1
            if copy is not None:
                print(f"{name}: {killed} of {len(found)} killed", flush=True)
    finally:
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)
    if survivors:
        print("survivors:\n" + "\n".join(f"  {s}" for s in survivors))
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main())
