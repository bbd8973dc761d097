"""The explainers' local fits (TabularSHAP, VectorSHAP, TabularLIME, VectorLIME): Kernel SHAP's
coalitions and its constrained weighted least squares, LIME's kernel and weighted ridge
regression, and the partitions that solve one (row, target class) group per Arrow row. The same
arithmetic as the JVM's ``mmlspark.explainers.KernelShap`` and ``LocalFits``: the exact case
(every coalition enumerated) gives the same numbers on both backends.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]

__all__ = [
    "Coalitions",
    "LimePlan",
    "coalitions",
    "default_samples",
    "enumerates",
    "lime_partition",
    "ridge",
    "shap_fit",
    "shap_partition",
    "sized_shap_partition",
]


@dataclass(frozen=True)
class Coalitions:
    """0/1 masks over the features (rows), with their weights; the first two are the empty and
    the full coalition (the base value and the row's value: constraints, not samples)."""

    masks: np.ndarray
    weights: np.ndarray


def default_samples(features: int) -> int:
    """Coalitions drawn when numSamples is unset: 2 * features + 2048 (as the shap package)."""
    return 2 * features + 2048


def enumerates(features: int, samples: int) -> bool:
    """Whether `samples` covers every proper, non-empty coalition of `features` features."""
    return features < 31 and (1 << features) - 2 <= samples


def coalitions(features: int, samples: int, seed: int) -> Coalitions:
    """Every proper, non-empty coalition with its Shapley kernel weight
    (M - 1) / (C(M, |z|) |z| (M - |z|)) when `samples` covers them all, else `samples` drawn by
    the kernel's distribution over sizes, each with its complement, weighted equally."""
    m = features
    ends = [np.zeros(m), np.ones(m)]
    if m <= 1:
        return Coalitions(np.array(ends).reshape(2, m), np.zeros(2))
    masks: list[np.ndarray] = []
    weights: list[float] = []
    if enumerates(m, samples):
        for bits in range(1, (1 << m) - 1):
            mask = np.array([(bits >> j) & 1 for j in range(m)], dtype=np.float64)
            size = bin(bits).count("1")
            masks.append(mask)
            weights.append((m - 1) / (math.comb(m, size) * size * (m - size)))
    else:
        rng = random.Random(seed)
        sizes = list(range(1, m))
        size_weights = [(m - 1) / (s * (m - s)) for s in sizes]
        while len(masks) < samples:
            size = rng.choices(sizes, weights=size_weights)[0]
            mask = np.zeros(m)
            mask[rng.sample(range(m), size)] = 1.0
            masks.append(mask)
            if len(masks) < samples:
                masks.append(1.0 - mask)
        weights = [1.0] * len(masks)
    return Coalitions(np.array(ends + masks), np.array([0.0, 0.0, *weights]))


def _weighted_r2(y: np.ndarray, fitted: np.ndarray, w: np.ndarray) -> float:
    mean = float(np.sum(w * y) / np.sum(w))
    total = float(np.sum(w * (y - mean) ** 2))
    residual = float(np.sum(w * (y - fitted) ** 2))
    if total <= 1e-300:
        return 1.0 if residual <= 1e-300 else 0.0
    return 1.0 - residual / total


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a x = b` for a symmetric positive semi-definite `a`, with the JVM's tiny ridge (a feature
    that never varies gets 0)."""
    scale = max(float(np.max(np.abs(np.diag(a)))) if a.size else 0.0, 1e-300)
    return np.linalg.solve(a + np.eye(len(b)) * scale * 1e-12, b)  # type: ignore[no-any-return]


def shap_fit(c: Coalitions, values: np.ndarray) -> tuple[list[float], float]:
    """[base value, phi_1..phi_M] and the weighted r2 of one row and target, `values[s]` being the
    model's mean over the background for coalition s; the efficiency constraint is exact (the last
    phi is eliminated)."""
    m = c.masks.shape[1]
    base, total = float(values[0]), float(values[1] - values[0])
    if m <= 1 or len(c.masks) <= 2:
        return [base] + [total / m] * m, 1.0
    z, w, y = c.masks[2:], c.weights[2:], values[2:]
    x = z[:, :-1] - z[:, -1:]
    target = y - base - z[:, -1] * total
    head = _solve(x.T @ (w[:, None] * x), x.T @ (w * target))
    phis = np.append(head, total - head.sum())
    return [base, *phis.tolist()], _weighted_r2(y, base + z @ phis, w)


def ridge(x: np.ndarray, y: np.ndarray, w: np.ndarray, penalty: float) -> tuple[list[float], float]:
    """Weighted ridge regression with an unpenalized intercept: the coefficients and the weighted
    r2 (LIME's local model)."""
    total = w.sum()
    x_mean = (w[:, None] * x).sum(axis=0) / total
    y_mean = float((w * y).sum() / total)
    xc = x - x_mean
    a = xc.T @ (w[:, None] * xc) + penalty * np.eye(x.shape[1])
    beta = _solve(a, xc.T @ (w * (y - y_mean)))
    fitted = y_mean + xc @ beta
    return beta.tolist(), _weighted_r2(y, fitted, w)


_FIT_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("k", pa.int32()),
        ("coefficients", pa.list_(pa.float64())),
        ("r2", pa.float64()),
    ]
)


def _fits(batch: Any, rows: list[tuple[list[float], float]]) -> Any:
    return pa.RecordBatch.from_arrays(
        [
            batch.column("id"),
            batch.column("k"),
            pa.array([r[0] for r in rows], pa.list_(pa.float64())),
            pa.array([r[1] for r in rows], pa.float64()),
        ],
        schema=_FIT_SCHEMA,
    )


def shap_partition(c: Coalitions, batches: Iterator[Any]) -> Iterator[Any]:
    """Rows of (id, k, samples, ys): each (row, class)'s mean value per coalition, solved."""
    for batch in batches:
        out = []
        for samples, ys in zip(
            batch.column("samples").to_pylist(), batch.column("ys").to_pylist(), strict=True
        ):
            values = np.zeros(len(c.masks))
            values[np.array(samples, dtype=np.int64)] = ys
            out.append(shap_fit(c, values))
        yield _fits(batch, out)


def sized_shap_partition(by_size: dict[int, Coalitions], batches: Iterator[Any]) -> Iterator[Any]:
    """Rows of (id, k, m, samples, ys): as :func:`shap_partition`, each row with the coalitions of
    its own number of features m (a text's tokens)."""
    for batch in batches:
        out = []
        for m, samples, ys in zip(
            batch.column("m").to_pylist(),
            batch.column("samples").to_pylist(),
            batch.column("ys").to_pylist(),
            strict=True,
        ):
            c = by_size[m]
            values = np.zeros(len(c.masks))
            values[np.array(samples, dtype=np.int64)] = ys
            out.append(shap_fit(c, values))
        yield _fits(batch, out)


@dataclass(frozen=True)
class LimePlan:
    """LIME's fit: which features are categorical (their representation is 1 where a sample
    equals the row; None: every feature, as many as each row's representation has), the kernel's
    width (None: 0.75 * sqrt(number of features)) and the ridge penalty."""

    categorical: tuple[bool, ...] | None
    width: float | None
    penalty: float


def lime_partition(plan: LimePlan, batches: Iterator[Any]) -> Iterator[Any]:
    """Rows of (id, k, reps, ys): each (row, class)'s samples, weighted by the kernel
    sqrt(exp(-d^2 / width^2)) of their distance to the row and solved."""
    for batch in batches:
        out = []
        for reps, ys in zip(
            batch.column("reps").to_pylist(), batch.column("ys").to_pylist(), strict=True
        ):
            x = np.array(reps, dtype=np.float64).reshape(len(ys), -1)
            features = x.shape[1]
            categorical = np.array(plan.categorical or [True] * features, dtype=bool)
            d = np.where(categorical, 1.0 - x, x)
            width = plan.width if plan.width is not None else 0.75 * math.sqrt(features)
            w = np.sqrt(np.exp(-(d**2).sum(axis=1) / width**2))
            out.append(ridge(x, np.array(ys, dtype=np.float64), w, plan.penalty))
        yield _fits(batch, out)
