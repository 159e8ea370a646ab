"""A test that needs what this machine lacks skips, naming it; under CI=true it fails instead."""

import os
import shutil

import pytest


def unavailable(problem):
    """Skip a test for what this machine lacks, naming it; under CI=true fail instead, since
    `make test` there installs everything (tests/install-programs.sh, make clients)."""
    if os.environ.get("CI") == "true":
        pytest.fail(problem)
    pytest.skip(problem, allow_module_level=True)


def program(name, package=None):
    """The path of system program `name`, else unavailable(): Debian's `package` has it."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin:/sbin")
    if not found:
        unavailable(f"{name} is not installed: apt-get install {package or name} (make test does, as root)")
    return found
