"""Intervals and paired tests of the measurement cells (chapters 08-13).

Every number a chapter reports from a handful of seeds, prompts or timing rounds comes with its
uncertainty (the course's claims rule: a difference is only a difference outside its interval).
The chapters used to carry their own copies of these formulas; they now call the thin wrappers
below, each a documented call of ``scipy.stats`` or ``statsmodels`` (``tests/test_stats.py``
checks each one against the call it wraps and against a case computed by hand).

One method per use, named where the number is printed:

=====================  ======================================================  ==================
helper                 what it is                                              chapters
=====================  ======================================================  ==================
:func:`mean_ci`        mean and its Student t interval                         08, 09, 10, 11, 13
:func:`diff_ci`        difference of two independent means, Welch t interval   08
:func:`paired_t`       paired differences: mean, t interval, paired t-test     10
:func:`ratio_ci`       geometric mean of paired ratios, t interval of the logs 11
:func:`bootstrap_ci`   statistic and its percentile-bootstrap interval         12
:func:`sign_flip_p`    paired permutation (sign-flip) test of mean = 0         12
:func:`wilson`         Wilson score interval of a proportion                   09, 13
:func:`mcnemar_exact`  McNemar's exact test of two paired classifiers          09, 13
:func:`sign_test`      sign test (binomial test of the positive differences)   13
:func:`holm`           Holm-adjusted p-values of a family of tests             08, 10, 11
:func:`paired_mde`     smallest paired difference a test detects (set power)   09, 12
:func:`diff_proportions_ci`  difference of two proportions, Newcombe interval   13
=====================  ======================================================  ==================

All intervals are two-sided at ``level`` (95 % by default). Seeded helpers give the same numbers
on every run.
"""
from __future__ import annotations

from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
from scipy import stats as _st

ArrayLike = Sequence[float] | np.ndarray | Iterable[float]


class Interval(NamedTuple):
    """An estimate and its interval: unpacks as ``estimate, low, high``."""

    estimate: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        """Half the interval's width (the ``±`` of a symmetric interval)."""
        return (self.high - self.low) / 2

    def contains(self, value: float = 0.0) -> bool:
        """True when ``value`` lies in the closed interval."""
        return self.low <= value <= self.high


class PairedTest(NamedTuple):
    """Mean of the paired differences ``a - b``, its interval and the test's two-sided p-value."""

    diff: float
    low: float
    high: float
    pvalue: float
    n: int


class McNemar(NamedTuple):
    """Discordant counts ``b`` (only A right), ``c`` (only B right) and the exact p-value."""

    b: int
    c: int
    pvalue: float


def _array(x: ArrayLike) -> np.ndarray:
    if not (hasattr(x, "__array__") or isinstance(x, (list, tuple))):
        x = list(x)                                  # a generator
    return np.asarray(x, dtype=float).ravel()


def mean_ci(x: ArrayLike, level: float = 0.95) -> Interval:
    """Mean of ``x`` and its Student t interval (``len(x) - 1`` degrees of freedom).

    ``scipy.stats.ttest_1samp(x, 0).confidence_interval(level)``: mean ± t·sd/√n. The interval of
    a mean over seeds (Book §6.3: a result is the spread over seeds, not one run), over prompts
    or over tokens. With fewer than two values the interval is ``nan``.
    """
    v = _array(x)
    if len(v) < 2:
        m = float(v.mean()) if len(v) else float("nan")
        return Interval(m, float("nan"), float("nan"))
    ci = _st.ttest_1samp(v, 0.0).confidence_interval(confidence_level=level)
    return Interval(float(v.mean()), float(ci.low), float(ci.high))


def diff_ci(x: ArrayLike, y: ArrayLike, level: float = 0.95) -> Interval:
    """``mean(x) - mean(y)`` for independent samples and its Welch t interval.

    ``scipy.stats.ttest_ind(x, y, equal_var=False).confidence_interval(level)``: unequal
    variances, Welch–Satterthwaite degrees of freedom (chapter 08: a sampling setting against the
    baseline setting, different samples).
    """
    a, b = _array(x), _array(y)
    if len(a) < 2 or len(b) < 2:
        return Interval(float(a.mean() - b.mean()), float("nan"), float("nan"))
    ci = _st.ttest_ind(a, b, equal_var=False).confidence_interval(confidence_level=level)
    return Interval(float(a.mean() - b.mean()), float(ci.low), float(ci.high))


