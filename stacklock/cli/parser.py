"""The argument parser: one ``_add_*`` function per verb. Each verb names the
function that runs it (``verb="module:function"`` under ``stacklock.cli``), which
:func:`stacklock.cli.main` imports only when that verb runs (as pip names its
commands), so the parser and ``--help`` load no command's code."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, NoReturn

from stacklock import __version__
from stacklock.errors import StacklockError


class UsageError(StacklockError):
    """A command line argparse refuses: exit 2, one line (and with ``--json`` the
    error document) like every other bad input."""

    def __init__(self, message: str, *, prog: str) -> None:
        super().__init__(message, hint=f"see '{prog} --help'")

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})"


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other bad input: what is wrong and where
    the help is (the usage block argparse prints first is left to ``--help``)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, prog=self.prog)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None,
        namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        """An empty argument (``--venv "$VENV"`` of an unset variable) is an
        error naming it, never the working directory or the option's absence."""
        parsed, extra = super().parse_known_args(args, namespace)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue  # its dest holds the verb, then the command after --
            value = getattr(parsed, action.dest, None)
            values = value if isinstance(value, list) else [value]
            if any(isinstance(v, str) and not v.strip() for v in values):
                name = (action.option_strings[-1] if action.option_strings
                        else action.metavar or action.dest)
                self.error(f"{name} is empty (an unset variable?)")
        return parsed, extra


class _CommandParser(_Parser):
    """A verb that runs a command: everything after the first ``--`` is that
    command (``args.command``), options before it may come in any order."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None,
        namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        head = list(args or ())
        tail: list[str] = []
        if "--" in head:
            cut = head.index("--")
            head, tail = head[:cut], head[cut + 1:]
        parsed, extra = super().parse_known_args(head, namespace)
        parsed.command = tail
        return parsed, extra


if TYPE_CHECKING:
    from collections.abc import Sequence

    _Sub = argparse._SubParsersAction[_Parser]

__all__ = ["UsageError", "build_parser", "check_step_options"]


def check_step_options(args: argparse.Namespace) -> None:
    """bisect's and update's step options: --max-steps and --step-timeout above
    zero and finite (nan and inf bound nothing), --repeat 0 for its default."""
    finite = 0 < args.step_timeout < float("inf")  # nan compares false
    if args.repeat < 0 or args.max_steps < 1 or not finite:
        raise StacklockError("--max-steps, --step-timeout and --repeat take a "
                             "number >= 1 (--repeat 0: its default)")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the command line it will parse, only its verb's
    arguments are declared (a command runs sooner: declaring every verb's costs
    about as long as loading argparse). ``--help`` and a mistyped verb get all."""
    parser = _Parser(
        prog="stacklock",
        description="Lock, install, validate and diff GPU software stacks.",
        epilog="exit codes:\n  0    ok\n  1    the answer is no: a conflict, a "
               "check that fails, locks that differ\n  2    bad input\n  3    an "
               "index or host that does not answer\n  4    update: the lock changed "
               "(written)\n  129  hung up (SIGHUP)\n  130  interrupted (Ctrl-C)\n"
               "  143  terminated (SIGTERM)\n\n"
               "example:\n  stacklock resolve pypi-cu130 && stacklock install "
               "locks/pylock.pypi-cu130.toml --venv /opt/ml-env",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"stacklock {__version__}"
    )
    _add_loudness(parser, dest="loudness")  # before the verb too: stacklock -q VERB
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    verb = next((a for a in argv or () if not a.startswith("-")), None)
    adders = _VERBS.values() if verb not in _VERBS else (_VERBS[verb],)
    for add in adders:
        add(sub)
    for name, leaf in _leaves(sub):
        _finish(name, leaf)
    return parser


