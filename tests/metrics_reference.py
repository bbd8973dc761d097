"""The classification statistics ComputeModelStatistics gives, checked against scikit-learn's on
the same predictions (shared by the JVM and the Python backends' tests)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import metrics


def assert_classification_metrics(
    stats: Any, truth: list[Any], predicted: list[Any], labels: list[Any]
) -> np.ndarray:
    """`stats` (a ComputeModelStatistics row) against scikit-learn: the labels, accuracy, the
    per-class precision, recall and F1, their mean F1 and the confusion matrix. Returns the
    per-class precision."""
    assert stats.labels == labels
    assert stats.accuracy == pytest.approx(metrics.accuracy_score(truth, predicted), abs=1e-12)
    p, r, f, _ = metrics.precision_recall_fscore_support(
        truth, predicted, labels=labels, zero_division=0
    )
    np.testing.assert_allclose(stats.precision_per_class, p, atol=1e-12)
    np.testing.assert_allclose(stats.recall_per_class, r, atol=1e-12)
    np.testing.assert_allclose(stats.f1_per_class, f, atol=1e-12)
    assert stats.f1 == pytest.approx(f.mean(), abs=1e-12)
    expected = metrics.confusion_matrix(truth, predicted, labels=labels)
    assert stats.confusion_matrix == expected.tolist()
    return p
