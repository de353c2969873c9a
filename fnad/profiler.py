"""fnad.profiler: jax.profiler's tracing API, writing Chrome trace-event files.

    with fnad.profiler.trace("/tmp/logs"):
        for step in range(10):
            with fnad.profiler.StepTraceAnnotation("train", step_num=step):
                state = train_step(state, batch)

While a trace runs (`trace`, or `start_trace` ... `stop_trace`), every `TraceAnnotation`,
`StepTraceAnnotation` and `annotate_function` call that ends is recorded as a complete
event (name, start, duration, thread, its keyword arguments), and so is each program fnad
traces and compiles for jit (`jit trace <fn>`, `jit compile (<backend>)`). Outside a
trace the annotations cost a flag test. `stop_trace` writes the events as
`<log_dir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.trace.json.gz`, in the Chrome
trace-event format that Perfetto (ui.perfetto.dev), chrome://tracing and TensorBoard's
profile plugin read; with `create_perfetto_trace=True` the same events also go to
`perfetto_trace.json.gz` in that directory, as jax names it.

Differences from jax: jax's profiler records XLA's own activity (device kernels, host ops)
into an XSpace protobuf; fnad records the annotations and jit's tracing and compiling, not
each primitive or kernel. `create_perfetto_link` prints the file to open in Perfetto
instead of serving a link. jax's device memory profiles, profiler server and
`ProfileOptions` are not provided (fnad has no device-memory allocator to profile).
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable

__all__ = ["StepTraceAnnotation", "TraceAnnotation", "annotate_function", "start_trace",
           "stop_trace", "trace"]


class _Session:
    """The running trace: where it goes and the events so far."""

    def __init__(self, log_dir, perfetto_trace: bool, perfetto_link: bool):
        self.log_dir, self.perfetto_trace = os.fspath(log_dir), perfetto_trace
        self.perfetto_link = perfetto_link
        self.start = time.perf_counter_ns()
        self.events: list[dict] = []
        self.lock = threading.Lock()


_session: _Session | None = None


def _record(name: str, t0_ns: int, t1_ns: int, args: dict) -> None:
    s = _session
    if s is None or t1_ns < s.start:
        return
    event = {"name": name, "ph": "X", "pid": os.getpid(), "tid": threading.get_ident(),
             "ts": (max(t0_ns, s.start) - s.start) / 1e3, "dur": (t1_ns - t0_ns) / 1e3}
    if args:
        event["args"] = {k: v if isinstance(v, (int, float, bool)) else str(v)
                         for k, v in args.items()}
    with s.lock:
        s.events.append(event)


class TraceAnnotation:
    """A context manager whose span becomes an event named `name` (with `kwargs` as its
    arguments) in the running trace, if any."""

    def __init__(self, name: str, **kwargs):
        if not isinstance(name, str):
            raise TypeError(f"TraceAnnotation: name must be a string, got {name!r}")
        self.name, self.kwargs = name, kwargs
        self._t0 = 0

    def __enter__(self):
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        if _session is not None:
            _record(self.name, self._t0, time.perf_counter_ns(), self.kwargs)
        return False


class StepTraceAnnotation(TraceAnnotation):
    """A TraceAnnotation marking one training step: `step_num` is required (as jax's
    analysis needs it) and recorded with the other keyword arguments."""

    def __init__(self, name: str, **kwargs):
        if "step_num" not in kwargs:
            raise TypeError("StepTraceAnnotation needs a step_num keyword argument "
                            f"(the step's number), got {sorted(kwargs)}")
        super().__init__(name, **kwargs)


def annotate_function(func: Callable, name: str | None = None, **decorator_kwargs):
    """`func` with each call recorded as an event named `name` (default: its qualified
    name); usable as `@annotate_function` or `functools.partial(annotate_function, ...)`."""
    label = name or getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with TraceAnnotation(label, **decorator_kwargs):
            return func(*args, **kwargs)
    return wrapper


def span(name: str, **kwargs):
    """fnad's own spans (jit's tracing and compiling): a TraceAnnotation while a trace
    runs, else a no-op context."""
    return TraceAnnotation(name, **kwargs) if _session is not None else _NULL


_NULL = contextlib.nullcontext()


def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False, profiler_options=None) -> None:
    """Start recording events; `stop_trace` writes them under `log_dir`."""
    global _session
    if _session is not None:
        raise RuntimeError("Profile has already been started. Only one profile may be run "
                           "at a time.")
    if profiler_options is not None:
        raise NotImplementedError("fnad.profiler.start_trace: profiler_options (jax's "
                                  "ProfileOptions for XLA's profiler) are not supported")
    _session = _Session(os.fspath(log_dir), create_perfetto_trace, create_perfetto_link)


def stop_trace():
    """Stop recording and write the trace; returns the file written (a pathlib.Path)."""
    import gzip                   # here, not at import: `import fnad` loads this module
    import json
    import pathlib
    import socket
    global _session
    s = _session
    if s is None:
        raise RuntimeError("No profile started")
    _session = None
    run = pathlib.Path(s.log_dir) / "plugins" / "profile" / time.strftime("%Y_%m_%d_%H_%M_%S")
    run.mkdir(parents=True, exist_ok=True)
    doc = {"displayTimeUnit": "ms", "traceEvents": [
        {"name": "process_name", "ph": "M", "pid": os.getpid(),
         "args": {"name": f"fnad (pid {os.getpid()})"}}, *s.events]}
    data = json.dumps(doc).encode()
    path = run / f"{socket.gethostname()}.trace.json.gz"
    path.write_bytes(gzip.compress(data))
    if s.perfetto_trace or s.perfetto_link:
        (run / "perfetto_trace.json.gz").write_bytes(gzip.compress(data))
    if s.perfetto_link:
        print(f"Open {run / 'perfetto_trace.json.gz'} in https://ui.perfetto.dev "
              "(Open trace file)")
    return path


@contextlib.contextmanager
def trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
          create_perfetto_trace: bool = False, profiler_options=None):
    """A trace over the `with` block: start_trace on entry, stop_trace on exit (also when
    the block raises)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()
