"""Claude through Google Vertex AI: an `anthropic` deployment with `"cloud": "vertex"`.

What differs from Anthropic's own API, all of it here:
- the URL: POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}
  :rawPredict, or :streamRawPredict for a stream, on {region}-aiplatform.googleapis.com
  (aiplatform.googleapis.com for `global`, the deployment's endpoint_url for a Private Service
  Connect endpoint); count_tokens on .../models/count-tokens:rawPredict, the model in the body;
- the body: no `model` (the path names it), `anthropic_version` vertex-2023-10-16;
- the credential: a bearer token from google-auth: the deployment's `credentials_file` (a
  service-account key), else Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
  workload identity, the metadata server), refreshed before it expires, once for all threads.
Streams are Anthropic's server-sent events; an error answer is {"error": {code, status,
message}}, alone or in a list (upstream.answer_error reads both).

google-auth is an optional extra (`pip install 'bridge[vertex]'`), imported when a route
names a Vertex deployment.
"""

from urllib.parse import quote

from ..protocols import MESSAGES_COUNT_TOKENS
from ..protocols.errors import BridgeError
from ..settings import SettingsError
from .cloud import Cloud, endpoint_of, require_model

ANTHROPIC_VERSION = "vertex-2023-10-16"
FIELDS = ("project", "region", "endpoint_url", "credentials_file")
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
# Multi-region endpoints of their own; any other region is {region}-aiplatform.googleapis.com.
_HOSTS = {
    "global": "aiplatform.googleapis.com",
    "us": "aiplatform.us.rep.googleapis.com",
    "eu": "aiplatform.eu.rep.googleapis.com",
}


def _google_auth():
    try:
        import google.auth
        import google.auth.transport.requests
        import google.oauth2.service_account
    except ImportError:
        raise SettingsError("a Vertex deployment needs google-auth: pip install 'bridge[vertex]'") from None
    return google


class Vertex(Cloud):
    """One Vertex deployment's project, region, endpoint and credentials."""

    kind = "vertex"
    provider = "gcp.vertex_ai"  # gen_ai.provider.name

    def __init__(self, project, region, endpoint_url=None, credentials_file=None):
        super().__init__(endpoint_url or f"https://{_HOSTS.get(region, f'{region}-aiplatform.googleapis.com')}")
        self.project = project
        self.region = region
        self.credentials_file = credentials_file

    @classmethod
    def from_entry(cls, item, where):
        """From a routes-file deployment, or SettingsError naming the field."""
        values = {}
        for field in ("project", "region"):
            value = item.get(field)
            if not isinstance(value, str) or not value or "/" in value:
                raise SettingsError(f"{where}: {field} is required for a Vertex deployment, a name without `/`")
            values[field] = value
        endpoint = endpoint_of(item, where)
        path = item.get("credentials_file")
        if path is not None and (not isinstance(path, str) or not path):
            raise SettingsError(f"{where}: credentials_file must be the path of a service-account key file")
        require_model(item, where, "the Vertex model id (claude-sonnet-4-5@20250929, ...)")
        cloud = cls(values["project"], values["region"], endpoint, path)
        cloud.credentials(where)  # found now, or the configuration is refused
        return cloud

    def describe(self):
        """Where the credentials come from, for an operator's log line: never a key."""
        if self.credentials_file:
            return f"Google credentials (credentials_file {self.credentials_file})"
        return "Google credentials (Application Default Credentials)"

    def credentials(self, where="Vertex"):
        """google-auth's credentials, loaded once, or SettingsError."""
        with self._lock:
            if self._credentials is None:
                google = _google_auth()
                try:
                    if self.credentials_file:
                        found = google.oauth2.service_account.Credentials.from_service_account_file(
                            self.credentials_file, scopes=SCOPES
                        )
                    else:
                        found, _ = google.auth.default(scopes=SCOPES)
                except (google.auth.exceptions.GoogleAuthError, OSError, ValueError) as error:
                    raise SettingsError(f"{where}: Google credentials: {type(error).__name__}: {error}") from None
                self._credentials = found
            return self._credentials

    def token(self):
        """A bearer token valid for a while yet: google-auth's `valid` is false from a few
        minutes before it expires, and one thread refreshes it while the others wait."""
        try:
            credentials = self.credentials()
            if credentials.valid:
                return credentials.token
            with self._lock:
                if not credentials.valid:
                    credentials.refresh(_google_auth().auth.transport.requests.Request())
                return credentials.token
        except Exception as error:  # a refused key, the token endpoint or metadata server unreachable
            raise BridgeError(
                "api_error", f"the bridge could not refresh its Google credentials ({type(error).__name__})", status=502
            ) from None

    def request(self, path, body, headers, stream):
        """(URL, body, headers) of an Anthropic call `path` (/v1/messages, its count_tokens) on Vertex."""
        body = dict(body)
        body.setdefault("anthropic_version", ANTHROPIC_VERSION)
        headers = {k: v for k, v in headers.items() if k != "anthropic-version"}
        models = f"{self.base_url}/v1/projects/{self.project}/locations/{self.region}/publishers/anthropic/models"
        if path == MESSAGES_COUNT_TOKENS:
            return f"{models}/count-tokens:rawPredict", body, headers
        model = quote(str(body.pop("model", "")), safe="@")
        return f"{models}/{model}:{'streamRawPredict' if stream else 'rawPredict'}", body, headers

    def sign(self, method, url, headers, data):
        """`headers` and the bearer token."""
        return {**headers, "authorization": f"Bearer {self.token()}"}

    def decoder(self, max_event_bytes):
        return None  # server-sent events, as Anthropic's

    def answer(self, payload):
        return payload

    def probe(self, model):
        """(method, URL, body) of a call that costs nothing: count the tokens of one word."""
        url, body, _ = self.request(
            MESSAGES_COUNT_TOKENS, {"model": model, "messages": [{"role": "user", "content": "hi"}]}, {}, False
        )
        return "POST", url, body