_JSON_HELP = "print the result as JSON (stable keys) instead of text"
# The example each verb's --help ends with, by its name under ``stacklock``.
_EXAMPLES = {
    "profiles": "stacklock profiles",
    "links": "stacklock links sgl-kernel --profile blackwell-cu130 --python 3.12",
    "resolve": "stacklock resolve blackwell-cu130 -o locks/pylock.blackwell-cu130"
               ".toml",
    "check": "stacklock check locks/pylock.pypi-cu130.toml --offline",
    "cuda list": "stacklock cuda list --platform linux-sbsa",
    "cuda show": "stacklock cuda show 13.0",
    "cuda check-driver": "stacklock cuda check-driver --lock "
                         "locks/pylock.blackwell-cu130.toml",
    "cuda refresh": "stacklock cuda refresh --version 13.0.1",
    "install": "stacklock install locks/pylock.pypi-small.toml --venv /opt/ml-env "
               "--dry-run",
    "pack": "stacklock pack locks/pylock.pypi-small.toml -o pypi-small.pack",
    "snapshot": "stacklock snapshot --venv /opt/ml-env -o pylock.snapshot.toml",
    "diff": "stacklock diff locks/pylock.blackwell-cu128.toml "
            "locks/pylock.blackwell-cu130.toml --format markdown",
    "validate": "stacklock validate locks/pylock.pypi-cu130.toml --venv /opt/ml-env "
                "--report out/",
    "fleet install": "stacklock fleet install stack.pack -i hosts.ini --report "
                     "fleet/",
    "fleet report": "stacklock fleet report fleet/",
    "bisect": "stacklock bisect good.toml bad.toml -- python -c 'import torch'",
    "archive": "stacklock archive locks/pylock.blackwell-cu130-nightly.toml "
               "s3://team-wheels/stacklock",
    "update": "stacklock update blackwell-cu130-nightly --prereleases --summary "
              "update.md --validate -- python bench.py",
}


def _add_loudness(p: argparse.ArgumentParser, *, dest: str) -> None:
    loud = p.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", dest=dest, action="store_const",
                      const=-1, help="print errors only (--json output stays)")
    loud.add_argument("-v", "--verbose", dest=dest, action="count",
                      help="print every line (-vv: and each request)")
    p.set_defaults(**{dest: 0})


def _add_archive(p: argparse.ArgumentParser) -> None:
    p.add_argument("--archive", metavar="URL",
                   help="an archive made by stacklock archive (folder, file://, "
                        "s3:// or https://): a file whose URL is gone (HTTP 403, "
                        "404, 410, unknown host) comes from there, checked against "
                        "its sha256 (default: STACKLOCK_ARCHIVE, else the "
                        "lock's [tool.stacklock.archive])")
    p.add_argument("--archive-first", action="store_true",
                   help="ask the archive before the original URLs "
                        "(STACKLOCK_ARCHIVE_FIRST=1)")


def _leaves(sub: _Sub, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    """Every parser that runs a verb, by its name (``cuda show``)."""
    found = []
    for name, parser in sub.choices.items():
        nested = [a for a in parser._actions
                  if isinstance(a, argparse._SubParsersAction)]
        if nested:
            found.extend(_leaves(nested[0], f"{prefix}{name} "))
        else:
            found.append((f"{prefix}{name}", parser))
    return found


def _finish(name: str, p: argparse.ArgumentParser) -> None:
    """What every verb has: -q / -v, help for --json, an example at the end."""
    _add_loudness(p, dest="verbosity")
    for action in p._actions:
        if action.dest == "json" and action.help is None:
            action.help = _JSON_HELP
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    example = f"example:\n  {_EXAMPLES[name]}" if name in _EXAMPLES else ""
    p.epilog = "\n\n".join(t for t in (p.epilog, example) if t)


def _add_profiles(sub: _Sub) -> None:
    p = sub.add_parser("profiles", help="list the profiles a name finds (built-in "
                       "and ./profiles), with origin and description")
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="profiles:profiles")


