"""`gunicorn wsgi:app`: the app of the installed bridge package, for an operator who starts it so.

gunicorn puts its working directory first on sys.path, so in a checkout `import bridge` would
find the checkout's bridge/ ahead of the package installed in the venv, and serve code that
`pip install` never put there. This file's own directory is left out of the path while the
package is imported. deploy/gunicorn.conf.py names `bridge.app:create_app()` itself.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_path = sys.path[:]
sys.path[:] = [entry for entry in _path if os.path.abspath(entry or os.curdir) != _here]
try:
    from bridge.app import create_app
finally:
    sys.path[:] = _path

app = create_app()
