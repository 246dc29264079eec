"""0/1 rewards: the last ``\\boxed{...}`` of a completion, checked by math-verify against the gold answer.

Bounded work per answer, whatever the completion holds:

1. Only the last ``MAX_COMPLETION_CHARS`` characters are looked at (the final answer is at the end).
2. The last ``\\boxed{`` (or ``\\fbox{``) is matched with a brace counter that gives up after
   ``MAX_ANSWER_CHARS`` characters or ``MAX_DEPTH`` levels of nesting: no regex backtracking, no
   recursion. No box, an unclosed box or an oversized box scores 0 (the prompt asks for a box).
   With ``fallback="last-number"`` a completion without a box is scored on its last number
   instead (the GSM8K convention; useful for small models that rarely box), found by a regex
   over the last ``MAX_TAIL_CHARS`` characters only.
3. An answer equal to the gold string after whitespace normalisation scores 1 without parsing.
4. When both are plain decimal numbers (``-?digits[.digits]``) they are compared exactly as
   decimals, without parsing (math-verify agrees on these: ``216`` = ``216.0`` = ``0216``); this
   keeps scoring cheap for models that answer with bare numbers, most of them wrong.
5. Otherwise math-verify parses both sides and compares them (sympy; never ``eval``), with its
   own time limits (``parsing_timeout`` and ``timeout_seconds``). Those limits use
   ``signal.alarm``, which works only in a process's main thread: call ``score`` from the main
   thread, or through ``RewardPool`` (a process pool), never from a thread pool. Elsewhere
   math-verify would run without a limit, so ``score_one`` refuses to (it returns 0).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import re
import threading
from decimal import Decimal
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

MAX_COMPLETION_CHARS = 16_384
MAX_ANSWER_CHARS = 512
MAX_DEPTH = 32
MAX_TAIL_CHARS = 1_000
FALLBACKS = ("none", "last-number")
_OPENERS = ("\\boxed{", "\\fbox{")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?\Z")


def extract_boxed(text: str, max_chars: int = MAX_ANSWER_CHARS, max_depth: int = MAX_DEPTH) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, or None.

    Scans forward from the last opener only, so the cost is O(max_chars) after one reverse
    search. Returns None when the box is unclosed, longer than ``max_chars`` or nested deeper
    than ``max_depth``.
    """
    text = text[-MAX_COMPLETION_CHARS:]
    start = max(text.rfind(o) for o in _OPENERS)
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    end = min(len(text), i + max_chars + 1)
    for j in range(i, end):
        c = text[j]
        if c == "{":
            depth += 1
            if depth > max_depth:
                return None
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return None


def extract_last_number(text: str) -> str | None:
    """The last integer or decimal in the last ``MAX_TAIL_CHARS`` characters, or None."""
    found = _NUMBER.findall(text[-MAX_TAIL_CHARS:])
    return found[-1] if found else None


def _normalise(s: str) -> str:
    return "".join(s.split()).rstrip(".").replace("\\!", "").replace("dfrac", "frac")


def score_one(completion: str, gold: str, timeout: float = 5.0, fallback: str = "none") -> float:
    """1.0 if the completion's last boxed answer equals ``gold`` (math-verify), else 0.0."""
    answer = extract_boxed(completion)
    if answer is None and fallback == "last-number":
        answer = extract_last_number(completion)
    if answer is None or not answer:
        return 0.0
    a, g = _normalise(answer), _normalise(gold)
    if a == g:
        return 1.0
    if _PLAIN_NUMBER.match(a) and _PLAIN_NUMBER.match(g):
        return 1.0 if Decimal(a) == Decimal(g) else 0.0
    if threading.current_thread() is not threading.main_thread():
        # math-verify's time limit (signal.alarm) cannot work here; refuse rather than risk a hang.
        return 0.0
    from math_verify import parse, verify

    secs = max(1, math.ceil(timeout))
    try:
        gold_parsed = parse(f"\\boxed{{{gold}}}", parsing_timeout=secs)
        pred_parsed = parse(f"\\boxed{{{answer}}}", parsing_timeout=secs)
        if not gold_parsed or not pred_parsed:
            return 0.0
        return 1.0 if verify(gold_parsed, pred_parsed, timeout_seconds=secs) else 0.0
    except Exception:  # math-verify/sympy can raise on odd input; a wrong-looking answer scores 0
        return 0.0


def score(completions: Sequence[str], golds: Sequence[str], timeout: float = 5.0,
          fallback: str = "none") -> list[float]:
    """Score completions against their gold answers, in the calling (main) thread."""
    if len(completions) != len(golds):
        raise ValueError(f"{len(completions)} completions but {len(golds)} gold answers")
    return [score_one(c, g, timeout, fallback) for c, g in zip(completions, golds)]


def _score_chunk(args: tuple[list[str], list[str], float, str]) -> list[float]:
    completions, golds, timeout, fallback = args
    return score(completions, golds, timeout, fallback)


class RewardPool:
    """Scores in worker processes (each its own main thread, so math-verify's limits apply).

    Uses the ``spawn`` start method: forking a process that holds torch threads or CUDA state
    is unsafe. Completions are truncated before they are sent, so messages stay small.
    """

    def __init__(self, workers: int, timeout: float = 5.0, fallback: str = "none"):
        self.workers, self.timeout, self.fallback = workers, timeout, fallback
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))

    def score(self, completions: Sequence[str], golds: Sequence[str]) -> list[float]:
        if len(completions) != len(golds):
            raise ValueError(f"{len(completions)} completions but {len(golds)} gold answers")
        comps = [c[-MAX_COMPLETION_CHARS:] for c in completions]
        size = max(1, math.ceil(len(comps) / (4 * self.workers)))
        chunks = [(comps[i:i + size], list(golds[i:i + size]), self.timeout, self.fallback)
                  for i in range(0, len(comps), size)]
        out: list[float] = []
        for part in self._pool.map(_score_chunk, chunks):
            out.extend(part)
        return out

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)