def paired_t(a: ArrayLike, b: ArrayLike, level: float = 0.95) -> PairedTest:
    """Paired comparison of ``a`` and ``b`` (same seeds, prompts or rows): the paired t-test.

    ``scipy.stats.ttest_rel(a, b)``: mean of ``a - b``, its t interval
    (``.confidence_interval(level)``) and the two-sided p-value (chapter 10: two measurements of
    the same seeds' models). ``nan`` with fewer than two pairs.
    """
    u, v = _array(a), _array(b)
    if len(u) != len(v):
        raise ValueError(f"paired samples differ in length: {len(u)} vs {len(v)}")
    d = float((u - v).mean()) if len(u) else float("nan")
    if len(u) < 2:
        return PairedTest(d, float("nan"), float("nan"), float("nan"), len(u))
    res = _st.ttest_rel(u, v)
    ci = res.confidence_interval(confidence_level=level)
    return PairedTest(d, float(ci.low), float(ci.high), float(res.pvalue), len(u))


def ratio_ci(t: ArrayLike, t_ref: ArrayLike, level: float = 0.95) -> Interval:
    """Geometric mean of the paired ratios ``t / t_ref`` and its interval.

    The t interval (:func:`mean_ci`) of ``log(t / t_ref)``, exponentiated: timings are
    multiplicative, and pairing by round removes the machine's drift (chapter 11: time of a
    quantized model or layer over fp32's, measured in the same round).
    """
    lr = np.log(_array(t) / _array(t_ref))
    m, lo, hi = mean_ci(lr, level)
    return Interval(float(np.exp(m)), float(np.exp(lo)), float(np.exp(hi)))


def bootstrap_ci(
    x: ArrayLike,
    statistic: Callable[..., float] = np.mean,
    level: float = 0.95,
    n_resamples: int = 9999,
    seed: int = 0,
) -> Interval:
    """``statistic(x)`` and its percentile-bootstrap interval (entries of ``x`` resampled).

    ``scipy.stats.bootstrap((x,), statistic, method="percentile", rng=seed)``, seeded so that a
    rerun prints the same numbers (chapter 12: style scores over prompts, bounded and skewed, where a
    t interval's symmetry would be a poor fit).
    """
    v = _array(x)
    if len(v) < 2:
        return Interval(float(statistic(v)), float("nan"), float("nan"))
    res = _st.bootstrap((v,), statistic, confidence_level=level, n_resamples=n_resamples,
                        method="percentile", rng=np.random.default_rng(seed))
    return Interval(float(statistic(v)), float(res.confidence_interval.low), float(res.confidence_interval.high))


def sign_flip_p(d: ArrayLike, n_resamples: int = 20_000, seed: int = 0) -> float:
    """Two-sided paired permutation test of ``mean(d) = 0``: the sign of each difference flipped.

    ``scipy.stats.permutation_test((d,), np.mean, permutation_type="samples")``: exact (all
    ``2**n`` sign patterns) when that is at most ``n_resamples``, else ``n_resamples`` random ones,
    seeded (chapter 12: a fine-tuned model against the base on the same prompts).
    """
    v = _array(d)
    if len(v) == 0 or not np.any(v):
        return 1.0
    res = _st.permutation_test((v,), np.mean, permutation_type="samples",
                               n_resamples=n_resamples, alternative="two-sided",
                               rng=np.random.default_rng(seed))
    return float(res.pvalue)


