"""What the cloud deployments (bedrock.py, vertex.py) share: credentials held per process and
left out of the pickled configuration, and the routes-file fields both read."""

import threading

from ..settings import SettingsError, _url


class Cloud:
    """A deployment's cloud: its base URL, and the credentials it loads once per process."""

    def __init__(self, base_url):
        self.base_url = base_url
        self._credentials = None  # the cloud library's, loaded on first use (see __getstate__)
        self._lock = threading.Lock()

    def __getstate__(self):
        """Pickled (bridge check --pickle) without the process's credentials and lock."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_credentials", "_lock")}

    def __setstate__(self, state):
        self.__dict__.update(state, _credentials=None, _lock=threading.Lock())


def endpoint_of(item, where):
    """The deployment's own endpoint (a VPC or Private Service Connect one), or None."""
    endpoint = item.get("endpoint_url")
    return None if endpoint is None else _url(f"{where}: endpoint_url", endpoint).rstrip("/")


def require_model(item, where, what):
    if "model" not in item:
        raise SettingsError(f"{where}: model is required: {what}")
