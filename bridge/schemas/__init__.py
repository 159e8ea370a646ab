"""marshmallow schemas that validate client requests before any translation."""
