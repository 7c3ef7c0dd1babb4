"""Every verb's --help, read from the parser itself: each option and argument
has help text, -q and -v are everywhere, and the help ends with an example
that the parser accepts."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from stacklock.cli.parser import UsageError, _leaves, build_parser


def _verbs() -> list[tuple[str, argparse.ArgumentParser]]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return _leaves(sub)


VERBS = _verbs()


def test_every_verb_is_here() -> None:
    names = {name for name, _ in VERBS}
    assert {"resolve", "links", "diff", "cuda show", "fleet report"} <= names
    assert len(names) >= 16


@pytest.mark.parametrize(("name", "parser"), VERBS, ids=[n for n, _ in VERBS])
def test_every_option_has_help(name: str, parser: argparse.ArgumentParser) -> None:
    missing = [a.option_strings[0] if a.option_strings else a.dest
               for a in parser._actions
               if not a.help or a.help == argparse.SUPPRESS]
    assert missing == [], f"stacklock {name}: no help for {missing}"


@pytest.mark.parametrize(("name", "parser"), VERBS, ids=[n for n, _ in VERBS])
def test_help_ends_with_an_example_the_parser_accepts(
        name: str, parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    assert "-q, --quiet" in text and "-v, --verbose" in text
    head, _, example = text.rstrip().rpartition("\nexample:\n  ")
    assert head and "\n" not in example
    argv = shlex.split(example)
    assert argv[0] == "stacklock" and " ".join(argv[1:]).startswith(name)
    args = build_parser(argv[1:]).parse_args(argv[1:])
    assert args.verbosity == 0 and args.verb


def test_quiet_and_verbose_exclude_each_other(capsys: pytest.CaptureFixture[str]
                                              ) -> None:
    assert build_parser().parse_args(["profiles", "-vv"]).verbosity == 2
    assert build_parser().parse_args(["profiles", "-q"]).verbosity == -1
    with pytest.raises(UsageError) as refused:
        build_parser().parse_args(["profiles", "-q", "-v"])
    assert refused.value.exit_code == 2
    assert "not allowed with" in str(refused.value)
    from stacklock.cli import main

    assert main(["profiles", "-q", "-v"]) == 2
    assert capsys.readouterr().err == (
        "stacklock: error: argument -v/--verbose: not allowed with argument "
        "-q/--quiet (see 'stacklock profiles --help')\n")


def test_quiet_before_or_after_the_verb(capsys: pytest.CaptureFixture[str]) -> None:
    from stacklock.cli import main

    assert main(["cuda", "list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) > 10
    for argv in (["-q", "cuda", "list"], ["cuda", "list", "-q"]):
        assert main(argv) == 0
        assert capsys.readouterr() == ("", "")
    assert main(["-q", "cuda", "list", "--json"]) == 0  # machine output stays
    assert capsys.readouterr().out.startswith('{\n  "schema": "stacklock.cuda-list/1"')


def _example(parser: argparse.ArgumentParser) -> list[str]:
    return shlex.split(parser.format_help().rstrip().rpartition(
        "\nexample:\n  ")[2])[1:]


@pytest.mark.parametrize(("name", "parser"), VERBS, ids=[n for n, _ in VERBS])
def test_an_empty_value_is_refused_naming_its_option(
        name: str, parser: argparse.ArgumentParser) -> None:
    """``--venv "$VENV"`` of an unset variable is an error naming the option,
    for every option taking a string (was: the working directory, or the
    option ignored); a command after ``--`` may hold empty arguments."""
    base = _example(parser)
    takes = [a for a in parser._actions if isinstance(a, argparse._StoreAction)
             and a.option_strings and a.choices is None and a.type in (None, str)]
    takes += [a for a in parser._actions if isinstance(a, argparse._AppendAction)
              and a.option_strings and a.type in (None, str)]
    for action in takes:
        option = action.option_strings[-1]
        for empty in ("", "  "):
            head, _, tail = " ".join(base).partition(" -- ")
            argv = [*shlex.split(head), option, empty,
                    *(["--", *shlex.split(tail)] if tail else [])]
            with pytest.raises(UsageError) as caught:
                build_parser(argv).parse_args(argv)
            assert caught.value.message == f"{option} is empty (an unset variable?)"


@pytest.mark.parametrize("argv", [
    ["resolve", ""], ["check", " "], ["diff", "a.toml", ""], ["archive", "l.toml", ""],
    ["validate", ""], ["fleet", "report", ""]])
def test_an_empty_argument_is_refused_naming_it(argv: list[str]) -> None:
    with pytest.raises(UsageError) as caught:
        build_parser(argv).parse_args(argv)
    assert re.fullmatch(r"[A-Z]+ is empty \(an unset variable\?\)",
                        caught.value.message), caught.value.message


def test_a_command_after_the_double_dash_may_hold_an_empty_argument() -> None:
    argv = ["bisect", "good.toml", "bad.toml", "--", "sh", "-c", "test -z \"$1\"", ""]
    assert build_parser(argv).parse_args(argv).command[-1] == ""
