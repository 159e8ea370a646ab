"""WSGI entry point: `gunicorn wsgi:app`."""
from bridge.app import create_app

app = create_app()
