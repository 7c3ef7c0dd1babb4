"""The default output's counts read as English: a count the phase line states is
not said twice, one of a kind is singular."""

from __future__ import annotations

from stacklock.cli.output import brief


def test_a_count_the_phase_line_says_is_not_repeated() -> None:
    lines = ["validate: ok: 6 passed, 4 skipped",
             *(f"  skipped check{i}: no GPU here" for i in range(4)),
             "  report: out/"]
    assert brief(lines) == ["validate: ok: 6 passed, 4 skipped (-v shows them)",
                            "  report: out/"]


def test_one_of_a_kind_is_singular() -> None:
    assert brief(["installed x into y", "  replaces y.stacklock/1"]) == [
        "installed x into y; 1 more line (-v shows them)"]
    assert brief(["locked 3 packages", "  override: torch==2.11.0"]) == [
        "locked 3 packages; 1 override (-v shows them)"]
    assert brief(["locked 3 packages", "  override: a==1", "  override: b==2",
                  "  warning: yanked"]) == [
        "locked 3 packages; 2 overrides, 1 warning (-v shows them)"]


def test_a_plural_in_es() -> None:
    patch = "  patch: sglang 0.5.23: patches/x.patch (1 file): why"
    assert brief(["locked 3 packages", patch]) == [
        "locked 3 packages; 1 patch applied (-v shows them)"]
    assert brief(["locked 3 packages", patch, patch,
                  "  patch note: patches/x.patch: a.py: hunk 1 applied 2 lines "
                  "below its header's"]) == [
        "locked 3 packages; 2 patches applied, 1 patch note (-v shows them)"]
