"""Analytic write amplification that the model is tested against (never only itself).

Uniform random single-page overwrites, greedy garbage collection: as the number of pages
per erase unit grows, greedy converges to first-in-first-out cleaning, whose WAF Desnoyers
derived in closed form (P. Desnoyers, "Analytic Modeling of SSD Write Performance",
SYSTOR 2012, the LRW/FIFO result; B. Van Houdt, "A Mean Field Model for a Class of Garbage
Collection Algorithms in Flash-based Solid State Drives", SIGMETRICS 2013, shows greedy's
limit): with alpha = physical / user capacity,

    WAF = alpha / (alpha + W0(-alpha * exp(-alpha)))

where W0 is the principal branch of Lambert's W. Its first-order form is the familiar
(1 + rho) / (2 rho) with rho = alpha - 1, the over-provisioning.
"""

from __future__ import annotations

import math

from scipy.special import lambertw


def greedy_uniform_waf(alpha: float) -> float:
    """Desnoyers' WAF of uniform random writes at physical/user capacity ``alpha`` > 1."""
    if not alpha > 1:
        raise ValueError(f"alpha={alpha!r} must exceed 1 (physical capacity / user capacity)")
    w = lambertw(-alpha * math.exp(-alpha), 0).real
    return alpha / (alpha + w)


def greedy_uniform_waf_first_order(alpha: float) -> float:
    """(1 + rho) / (2 rho), rho = alpha - 1: the approximation for small over-provisioning."""
    rho = alpha - 1
    return (1 + rho) / (2 * rho)