def _add_links(sub: _Sub) -> None:
    p = sub.add_parser(
        "links", help="list every link an index has for a project, and why each "
        "fits the target or not")
    p.add_argument("project", help="the project name, e.g. torch")
    p.add_argument("--index", metavar="[NAME=]URL",
                   help="https URL of a simple index, a file:// URL or a folder "
                        "(default: the --profile's index for PROJECT, else PyPI)")
    p.add_argument("--profile", metavar="PROFILE",
                   help="take the index and the target from this profile")
    p.add_argument("--all", action="store_true",
                   help="every link, one a line (default: a summary of the newest "
                        "10 versions and the counts)")
    p.add_argument("--flat", action="store_true",
                   help="the URL is a find-links page, not a simple index root")
    p.add_argument("--python", help="the target's Python version (default 3.12, "
                   "or the --profile's)")
    p.add_argument("--platform", help="the target's platform: linux_x86_64 or "
                   "linux_aarch64 (default linux_x86_64, or the --profile's)")
    p.add_argument("--manylinux", help="the target's glibc floor, e.g. 2_28 "
                   "(default 2_28, or the --profile's)")
    p.add_argument("--exclude-newer", metavar="TIME",
                   help="judge links uploaded after this RFC 3339 time as too new, "
                        "e.g. 2026-02-15T00:00:00Z")
    p.add_argument("--offline", action="store_true", help="use only the page cache")
    p.add_argument("--refresh", action="store_true",
                   help="revalidate cached pages with the index")
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="links:links")


def _add_resolve(sub: _Sub) -> None:
    p = sub.add_parser("resolve", help="resolve a profile into a PEP 751 lock")
    p.add_argument("profile", metavar="PROFILE", nargs="?",
                   help="a built-in profile name or a path to a .toml file "
                        "(--check without it: every locks/pylock.NAME.toml "
                        "against the profile NAME)")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="where to write the lock (default locks/pylock.PROFILE.toml)")
    p.add_argument("--index", action="append", default=[], metavar="NAME=URL",
                   help="point the profile's index NAME at another URL (a mirror)")
    p.add_argument("--offline", action="store_true",
                   help="use only the caches; no network")
    p.add_argument("--refresh", action="store_true",
                   help="revalidate cached pages with the indexes")
    p.add_argument("--no-check", action="store_true",
                   help="write the lock without the native check (stacklock check)")
    p.add_argument("--upgrade", action="store_true",
                   help="ignore the existing lock's pins (by default its versions "
                        "are kept while the profile allows them)")
    p.add_argument("--upgrade-package", action="append", default=[], metavar="NAME",
                   help="release the existing lock's pin of NAME (repeatable)")
    p.add_argument("--check", "--locked", dest="check", action="store_true",
                   help="write nothing; exit 0 if the lock is what resolving "
                        "would write, else 1 with what differs (for CI)")
    _add_timeout(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="resolve:resolve")


def _add_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="seconds one request may take in all (default 120, or "
                        "STACKLOCK_HTTP_TIMEOUT); the whole resolve's requests "
                        "end after STACKLOCK_RUN_TIMEOUT (default 1800)")


def _add_update(sub: _Sub) -> None:
    p = sub.add_parser(
        "update", help="re-resolve a profile for a scheduled job: write the lock and "
        "a summary when it changes; --validate installs, validates and bisects",
        usage="stacklock update PROFILE [options] [--validate [-- CMD [ARGS...]]]")
    p.__class__ = _CommandParser  # the oracle CMD [ARGS...] after "--", as it is
    p.add_argument("profile", metavar="PROFILE",
                   help="a built-in profile name or a path to a .toml file")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="the lock to update (default locks/pylock.PROFILE.toml)")
    p.add_argument("--package", action="append", default=[], metavar="NAME",
                   help="release only NAME (a glob such as 'nvidia-*' matches the "
                        "lock's names; repeatable); default: every package")
    p.add_argument("--prereleases", action="store_true",
                   help="release only the profile's requirements.prereleases "
                        "(the nightlies)")
    p.add_argument("--summary", metavar="FILE",
                   help="write the markdown summary for a pull request here "
                        "(only when the lock changed)")
    p.add_argument("--validate", action="store_true",
                   help="install the new lock into a scratch venv (--dir) and "
                        "validate it, then run CMD there; bisect a failure")
    p.add_argument("--allow-no-gpu", action="store_true",
                   help="validate without a driver or GPU, skipping what needs one")
    p.add_argument("--dir", default="update", metavar="DIR",
                   help="the scratch venv, bisect's work and the validation "
                        "reports kept by lock sha256 (default ./update)")
    p.add_argument("--max-steps", type=int, default=30, metavar="N",
                   help="bisect: stop after N oracle runs (default 30)")
    p.add_argument("--step-timeout", type=float, default=1800.0, metavar="SECONDS",
                   help="the oracle command's time limit (default 1800)")
    p.add_argument("--repeat", type=int, default=0, metavar="N",
                   help="bisect with the gate: measure N times a state (default 3)")
    p.add_argument("--python", help="interpreter to build the scratch venv from")
    p.add_argument("--no-toolkit", action="store_true",
                   help="leave a runfile toolkit out of the scratch installs")
    p.add_argument("--index", action="append", default=[], metavar="NAME=URL",
                   help="point the profile's index NAME at another URL (a mirror)")
    p.add_argument("--offline", action="store_true",
                   help="use only the caches; no network")
    p.add_argument("--refresh", action="store_true",
                   help="revalidate cached pages with the indexes")
    p.add_argument("--no-check", action="store_true",
                   help="resolve without the native check")
    _add_timeout(p)
    _add_archive(p)
    p.add_argument("--json", action="store_true")
    p.epilog = ("exit codes: 0 unchanged (nothing written), 4 changed (lock and "
                "summary written; validated where asked), 1 changed and its "
                "validation failed (culprit in the summary), 2 bad input, "
                "3 the network")
    p.set_defaults(verb="update:update")


