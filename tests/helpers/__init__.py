"""What the test modules share, by concern, so that none of them imports another (conftest holds
only fixtures). Starting processes and waiting for them is bench/processes.py's, which the
benchmarks use too: the tools never import from tests/."""
