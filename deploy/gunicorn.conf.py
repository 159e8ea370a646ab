"""gunicorn settings for bridge: threaded workers sized for long-lived streams."""
import os

bind = os.environ.get("BRIDGE_BIND", "127.0.0.1:8080")
worker_class = "gthread"
workers = int(os.environ.get("BRIDGE_WORKERS", "2"))
threads = int(os.environ.get("BRIDGE_THREADS", "64"))
timeout = 0  # never kill a worker because one stream is long; gthread heartbeats separately
graceful_timeout = int(os.environ.get("BRIDGE_GRACEFUL_TIMEOUT", "120"))
keepalive = int(os.environ.get("BRIDGE_KEEPALIVE", "75"))
wsgi_app = "wsgi:app"