def _add_check(sub: _Sub) -> None:
    p = sub.add_parser(
        "check", help="check a lock's shared objects against what the lock "
        "provides (sonames, C++ symbols), without installing it")
    p.add_argument("lock", metavar="LOCK", help="a PEP 751 lock file")
    p.add_argument("--offline", action="store_true",
                   help="use only the cache of wheels read before")
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="check:check")


def _add_cuda(sub: _Sub) -> None:
    cuda = sub.add_parser(
        "cuda", help="CUDA toolkit releases, the local driver, catalog refresh")
    cuda_sub = cuda.add_subparsers(dest="cuda_command", required=True,
                                   metavar="CUDA_COMMAND")
    platform_help = "linux-x86_64 or linux-sbsa (default linux-x86_64)"
    p = cuda_sub.add_parser("list", help="the CUDA releases stacklock knows")
    p.add_argument("--platform", default="linux-x86_64", help=platform_help)
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="cuda:cuda_list")
    p = cuda_sub.add_parser("show", help="one release: runfile, URL, hashes, drivers")
    p.add_argument("cuda_version", metavar="VERSION",
                   help="a release (13.0.1) or a series (13.0: all its releases)")
    p.add_argument("--platform", default="linux-x86_64", help=platform_help)
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="cuda:cuda_show")
    p = cuda_sub.add_parser(
        "check-driver", help="does the local driver run a toolkit and a lock's "
        "wheels? (exit 1 if not)")
    p.add_argument("cuda_version", metavar="VERSION", nargs="?",
                   help="the toolkit to check the driver against (default: the "
                        "--lock's)")
    p.add_argument("--lock", metavar="LOCK",
                   help="check the toolkit and wheels of this pylock file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="cuda:cuda_check_driver")
    p = cuda_sub.add_parser(
        "refresh", help="check the embedded catalog against NVIDIA's site")
    p.add_argument("--version", dest="only", action="append", metavar="VERSION",
                   help="check only this release (repeatable)")
    p.add_argument("--write", metavar="PATH",
                   help="write the refreshed catalog (JSON) to PATH")
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="cuda:cuda_refresh")


