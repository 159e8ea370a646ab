"""The benchmark: bridge vs a bare reference relay vs the upstream itself."""
