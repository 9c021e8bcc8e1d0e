"""RoPE positional kernels by linear programming (run under the model-tools python).

A head whose query and key are constant vectors scores a key at distance D = m - n as
    s(D) = sum_i a_i cos(D th_i) - b_i sin(D th_i)        (pair i: q = (a_i, b_i), k = (1, 0))
which is linear in (a, b), so a kernel's shape is a linear program: an offset kernel peaks at
one distance (s(o) - s(D) >= t for every other D), a recency kernel prefers near keys to far
ones (s(D1) - s(D2) >= t for D1 <= near, D2 >= D1 + gap). HiGHS solves each in about a second.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog  # type: ignore[import-untyped, import-not-found, unused-ignore]


def thetas(head_dim: int, base: float) -> np.ndarray:
    return base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def basis(th: np.ndarray, d: np.ndarray) -> np.ndarray:
    ang = np.outer(d, th)
    return np.concatenate([np.cos(ang), -np.sin(ang)], axis=1)  # (len(d), 2n)


def solve(rows: np.ndarray, n: int) -> tuple[np.ndarray, float]:
    """Maximise t subject to rows @ x >= t, x in [-1, 1]^(2n): the kernel and its margin."""
    c = np.zeros(2 * n + 1)
    c[-1] = -1.0
    a_ub = np.concatenate([-rows, np.ones((rows.shape[0], 1))], axis=1)
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(rows.shape[0]),
                  bounds=[(-1, 1)] * (2 * n) + [(None, None)], method="highs")
    if res.status != 0:
        raise RuntimeError(f"kernel LP failed: {res.message}")
    return res.x[:-1], float(res.x[-1])


def offset_kernel(th: np.ndarray, offset: int, max_len: int) -> tuple[np.ndarray, float]:
    b = basis(th, np.arange(0, max_len + 1))
    return solve(b[offset][None, :] - np.delete(b, offset, axis=0), len(th))


def recency_kernel(th: np.ndarray, near: int, gap: int, max_len: int) -> tuple[np.ndarray, float]:
    b = basis(th, np.arange(0, max_len + 1))
    rows = [b[d1][None, :] - b[d1 + gap:] for d1 in range(near + 1)]
    return solve(np.concatenate(rows), len(th))


def long_recency(th: np.ndarray, max_len: int) -> tuple[np.ndarray, float]:
    """Near keys (0-160) over any key 60 or more further (sampled every 5 past 1000)."""
    d = np.arange(0, max_len + 1)
    b = basis(th, d)
    far = np.concatenate([np.arange(0, 1000), np.arange(1000, max_len + 1, 5)])
    rows = [b[d1][None, :] - b[far[far >= d1 + 60]] for d1 in range(0, 161, 2)]
    return solve(np.concatenate(rows), len(th))


def evaluate(th: np.ndarray, x: np.ndarray, max_len: int) -> np.ndarray:
    scores: np.ndarray = basis(th, np.arange(0, max_len + 1)) @ x
    return scores
