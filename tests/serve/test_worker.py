"""bridge/serve/worker.py extends gunicorn's gthread worker: it must be read again when gunicorn changes.

What the worker does is tested through gunicorn in tests/deploy/test_deploy_admission.py.
"""

import gunicorn

from bridge.serve import worker


def test_the_worker_is_run_on_the_gunicorn_version_its_gthread_overrides_were_read_against():
    assert gunicorn.__version__ == worker.GUNICORN_VERSION, (
        f"gunicorn is {gunicorn.__version__}, bridge/serve/worker.py was written against {worker.GUNICORN_VERSION}: "
        "check the gthread internals its docstring lists in the new gunicorn/workers/gthread.py, "
        "run tests/deploy/test_deploy_admission.py, then update GUNICORN_VERSION (and setup.cfg's bound)"
    )
