"""What the worker (worker.py) tells the app through each request's WSGI environ.

Keys only, so that the app's modules read them without importing the worker, which the
gunicorn master imports before the app and its metrics exist.
"""

# A request served beyond capacity (read by bridge/policy/admission.py): the seconds it was
# let wait for a thread.
OVER_CAPACITY = "bridge.over_capacity"
# The worker's request threads (BRIDGE_THREADS), from which bridge/policy/admission.py derives
# its default cap per client key; absent: a server with no fixed number (werkzeug's).
THREADS = "bridge.threads"
# The worker's stream loop, for the relay (bridge/fronts/http.py); absent: none.
STREAM_LOOP = "bridge.stream_loop"
# This server always closes the app's answer (PEP 3333), so the access record waits for the
# close (bridge/serve/observability.py); werkzeug's server does not.
CLOSES_ANSWERS = "bridge.closes_answers"
