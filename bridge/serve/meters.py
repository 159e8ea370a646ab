"""Prometheus metric writes at a request's price, not a lock and a fork check each.

Under gunicorn every worker writes its metrics to files of its own in PROMETHEUS_MULTIPROC_DIR
(`counter_<pid>.db`, `histogram_<pid>.db`, ...), which a scrape on any worker sums.
prometheus_client's value for that mode takes a lock, calls a function to learn the pid and
goes through the metric's own inc() or observe() (a histogram walks its buckets in Python) on
every write: about twenty writes a request. SharedValue is that value with the same files and
keys, the pid learnt once and again in a forked child; Batch gathers a request's writes and
makes them under one lock, each file written at once, so a scrape right after sees them all.
Both read prometheus_client's internals (a child's `_value`, `_sum`, `_buckets` and
`_upper_bounds`; MmapedDict's `_m` and `_positions`): setup.cfg caps its version at the last
one tests/serve/test_meters.py was run against.
"""

import bisect
import os
import struct
import threading

from prometheus_client import values
from prometheus_client.mmap_dict import MmapedDict, mmap_key

_lock = threading.Lock()
_files = {}  # file prefix: MmapedDict of this process
_values = []  # every SharedValue made, to renew its file after a fork
_state = {"pid": os.getpid(), "forked": False}
_pair = struct.Struct("dd").pack  # a value and its timestamp, as MmapedDict writes them


def _forked():
    """In a forked child (a gunicorn worker): the parent's files are not ours. The values move to
    this pid's files at their next write, not here: a child that only execs opens none."""
    global _lock
    _lock = threading.Lock()  # another thread of the parent may have held it at the fork
    _state["pid"] = os.getpid()
    _state["forked"] = True


def _renew():
    """Every value re-read from this process's own files (the first write after a fork)."""
    for shared in _files.values():
        shared.close()
    _files.clear()
    for value in _values:
        value._open()
    _state["forked"] = False


class SharedValue:
    """prometheus_client's multiprocess value (MultiProcessValue's MmapedValue), less the pid
    asked on every write."""

    _multiprocess = True

    def __init__(self, typ, metric_name, name, labelnames, labelvalues, help_text, multiprocess_mode="", **kwargs):
        self._params = typ, metric_name, name, labelnames, labelvalues, help_text, multiprocess_mode
        with _lock:
            if _state["forked"]:
                _renew()
            self._open()
            _values.append(self)

    def _open(self):
        typ, metric_name, name, labelnames, labelvalues, help_text, multiprocess_mode = self._params
        prefix = f"{typ}_{multiprocess_mode}" if typ == "gauge" else typ
        if prefix not in _files:
            path = os.path.join(os.environ["PROMETHEUS_MULTIPROC_DIR"], f"{prefix}_{_state['pid']}.db")
            _files[prefix] = MmapedDict(path)
        self._file = _files[prefix]
        self._key = mmap_key(metric_name, name, labelnames, labelvalues, help_text)
        self._value, self._timestamp = self._file.read_value(self._key)
        self._at = self._file._positions[self._key]  # read_value made its place in the file

    def inc(self, amount):
        with _lock:
            if _state["forked"]:
                _renew()
            self._value += amount
            self._file.write_value(self._key, self._value, 0.0)

    def set(self, value, timestamp=None):
        with _lock:
            if _state["forked"]:
                _renew()
            self._value = value
            self._timestamp = timestamp or 0.0
            self._file.write_value(self._key, value, self._timestamp)

    def get(self):
        with _lock:
            if _state["forked"]:
                _renew()
            return self._value

    def set_exemplar(self, exemplar):
        """Exemplars are not kept in multiprocess mode (nor by prometheus_client's value)."""

    def get_exemplar(self):
        return None


def install():
    """SharedValue for every metric made from now on, when metrics are shared between processes."""
    if values.ValueClass._multiprocess and values.ValueClass is not SharedValue:
        os.register_at_fork(after_in_child=_forked)
        values.ValueClass = SharedValue


class Batch(list):
    """A request's metric writes, made at once by write(): (value, amount) pairs."""

    def inc(self, series, amount=1):
        """Counter.inc() of a labelled child; the amount is never negative here."""
        self.append((series._value, amount))

    def observe(self, series, amount):
        """Histogram.observe() of a labelled child: its sum, and the first bucket that holds it."""
        self.append((series._sum, amount))
        self.append((series._buckets[bisect.bisect_left(series._upper_bounds, amount)], 1))

    def write(self):
        if values.ValueClass is not SharedValue:
            for value, amount in self:
                value.inc(amount)
        else:
            with _lock:
                if _state["forked"]:
                    _renew()
                for value, amount in self:
                    value._value += amount
                    # MmapedDict.write_value's assignment, less two calls; _m is read each time,
                    # as the file is mapped anew when it grows.
                    value._file._m[value._at : value._at + 16] = _pair(value._value, 0.0)
        self.clear()
