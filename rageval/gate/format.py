"""How the gate writes numbers: values with as many decimals as it takes to tell them apart, and
signed deltas with a real minus sign."""

from __future__ import annotations

EPS = 1e-9


def fmt(value: float | None, other: float | None = None) -> str:
    """Two decimals; more (up to 4) when two decimals would print ``value`` equal to ``other``
    although they differ (0.845 vs a floor of 0.85). None prints ``n/a``."""
    if value is None:
        return "n/a"
    for digits in (2, 3, 4):
        text = f"{value:.{digits}f}"
        if other is None or abs(value - other) <= EPS or text != f"{other:.{digits}f}":
            return text
    return f"{value:.4f}"


def fmt_delta(value: float | None) -> str:
    """``+0.05`` / ``−0.27`` (a real minus sign) / ``0.00``; None prints ``n/a``."""
    if value is None:
        return "n/a"
    text = f"{value:+.2f}"
    if float(text) == 0.0:
        return "0.00"
    return text.replace("-", "−")
