#!/usr/bin/env python3
"""Reference computation of MST's per-variant statistics.

An implementation of docs/statistics.md written apart from the Go code, in
Python 3 with the standard library only, for report's TestStatsReference.
Each table is the cases of one variant: (graded, passed) per complete case.
Run it from the repository root to rewrite stats_reference.json:

    python3 report/testdata/stats_reference.py

The Go test reads the JSON; it never runs Python.
"""

import json
import math
import os
from fractions import Fraction

Z = 1.959964  # the two-sided 95% normal quantile MST uses


def design_effect(cases):
    """CR1 variance of the pass rate with cases as clusters, over the CR1
    variance with every trial as its own cluster, computed from the
    residuals in exact fractions, at least 1; None when it cannot be
    estimated (a single case, or no variation: p is 0 or 1)."""
    counted = [(n, c) for n, c in cases if n > 0]
    g = len(counted)
    total_n = sum(n for n, _ in counted)
    total_c = sum(c for _, c in counted)
    p = Fraction(total_c, total_n)
    if g < 2 or p == 0 or p == 1:
        return None
    # Cases as clusters: the residual of a case is the sum of its trials'
    # residuals, c - p*n.
    v_case = Fraction(g, g - 1) * sum((c - p * n) ** 2 for n, c in counted) / total_n ** 2
    # Every trial its own cluster: a passed trial's residual is 1 - p, a
    # failed one's -p.
    trial_residuals = []
    for n, c in counted:
        trial_residuals += [1 - p] * c + [-p] * (n - c)
    v_trial = Fraction(total_n, total_n - 1) * sum(r * r for r in trial_residuals) / total_n ** 2
    return max(Fraction(1), v_case / v_trial)


def t_inside(t, nu):
    """P(|T| <= t) for Student's t with nu (a whole number) degrees of
    freedom, by the finite sums of Abramowitz and Stegun 26.7.3 (nu odd)
    and 26.7.4 (nu even)."""
    theta = math.atan(t / math.sqrt(nu))
    s, c = math.sin(theta), math.cos(theta)
    if nu % 2 == 1:
        total, term = 0.0, c  # c, (2/3)c^3, (2*4)/(3*5)c^5, ...
        for j in range(1, (nu - 1) // 2 + 1):
            total += term
            term *= c * c * (2 * j) / (2 * j + 1)
        return 2 / math.pi * (theta + s * total)
    total, term = 0.0, 1.0  # 1, (1/2)c^2, (1*3)/(2*4)c^4, ...
    for j in range(1, nu // 2 + 1):
        total += term
        term *= c * c * (2 * j - 1) / (2 * j)
    return s * total


def t975(nu):
    """The 0.975 quantile of Student's t with nu degrees of freedom, by
    bisection of P(|T| <= t) = 0.95."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_inside(mid, nu) < 0.95:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def wilson_cc(p, n):
    """The Wilson score interval with continuity correction of a
    proportion p seen on n trials, in Newcombe's closed form (1998, method
    4); an end is 0 (or 1) when p is within 1/(2n) of it."""
    z2 = Z * Z
    low, high = 0.0, 1.0
    if p - 1 / (2 * n) > 0:
        low = (2 * n * p + z2 - 1 - Z * math.sqrt(z2 - 2 - 1 / n + 4 * p * (n * (1 - p) + 1))) / (2 * (n + z2))
    if p + 1 / (2 * n) < 1:
        high = (2 * n * p + z2 + 1 + Z * math.sqrt(z2 + 2 - 1 / n + 4 * p * (n * (1 - p) - 1))) / (2 * (n + z2))
    return max(0.0, low), min(1.0, high)


def pass_k(cases, k):
    """pass@k and pass^k averaged over the cases with at least k graded
    trials, from the binomial coefficients directly."""
    used = [(n, c) for n, c in cases if n >= k]
    if not used:
        return {"k": k, "cases": 0, "passAt": None, "passHat": None}
    at = sum(1 - Fraction(math.comb(n - c, k), math.comb(n, k)) for n, c in used)
    hat = sum(Fraction(math.comb(c, k), math.comb(n, k)) for n, c in used)
    return {"k": k, "cases": len(used), "passAt": float(at / len(used)), "passHat": float(hat / len(used))}


def expect(trials_per_case, cases):
    counted = [(n, c) for n, c in cases if n > 0]
    g = len(counted)
    total_n = sum(n for n, _ in counted)
    total_c = sum(c for _, c in counted)
    p = total_c / total_n
    deff = design_effect(counted)
    if deff is None:
        # Nothing measures how alike a case's trials are: each case
        # counts as one trial.
        rule, n_eff = "cases", float(g)
    else:
        # Korn and Graubard: the design effect is measured on g cases,
        # with g - 1 degrees of freedom, not total_n - 1.
        rule = "clustered"
        n_eff = total_n / float(deff) * (t975(total_n - 1) / t975(g - 1)) ** 2
    low, high = wilson_cc(p, n_eff)
    return {
        "passed": total_c,
        "graded": total_n,
        "cases": g,
        "passRate": p,
        "designEffect": None if deff is None else float(deff),
        "effectiveTrials": n_eff,
        "intervalRule": rule,
        "low": low,
        "high": high,
        "passK": [pass_k(counted, k) for k in range(1, trials_per_case + 1)],
    }


# Each case is (graded, passed); a case's other trials, up to the trials
# per case, are errored, so that every case is complete.
TABLES = [
    ("quickstart terse: whole cases pass or fail", 3, [(3, 3)] * 5 + [(3, 0)] * 9),
    ("quickstart clear", 3, [(3, 3)] * 13 + [(3, 0)]),
    ("all pass", 3, [(3, 3)] * 4),
    ("all fail", 2, [(2, 0)] * 4),
    ("one trial per case", 1, [(1, 1)] * 7 + [(1, 0)] * 3),
    ("one trial per case, one errored", 1, [(1, 1)] * 4 + [(0, 0)] + [(1, 0)] * 2),
    ("uneven graded counts", 3, [(3, 2), (1, 1), (2, 0), (3, 3), (2, 1), (3, 1)]),
    ("single case", 5, [(5, 3)]),
    ("single case, uneven", 4, [(2, 1)]),
    ("trials of a case disagree more than cases: effect below 1", 2, [(2, 1)] * 6),
    ("mixed", 4, [(4, 4), (4, 3), (4, 0), (4, 1), (3, 3), (4, 2), (4, 4), (2, 0)]),
    ("two cases", 2, [(2, 2), (2, 0)]),
    ("whole cases near 100%: 9 of 10 pass all 3", 3, [(3, 3)] * 9 + [(3, 0)]),
    ("all pass, one trial per case", 1, [(1, 1)] * 10),
    ("all pass, uneven graded counts", 5, [(5, 5), (3, 3), (4, 4), (1, 1)]),
    ("single case, all pass", 3, [(3, 3)]),
    ("many trials per case, independent-looking", 20, [(20, 14), (20, 15), (20, 13), (20, 16), (20, 14)]),
]


def main():
    out = []
    for name, k, cases in TABLES:
        out.append({"name": name, "trialsPerCase": k,
                    "cases": [{"graded": n, "passed": c} for n, c in cases],
                    "want": expect(k, cases)})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stats_reference.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
