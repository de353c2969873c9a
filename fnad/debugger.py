"""fnad.debug.breakpoint's debugger (jax.debug.breakpoint with jax's "cli" debugger).

At the breakpoint call, the stack frames of the user's code (fnad's own frames left out
with `filter_frames`) are recorded: file, line, function and locals. The array leaves of
the locals (Arrays, tracers, NumPy arrays) go through `fnad.debug.callback`, so when the
program runs (eagerly, under jit, once per member under vmap, on the primal values under
grad) the debugger gets their concrete values; the other leaves are kept as they were.

The debugger reads commands from stdin (prompt `(fdb) `): `p expr` / `pp expr` print an
expression evaluated in the current frame's locals and globals (a bare expression too),
`u`/`up` and `d`/`down` move between frames, `w`/`where`/`bt` prints the stack, `l`/`list`
shows the source around the line and `ll`/`longlist` the whole function, `c`/`continue`
resumes the program, `q`/`quit`/`exit` ends it (SystemExit, as jax's), `h`/`help` lists
the commands. End of input resumes the program (jax's debugger exits there).
"""
from __future__ import annotations

import cmd
import linecache
import os
import pprint
import sys
import traceback

import numpy as np

from fnad import core, tree_util
from fnad.core import Array



class _Frame:
    """A user frame as recorded at the breakpoint: where, and its namespace."""

    def __init__(self, filename, lineno, name, first_line, f_globals, f_locals):
        self.filename, self.lineno, self.name = filename, lineno, name
        self.first_line, self.globals, self.locals = first_line, f_globals, f_locals


def _fnad_dirs() -> tuple:
    """fnad's source folders (its package and the primitives and backends it installs)."""
    import fnad
    import fnad.backends
    import fnad.primitives
    return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                 for m in (fnad, fnad.primitives, fnad.backends))


def _is_fnad(filename: str, dirs: tuple) -> bool:
    return os.path.abspath(filename).startswith(dirs)


def _is_dynamic(x) -> bool:
    return isinstance(x, (core.Tracer, Array, np.ndarray))


def breakpoint(*, backend: str | None = None, filter_frames: bool = True,  # noqa: A001
               num_frames: int | None = None, ordered: bool = False, token=None, **kwargs):
    """Stop the program here and open the debugger on the concrete values of the traced
    arrays in scope (jax.debug.breakpoint); returns `token` unchanged."""
    if backend not in (None, "cli"):
        raise ValueError(f"fnad.debug.breakpoint: unknown debugger backend {backend!r}; "
                         "fnad has the command-line one ('cli')")
    from fnad import debug
    frames, f, dirs = [], sys._getframe(1), _fnad_dirs()
    while f is not None:
        if not (filter_frames and _is_fnad(f.f_code.co_filename, dirs)):
            frames.append(f)
        f = f.f_back
    if num_frames is not None:
        frames = frames[:num_frames]
    records, values = [], []
    for fr in frames:
        leaves, tree = tree_util.tree_flatten(dict(fr.f_locals))
        dyn = [i for i, x in enumerate(leaves) if _is_dynamic(x)]
        records.append((fr.f_code.co_filename, fr.f_lineno, fr.f_code.co_name,
                        fr.f_code.co_firstlineno, fr.f_globals, leaves, tree, dyn))
        values.extend(leaves[i] for i in dyn)

    def enter(*concrete):
        it = iter(concrete)
        stack = []
        for filename, lineno, name, first, f_globals, leaves, tree, dyn in records:
            leaves = list(leaves)
            for i in dyn:
                leaves[i] = next(it)
            stack.append(_Frame(filename, lineno, name, first, f_globals,
                                tree_util.tree_unflatten(tree, leaves)))
        _Debugger(stack).cmdloop()
    debug.callback(enter, *values, ordered=ordered)
    return token


class _Debugger(cmd.Cmd):
    prompt = "(fdb) "

    def __init__(self, frames: list[_Frame]):
        super().__init__(stdin=sys.stdin, stdout=sys.stdout)
        self.use_rawinput = sys.stdin.isatty()
        self.frames, self.index = frames, 0
        self.intro = "Entering fnad's debugger (fdb): 'h' for help, 'c' to continue.\n" + \
            self._where_line(0)

    def _where_line(self, i: int) -> str:
        f = self.frames[i]
        line = linecache.getline(f.filename, f.lineno).rstrip()
        return f"> {f.filename}({f.lineno}){f.name}()\n-> {line.strip()}"

    def _eval(self, expr: str):
        f = self.frames[self.index]
        return eval(expr, f.globals, dict(f.locals))

    def _show(self, expr: str, pretty: bool) -> None:
        try:
            value = self._eval(expr)
        except Exception:                      # noqa: BLE001 - show the user's error
            self.stdout.write("".join(traceback.format_exception_only(*sys.exc_info()[:2])))
            return
        self.stdout.write((pprint.pformat(value) if pretty else repr(value)) + "\n")

    def default(self, line: str) -> None:
        self._show(line, pretty=False)

    def emptyline(self) -> None:
        pass

    def do_p(self, arg):
        """p expression: print its value in the current frame."""
        self._show(arg, pretty=False)

    def do_pp(self, arg):
        """pp expression: pretty-print its value in the current frame."""
        self._show(arg, pretty=True)

    def do_up(self, arg):
        """u(p): move to the caller's frame."""
        if self.index + 1 >= len(self.frames):
            self.stdout.write("At topmost frame.\n")
            return
        self.index += 1
        self.stdout.write(self._where_line(self.index) + "\n")

    def do_down(self, arg):
        """d(own): move to the called frame."""
        if self.index == 0:
            self.stdout.write("At bottommost frame.\n")
            return
        self.index -= 1
        self.stdout.write(self._where_line(self.index) + "\n")

    def do_where(self, arg):
        """w(here) / bt: the recorded stack, the current frame marked."""
        for i in reversed(range(len(self.frames))):
            mark = "->" if i == self.index else "  "
            self.stdout.write(f"{mark} " + self._where_line(i).replace("\n", "\n   ") + "\n")

    def do_list(self, arg):
        """l(ist): the source around the current line."""
        f = self.frames[self.index]
        self._lines(f, max(1, f.lineno - 5), f.lineno + 5)

    def do_longlist(self, arg):
        """ll / longlist: the current function's whole source."""
        f = self.frames[self.index]
        last = f.first_line
        while linecache.getline(f.filename, last + 1) and (
                last < f.lineno or linecache.getline(f.filename, last + 1).startswith(
                    (" ", "\t", "\n"))):
            last += 1
        self._lines(f, f.first_line, last)

    def _lines(self, f: _Frame, start: int, stop: int) -> None:
        for n in range(start, stop + 1):
            text = linecache.getline(f.filename, n)
            if not text:
                break
            mark = "->" if n == f.lineno else "  "
            self.stdout.write(f"{n:4d} {mark} {text.rstrip()}\n")

    def do_continue(self, arg):
        """c(ontinue): resume the program."""
        return True

    def do_quit(self, arg):
        """q(uit) / exit: end the program (SystemExit, as jax's debugger)."""
        sys.exit(0)

    def do_EOF(self, arg):                     # noqa: N802 - cmd's name for end of input
        return True

    do_u, do_d, do_w, do_bt, do_l, do_ll = do_up, do_down, do_where, do_where, do_list, \
        do_longlist
    do_c = do_cont = do_continue
    do_q = do_exit = do_quit
