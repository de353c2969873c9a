"""Training data for `fnad-train`: synthetic tasks made by the code, and character-level text.

A task turns a NumPy random generator into a batch of token sequences, each split into
`inputs` (what the model reads), `targets` (the next token at each position) and `mask`
(the positions that count in the loss and in the accuracy):

    sequence   3 1 7 + 0 4 5 = 2 6 3 0        (addition: 317 + 045 = 362, answer reversed)
    inputs     3 1 7 + 0 4 5 = 2 6 3          [T]   = sequence[:-1]
    targets    1 7 + 0 4 5 = 2 6 3 0          [T]   = sequence[1:]
    mask       0 0 0 0 0 0 0 1 1 1 1          [T]   1 where the target is part of the answer

The synthetic tasks are checkable: an example is solved when every masked target is the
model's argmax. With teacher forcing that is exactly the condition for greedy decoding to
reproduce the answer, so `exact_match` needs one forward pass, not a decode loop. Held-out
examples are a fixed hash class of the operands, never drawn for training.

Owns no model code; imports only NumPy.
"""
from __future__ import annotations

import pathlib

import numpy as np

__all__ = ["AdditionTask", "CharTextTask", "SortTask", "make_task"]


class _Synthetic:
    """Shared machinery of the synthetic tasks: an alphabet, a prompt/answer layout and a
    held-out split. Subclasses define `_operands(rng, n)` -> [n, k] ints, `_text(row)` ->
    (prompt, answer) strings and `seq_len`."""

    alphabet = "0123456789+=|"
    checkable = True                      # exact-match accuracy is defined
    test_every = 16                       # one example in 16 (by hash) is held out

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet)

    def encode(self, text: str) -> np.ndarray:
        try:
            return np.array([self.alphabet.index(c) for c in text], np.int32)
        except ValueError:
            bad = sorted(set(text) - set(self.alphabet))
            raise ValueError(f"{type(self).__name__}: characters {bad!r} are not in the "
                             f"alphabet {self.alphabet!r}") from None

    def decode(self, tokens) -> str:
        return "".join(self.alphabet[int(t)] for t in tokens)

    def _held_out(self, ops: np.ndarray) -> np.ndarray:
        """[n] bool: the fixed hash class of the operands kept for evaluation."""
        h = np.zeros(len(ops), np.uint64)
        for j in range(ops.shape[1]):
            h = (h * np.uint64(1000003) + ops[:, j].astype(np.uint64)) % np.uint64(2**31 - 1)
        return (h * np.uint64(2654435761) % np.uint64(2**31 - 1)) % np.uint64(self.test_every) == 0

    def _draw(self, rng: np.random.Generator, n: int, split: str) -> np.ndarray:
        keep_test = split == "test"
        rows, have = [], 0
        while have < n:
            ops = self._operands(rng, 2 * n + 16)
            ops = ops[self._held_out(ops) == keep_test]
            rows.append(ops)
            have += len(ops)
        return np.concatenate(rows)[:n]

    def examples(self, rng: np.random.Generator, n: int, split: str = "train"
                 ) -> list[tuple[str, str]]:
        """n (prompt, answer) string pairs from the train or the held-out test split."""
        return [self._text(row) for row in self._draw(rng, n, split)]

    def batch(self, rng: np.random.Generator, n: int, split: str = "train"
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(inputs, targets, mask), each [n, seq_len]: int32, int32, bool."""
        pairs = self.examples(rng, n, split)
        seq = np.stack([self.encode(p + a) for p, a in pairs])             # [n, T + 1]
        start = len(pairs[0][0])                                           # answer offset
        mask = np.zeros(seq.shape[1] - 1, bool)
        mask[start - 1:] = True                                            # targets = seq[1:]
        return seq[:, :-1], seq[:, 1:], np.broadcast_to(mask, (n, len(mask))).copy()


class AdditionTask(_Synthetic):
    """`a+b=` -> the digits of a + b, least significant first (the order in which carries
    are computed, which a left-to-right model learns far faster than the written order).
    a and b have `digits` digits (zero padded); the answer has digits + 1."""

    name = "add"

    def __init__(self, digits: int = 3):
        if not 1 <= digits <= 9:
            raise ValueError(f"AdditionTask: digits must be in 1..9, got {digits}")
        self.digits = digits
        self.seq_len = 3 * digits + 2                       # (2d + 2) prompt + (d + 1) answer - 1

    def _operands(self, rng, n):
        return rng.integers(0, 10 ** self.digits, (n, 2))

    def _text(self, row):
        a, b = int(row[0]), int(row[1])
        d = self.digits
        return f"{a:0{d}d}+{b:0{d}d}=", f"{a + b:0{d + 1}d}"[::-1]


class SortTask(_Synthetic):
    """`digits|` -> the same digits in ascending order (`length` digits)."""

    name = "sort"

    def __init__(self, length: int = 8):
        if not 2 <= length <= 64:
            raise ValueError(f"SortTask: length must be in 2..64, got {length}")
        self.length = length
        self.seq_len = 2 * length

    def _operands(self, rng, n):
        return rng.integers(0, 10, (n, self.length))

    def _text(self, row):
        return "".join(map(str, row)) + "|", "".join(map(str, sorted(row)))


class CharTextTask:
    """A character-level language model over a user's text file: random windows of
    `seq_len + 1` characters; the last 10% of the file is the held-out split. Every position
    counts in the loss; there is no exact-match accuracy (`checkable` is False)."""

    name = "text"
    checkable = False

    def __init__(self, path: str | pathlib.Path, seq_len: int = 128):
        path = pathlib.Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(f"--data: no such file {str(path)!r}") from None
        except UnicodeDecodeError as e:
            raise ValueError(f"--data: {str(path)!r} is not UTF-8 text ({e})") from None
        if len(text) < 2 * (seq_len + 1):
            raise ValueError(f"--data: {str(path)!r} has {len(text)} characters; need at "
                             f"least {2 * (seq_len + 1)} for windows of {seq_len + 1} in both "
                             f"the training and the held-out split (lower --seq-len)")
        self.alphabet = "".join(sorted(set(text)))
        self.seq_len = seq_len
        lookup = {c: i for i, c in enumerate(self.alphabet)}
        ids = np.array([lookup[c] for c in text], np.int32)
        cut = max(int(len(ids) * 0.9), seq_len + 1)
        cut = min(cut, len(ids) - (seq_len + 1))
        self._splits = {"train": ids[:cut], "test": ids[cut:]}

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet)

    def encode(self, text: str) -> np.ndarray:
        bad = sorted(set(text) - set(self.alphabet))
        if bad:
            raise ValueError(f"CharTextTask: characters {bad!r} do not occur in the training "
                             f"text")
        return np.array([self.alphabet.index(c) for c in text], np.int32)

    def decode(self, tokens) -> str:
        return "".join(self.alphabet[int(t)] for t in tokens)

    def batch(self, rng: np.random.Generator, n: int, split: str = "train"):
        ids = self._splits[split]
        start = rng.integers(0, len(ids) - self.seq_len, n)
        seq = ids[start[:, None] + np.arange(self.seq_len + 1)]             # [n, T + 1]
        return seq[:, :-1], seq[:, 1:], np.ones((n, self.seq_len), bool)


TASKS = {"add": AdditionTask, "sort": SortTask}


def make_task(name: str, *, data: str | None = None, seq_len: int = 128, size: int | None = None):
    """The task called `name` ("add", "sort") or, when `data` names a file, a character-level
    LM over it. `size` is the digit count (add) or the sequence length (sort)."""
    if data is not None:
        return CharTextTask(data, seq_len)
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)} or give --data")
    return TASKS[name]() if size is None else TASKS[name](size)
