"""CPU time and memory of a process tree, read from /proc (Linux only).

gunicorn is a master and its workers; their threads are counted in each
process's utime/stime. RSS summed over the tree counts the pages the
forked workers share with the master more than once, so PSS (from
smaps_rollup) is reported beside it as the fairer figure.
"""

import os
import time

_TICK = os.sysconf("SC_CLK_TCK")


def tree(pid):
    """pid and all its descendants."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as fh:
                    todo.extend(int(child) for child in fh.read().split())
        except OSError:
            pass
    return pids


def cpu_seconds(pid):
    """User + system CPU seconds used so far by the tree rooted at pid."""
    total = 0
    for member in tree(pid):
        try:
            with open(f"/proc/{member}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICK


def voluntary_switches(pid):
    """Voluntary context switches so far, over every thread of the tree rooted at pid: the
    times one slept, on a socket, a lock or the GIL."""
    total = 0
    for member in tree(pid):
        try:
            tasks = os.listdir(f"/proc/{member}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{member}/task/{task}/status") as status:
                    total += sum(int(line.split()[1]) for line in status if line.startswith("voluntary_ctxt"))
            except OSError:
                continue
    return total


def memory_mib(pid):
    """(RSS summed over the tree, PSS summed over the tree) in MiB."""
    rss = pss = 0
    for member in tree(pid):
        try:
            with open(f"/proc/{member}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            continue
    return rss / 1024, pss / 1024


def threads(pid):
    """Threads in the tree: gthread workers hold one per connection being served."""
    count = 0
    for member in tree(pid):
        try:
            count += len(os.listdir(f"/proc/{member}/task"))
        except OSError:
            continue
    return count


def settle(pid, limit=30):
    """Wait until the tree is idle again (queued work from the last test drained)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        if cpu_seconds(pid) - before < 0.02:
            return
