"""What a user's mistake looks like on the command line, for every command's tests: exit
status 2 and one line on stderr, "specchat: error: ...", naming what to fix."""

from __future__ import annotations


def assert_user_error(result, *fragments: str):
    """`result` (click's CliRunner) ended as a user error whose one line holds `fragments`."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specchat: error:"), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]