def _add_install(sub: _Sub) -> None:
    p = sub.add_parser("install", help="install a lock: wheels (uv) and toolkit")
    p.add_argument("lock", metavar="LOCK", nargs="?",
                   help="the pylock file, or a pack made by stacklock pack")
    p.add_argument("--venv", default=".venv",
                   help="the venv path, a symlink to its current generation (default "
                   ".venv; never the venv stacklock runs from)")
    p.add_argument("--python", help="interpreter to build the venv from")
    p.add_argument("--toolkit-prefix", metavar="PATH", help="where the toolkit goes")
    p.add_argument("--no-toolkit", action="store_true", help="wheels only")
    p.add_argument("--dry-run", action="store_true", help="print the plan only")
    p.add_argument("--extra", action="append", default=[], metavar="NAME",
                   help="also install the lock's extra NAME (repeatable)")
    p.add_argument("--group", action="append", default=None, metavar="NAME",
                   help="install dependency group NAME instead of the lock's "
                   "default-groups (repeatable)")
    p.add_argument("--no-build", action="store_true",
                   help="refuse a package uv would build (sdist, vcs, directory)")
    p.add_argument("--reinstall", action="store_true",
                   help="build a new generation even when the venv already holds "
                        "this very lock (by default that install is a no-op)")
    p.add_argument("--rollback", action="store_true", help="restore the previous venv")
    p.add_argument("--allow-no-gpu", action="store_true",
                   help="install without a driver (e.g. to build an image)")
    p.add_argument("--link-cuda", action="store_true",
                   help="also point /usr/local/cuda at the new toolkit")
    _add_unknown_runfile(p)
    p.add_argument("--no-validate", action="store_true",
                   help="skip the validation that ends an install")
    p.add_argument("--report", metavar="DIR",
                   help="write the closing validation's report here (default "
                   "<venv>.stacklock/validate)")
    _add_archive(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="install:install")


def _add_pack(sub: _Sub) -> None:
    p = sub.add_parser("pack", help="one file that installs a lock with no network")
    p.add_argument("target", metavar="LOCK|PACK",
                   help="the lock to pack (with --list: the pack to show)")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write the pack")
    p.add_argument("--no-toolkit", action="store_true",
                   help="leave the CUDA runfile out")
    p.add_argument("--with-plots", action="store_true",
                   help="carry matplotlib (~60 MB with numpy) so that validate on "
                   "the node draws its report's plots")
    p.add_argument("--list", action="store_true",
                   help="show what a pack holds, sizes and target")
    p.add_argument("--dry-run", action="store_true",
                   help="what would go in and the pack's size; downloads nothing")
    _add_archive(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="pack:pack")


def _add_archive_verb(sub: _Sub) -> None:
    p = sub.add_parser(
        "archive", help="copy the files a lock installs to a folder or s3:// "
        "prefix, by sha256, with a PEP 503 index (install --archive reads it)")
    p.add_argument("lock", metavar="LOCK", help="the pylock file")
    p.add_argument("dest", metavar="DEST", nargs="?",
                   help="a folder, file:// URL or s3://BUCKET/PREFIX (credentials "
                        "from AWS_* variables or ~/.aws; the [s3] extra); default: "
                        "the lock's [tool.stacklock.archive] url")
    p.add_argument("--no-toolkit", action="store_true",
                   help="leave the CUDA runfile out")
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="archive:archive")


def _add_snapshot(sub: _Sub) -> None:
    p = sub.add_parser("snapshot", help="a PEP 751 lock of what a venv holds")
    p.add_argument("--venv", default=".venv",
                   help="the venv to describe (default .venv)")
    p.add_argument("-o", "--output", metavar="PATH", help="write here, else stdout")
    p.add_argument("--patches", metavar="DIR",
                   help="also write each package's hand edits as DIR/NAME-VERSION."
                   "patch and the [[patches]] stanza (DIR/patches.toml) that "
                   "reproduces them")
    p.add_argument("--json", action="store_true",
                   help="print what it found as JSON (the lock goes to -o PATH)")
    p.set_defaults(verb="snapshot:snapshot")


def _add_diff(sub: _Sub) -> None:
    p = sub.add_parser("diff", help="what changed between two PEP 751 locks")
    p.add_argument("old", metavar="OLD", help="a lock, a uv pylock.toml or a snapshot")
    p.add_argument("new", metavar="NEW", help="the lock to compare OLD with")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                   help="text (default), markdown (for a pull request) or json "
                        "(the same as --json)")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--exit-code", action="store_true", help="exit 1 when the locks differ"
    )
    p.set_defaults(verb="diff:diff")


