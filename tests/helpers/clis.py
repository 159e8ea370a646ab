"""The real client CLIs (tests/clients/package.json), run offline against bridge."""

import os
import subprocess

import pytest

from tests.helpers.programs import unavailable


def run_cli(command, cwd, env, timeout):
    """A real client's CLI run to its end with no input, or the test failed with what it printed."""
    try:
        return subprocess.run(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as expired:
        printed = [
            out.decode(errors="replace") if isinstance(out, bytes) else out or ""
            for out in (expired.stdout, expired.stderr)
        ]
        pytest.fail(
            f"{os.path.basename(command[0])} did not finish in {timeout} s\nstdout:\n{printed[0]}\n"
            f"stderr:\n{printed[1]}"
        )


def pinned_cli(name, executable, version, home):
    """`executable` when it is the pinned `version`; else the test skips, or fails under CI=true,
    where a missing CLI must not pass unnoticed."""
    problem = None
    if not executable.exists():
        problem = (
            f"{name} {version} is not installed in .clients/: `make test` (or `make clients`) installs it with npm"
        )
    else:
        try:
            shown = subprocess.run(
                [str(executable), "--version"],
                env={"PATH": os.environ["PATH"], "HOME": str(home)},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            problem = f"{executable} --version failed: {error}"
        else:
            if version not in shown.stdout.partition("\n")[0].split():
                problem = (
                    f".clients/ holds {name} {shown.stdout.strip() or shown.stderr.strip()!r}, "
                    f"not the pinned {version}: `make clients` installs it"
                )
    if problem:
        unavailable(problem)
    return executable
