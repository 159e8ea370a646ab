"""The service as deployed: gunicorn, nginx, systemd, a pip install, Redis, the load and the
benchmark runs. Every test here is slow: make test-fast leaves them out (setup.cfg)."""

import pathlib

import pytest

HERE = pathlib.Path(__file__).parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.slow)