def wilson(k: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of the proportion ``k / n``.

    ``statsmodels.stats.proportion.proportion_confint(k, n, alpha=1 - level, method="wilson")``:
    stays inside [0, 1] and behaves at 0 and n successes, unlike the normal ``p ± z·se``
    (chapter 09: accuracy of a prompt on the evaluation set; chapter 13: preference accuracy, where
    ``k`` may count a tie as one half). ``(nan, nan)`` when ``n`` is 0.
    """
    from statsmodels.stats.proportion import proportion_confint

    if n == 0:
        return (float("nan"), float("nan"))
    lo, hi = proportion_confint(k, n, alpha=1 - level, method="wilson")
    return (float(lo), float(hi))


def mcnemar_exact(right_a: Iterable[bool], right_b: Iterable[bool]) -> McNemar:
    """McNemar's exact test: two classifiers (or one model before and after) on the same examples.

    ``right_a``, ``right_b``: one boolean per example. ``b`` counts the examples only A got right,
    ``c`` those only B got right; the p-value is
    ``statsmodels.stats.contingency_tables.mcnemar(table, exact=True).pvalue``, the two-sided
    binomial test of ``b`` out of ``b + c`` at 1/2 (1.0 without a discordant pair). Chapter 09:
    two prompts on the same questions; chapter 13: the answer key before and after DPO.
    """
    from statsmodels.stats.contingency_tables import mcnemar

    ra = [bool(x) for x in right_a]
    rb = [bool(x) for x in right_b]
    if len(ra) != len(rb):
        raise ValueError(f"paired samples differ in length: {len(ra)} vs {len(rb)}")
    both = sum(x and y for x, y in zip(ra, rb))
    b = sum(x and not y for x, y in zip(ra, rb))
    c = sum(y and not x for x, y in zip(ra, rb))
    neither = len(ra) - both - b - c
    if b + c == 0:
        return McNemar(0, 0, 1.0)
    return McNemar(b, c, float(mcnemar([[both, b], [c, neither]], exact=True).pvalue))


def sign_test(d: ArrayLike, alternative: str = "two-sided") -> float:
    """Sign test of paired differences ``d``: are positive differences more frequent than 1/2?

    ``scipy.stats.binomtest(#(d > 0), #(d != 0), 0.5, alternative=alternative).pvalue``, zeros
    dropped (chapter 13: how many held-out margins DPO made positive; ``alternative="greater"``
    when the direction was stated before looking). 1.0 when every difference is zero.
    """
    v = _array(d)
    n_pos, n_nonzero = int((v > 0).sum()), int((v != 0).sum())
    if n_nonzero == 0:
        return 1.0
    return float(_st.binomtest(n_pos, n_nonzero, 0.5, alternative=alternative).pvalue)


def holm(pvalues: ArrayLike, alpha: float = 0.05) -> list[float]:
    """Holm-adjusted p-values of a family of tests read together.

    ``statsmodels.stats.multitest.multipletests(p, alpha, method="holm")[1]``: controls the
    family-wise error rate (the chance of any false "difference" in the family) without assuming
    the tests independent. A chapter that prints a table of tests and reads them one by one
    (chapter 08's benchmark cells, chapter 10's 2 × 2, chapter 11's formats) compares the adjusted
    values with ``alpha``.
    """
    from statsmodels.stats.multitest import multipletests

    p = _array(pvalues)
    if p.size == 0:
        return []
    return [float(x) for x in multipletests(p, alpha=alpha, method="holm")[1]]


def paired_mde(sd: float, n: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """Smallest mean paired difference a two-sided paired t-test detects with ``power``.

    ``statsmodels.stats.power.TTestPower().solve_power(nobs=n, alpha=alpha, power=power)`` gives
    the standardized effect; times ``sd`` (the standard deviation of the differences, fixed in
    advance or from a pilot) it is in the measurement's units.

    What it is for: sizing a run *before* it happens (how many pairs detect an effect worth
    finding). What it is not for: reading a run that found nothing. A null result says what its
    interval says (:func:`paired_t`: every difference inside it is compatible with the data, those
    outside are excluded), or what an equivalence test with a margin fixed in advance says; never
    "no effect of the MDE or more", which is wrong whenever the MDE lies inside the interval, and
    never with the "observed power" of the run itself (a function of its p-value).
    ``course_tools/null_results.py`` flags that reading in the chapters' prose.
    """
    from statsmodels.stats.power import TTestPower

    if n < 2:
        raise ValueError(f"need at least 2 pairs, got {n}")
    d = TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power, alternative="two-sided")
    return float(d) * float(sd)


def diff_proportions_ci(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> Interval:
    """Difference of two independent proportions ``k1/n1 - k2/n2`` with Newcombe's score interval.

    ``statsmodels.stats.proportion.confint_proportions_2indep(k1, n1, k2, n2, method="newcomb",
    compare="diff")``: stays inside [-1, 1] and behaves at 0 and n successes, unlike the Wald
    ``d ± z·se``. For paired outcomes (the same questions before and after) use
    :func:`mcnemar_exact` instead.
    """
    from statsmodels.stats.proportion import confint_proportions_2indep

    if n1 == 0 or n2 == 0:
        raise ValueError("both groups need at least one trial")
    lo, hi = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff", alpha=1 - level)
    return Interval(k1 / n1 - k2 / n2, float(lo), float(hi))