def _add_validate(sub: _Sub) -> None:
    p = sub.add_parser("validate", help="check an installed venv against its lock")
    p.add_argument("lock", metavar="LOCK", nargs="?", help="the pylock file")
    p.add_argument("--venv", default=".venv", help="the venv to check")
    p.add_argument("--python", help="check this interpreter instead of --venv's")
    p.add_argument("--toolkit-prefix", metavar="PATH",
                   help="the toolkit to check (default: the lock's prefix)")
    p.add_argument("--no-gate", action="store_true", help="skip the throughput gate")
    p.add_argument("--no-probes", action="store_true", help="skip the GPU probes")
    p.add_argument("--allow-no-gpu", action="store_true",
                   help="skip, with the reason, what needs a driver or a GPU when "
                   "there is none (e.g. in an image build)")
    p.add_argument("--report", metavar="DIR",
                   help="write report.json, report.md and plots here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="validate:validate_venv")


def _add_fleet(sub: _Sub) -> None:
    fleet = sub.add_parser(
        "fleet", help="install a pack on many hosts with Ansible; one table")
    fleet_sub = fleet.add_subparsers(dest="fleet_command", required=True,
                                     metavar="FLEET_COMMAND")
    p = fleet_sub.add_parser(
        "install", help="install and validate PACK on every inventory host "
        "(exit 1 if any host fails)")
    p.add_argument("pack", metavar="PACK", help="a pack made by `stacklock pack`")
    p.add_argument("--inventory", "-i", metavar="INV", help="an Ansible inventory")
    p.add_argument("--limit", metavar="HOSTS", help="an Ansible host pattern")
    p.add_argument("--forks", type=int, metavar="N", help="hosts at a time")
    p.add_argument("--report", required=True, metavar="DIR",
                   help="gather DIR/<host>/report.json, write fleet.json and fleet.md")
    p.add_argument("--emit-playbook", metavar="PATH",
                   help="only write the playbook to PATH (to read or run by hand)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="fleet:fleet_install")
    p = fleet_sub.add_parser("report", help="re-render fleet.json and fleet.md "
                             "from the gathered reports")
    p.add_argument("dir", metavar="DIR", help="the --report DIR of fleet install")
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="fleet:fleet_report")


def _add_unknown_runfile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-unknown-runfile", action="store_true",
                   help="run a CUDA runfile whose sha256 is not the catalog's for "
                   "its release (by default refused: a lock is code)")


def _add_bisect(sub: _Sub) -> None:
    p = sub.add_parser(
        "bisect", help="find which change between two locks breaks a stack",
        usage="stacklock bisect GOOD BAD [options] (-- CMD [ARGS...] | --gate)")
    p.add_argument("good", metavar="GOOD", help="the lock (or pack) that works")
    p.add_argument("bad", metavar="BAD", help="the lock (or pack) that does not")
    p.__class__ = _CommandParser  # CMD [ARGS...] after "--", as it is
    p.epilog = ("-- CMD [ARGS...]: the oracle, run in each intermediate venv: exit 0 "
                "good, 125 skip, anything else bad")
    p.add_argument("--gate", action="store_true",
                   help="the oracle is GOOD's validation gate (tok/s), measured "
                   "--repeat times per state")
    p.add_argument("--repeat", type=int, default=0, metavar="N",
                   help="run the oracle N times per state (default 1; 3 with --gate)")
    p.add_argument("--max-steps", type=int, default=30, metavar="N",
                   help="stop after N oracle runs (default 30); run again to resume")
    p.add_argument("--step-timeout", type=float, default=1800.0, metavar="SECONDS",
                   help="a command running longer is stopped and the state is bad "
                   "(default 1800)")
    p.add_argument("--dir", default="bisect", metavar="DIR",
                   help="the log, the step locks, the scratch venv and the two "
                   "bracketing locks (default ./bisect)")
    p.add_argument("--python", help="interpreter to build the scratch venv from")
    p.add_argument("--no-toolkit", action="store_true",
                   help="leave a runfile toolkit out of each step's install")
    _add_unknown_runfile(p)
    _add_archive(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(verb="bisect:bisect")


_VERBS = {
    "profiles": _add_profiles, "links": _add_links, "resolve": _add_resolve,
    "update": _add_update,
    "check": _add_check, "cuda": _add_cuda, "install": _add_install,
    "pack": _add_pack, "archive": _add_archive_verb, "snapshot": _add_snapshot,
    "diff": _add_diff,
    "validate": _add_validate, "fleet": _add_fleet, "bisect": _add_bisect,
}
