"""The claims file: loaded, checked against its schema and its own rules, typed."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jsonschema
import yaml

from .. import paths
from ..labels import POLICY_LABEL, SYSTEM_LABEL

SCHEMA = paths.CLAIMS_SCHEMA
CLAIMS = paths.CLAIMS_FILE



class ClaimsError(ValueError):
    """The claims file is not valid; the message names the claim and the field."""


@dataclasses.dataclass(frozen=True)
class Term:
    """One metric's mean over one set of cells (system x workload x policy on a testbed);
    policy None pools both policies."""
    metric: str
    system: str
    workload: str
    policy: str | None = None

    def label(self) -> str:
        where = f"{self.workload}, {POLICY_LABEL[self.policy]}" if self.policy else self.workload
        return f"{SYSTEM_LABEL[self.system]} {self.metric} ({where})"


@dataclasses.dataclass(frozen=True)
class Measure:
    term: Term
    reference: Term | None = None


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How far from the paper a measurement may be and still agree; ``Claim.band`` turns it
    into the interval of values that agree. The rules:

    * effect: a ratio's log (a difference itself) within ``value`` x the paper's effect of
      it (0.5: from half the paper's gain to half again as much), so a claimed +32 % fails
      at +2 % as surely as at -5 %;
    * margin: an 'equal' claim's equivalence margin around no difference: a ratio within
      [1 / (1 + value), 1 + value], a difference within +-value;
    * relative: within +-value x the paper's value; absolute: within +-value of it;
    * share: a percentage within +-value on the log-odds scale around the paper's (the same
      relative precision for a share and its complement);
    * direction: only the side of the neutral value counts (orderings).
    """
    rule: str           # effect | margin | relative | absolute | share | direction
    reason: str
    value: float | None = None

    def label(self) -> str:
        if self.rule == "direction":
            return "direction"
        v = self.value
        return {"effect": f"effect ±{v * 100:g} %", "margin": f"margin ±{v * 100:g} %",
                "relative": f"±{v * 100:g} %", "absolute": f"±{v:g}",
                "share": f"±{v:g} log-odds"}[self.rule]


@dataclasses.dataclass(frozen=True)
class Claim:
    id: str
    source: str
    where: str
    quote: str
    kind: str           # ratio | difference | absolute | ordering
    measure: Measure
    paper_value: float
    direction: str      # higher | lower | equal
    tolerance: Tolerance
    testbed: str        # vm | bare | model
    versus: Measure | None = None
    text_value: float | None = None
    requires: tuple[str, ...] = ()
    not_testable: str | None = None
    doubt: str | None = None
    note: str | None = None

    @property
    def neutral(self) -> float | None:
        """The value of 'no difference': 1 for ratios and orderings, 0 for differences."""
        return {"ratio": 1.0, "ordering": 1.0, "difference": 0.0}.get(self.kind)

    @property
    def cells_testbed(self) -> str:
        """The testbed whose cells the claim's value is computed from (the model replays the
        vm cells' traces)."""
        return "vm" if self.testbed == "model" else self.testbed

    @property
    def log_effect(self) -> bool:
        """Whether the claim's effect is its log (a ratio of positive means)."""
        return self.kind in ("ratio", "ordering") and self.paper_value > 0

    def band(self) -> tuple[float, float]:
        """The values that agree with the paper (either end may be infinite)."""
        tol, p, v = self.tolerance, self.paper_value, self.tolerance.value
        if tol.rule == "direction":
            return (self.neutral, math.inf) if self.direction == "higher" \
                else ((0.0 if self.log_effect else -math.inf), self.neutral)
        if tol.rule == "effect":
            if self.log_effect:
                e = math.log(p)
                return tuple(sorted((math.exp(e * (1 - v)), math.exp(e * (1 + v)))))
            return tuple(sorted((p - v * abs(p - self.neutral), p + v * abs(p - self.neutral))))
        if tol.rule == "margin":
            return (1 / (1 + v), 1 + v) if self.kind in ("ratio", "ordering") else (-v, v)
        if tol.rule == "relative":
            return (p - v * abs(p), p + v * abs(p))
        if tol.rule == "absolute":
            return (p - v, p + v)
        logit = math.log(p / (100 - p))
        return tuple(100 / (1 + math.exp(-(logit + s))) for s in (-v, v))

    def terms(self) -> list[Term]:
        """Every term the claim's value needs, in evaluation order."""
        out = []
        for m in (self.measure, self.versus):
            if m is not None:
                out += [m.term] + ([m.reference] if m.reference else [])
        return out

    def metrics(self) -> set[str]:
        return {t.metric for t in self.terms()}


def _term(d: dict) -> Term:
    return Term(d["metric"], d["system"], d["workload"], d.get("policy"))


def _measure(d: dict) -> Measure:
    term = _term(d["term"])
    ref = d.get("reference")
    return Measure(term, dataclasses.replace(term, **ref) if ref else None)


def _claim(d: dict) -> Claim:
    return Claim(
        id=d["id"], source=d["source"], where=d["where"], quote=d["quote"], kind=d["kind"],
        measure=_measure(d["measure"]), paper_value=float(d["paper_value"]),
        direction=d["direction"], tolerance=Tolerance(**d["tolerance"]),
        testbed=d["testbed"], versus=_measure(d["versus"]) if d.get("versus") else None,
        text_value=d.get("text_value"), requires=tuple(d.get("requires", ())),
        not_testable=d.get("not_testable"), doubt=d.get("doubt"), note=d.get("note"))


def check(claim: Claim) -> None:
    """The rules the schema cannot say: each names the claim and what to change."""
    def bad(msg: str) -> ClaimsError:
        return ClaimsError(f"claim {claim.id!r}: {msg}")

    tol = claim.tolerance
    if tol.rule != "direction" and tol.value is None:
        raise bad(f"tolerance rule {tol.rule!r} needs a value")
    if tol.rule == "direction" and tol.value is not None:
        raise bad("tolerance rule 'direction' takes no value (only the side counts)")
    if claim.kind == "absolute":
        if claim.measure.reference or claim.versus:
            raise bad("an absolute claim has no reference and no versus")
        if claim.direction != "equal" or tol.rule not in ("relative", "absolute", "share"):
            raise bad("an absolute claim is judged by a band around the paper's value: "
                      "direction 'equal' and tolerance rule relative, absolute or share")
    else:
        if claim.measure.reference is None:
            raise bad(f"a {claim.kind} claim needs measure.reference (what it compares with)")
        if claim.measure.reference == claim.measure.term:
            raise bad("measure.reference repeats the term: it must change a system, metric, "
                      "workload or policy")
    if claim.versus is not None and claim.kind != "ordering":
        raise bad("versus (a ratio of two measures) is for ordering claims")
    if claim.kind == "ordering" and tol.rule != "direction":
        raise bad("an ordering claim has tolerance rule 'direction' (only the side counts)")
    if claim.direction == "equal" and claim.kind != "absolute" and tol.rule != "margin":
        raise bad("an 'equal' claim is an equivalence: tolerance rule 'margin' (a margin "
                  "around no difference), not a band around the paper's value")
    if tol.rule == "margin" and claim.direction != "equal":
        raise bad("tolerance rule 'margin' is for 'equal' claims")
    if tol.rule == "effect" and not (0 < tol.value < 1):
        raise bad(f"tolerance rule 'effect' takes a fraction of the paper's effect in (0, 1), "
                  f"not {tol.value}")
    if tol.rule == "share" and not 0 < claim.paper_value < 100:
        raise bad(f"tolerance rule 'share' is for a percentage in (0, 100), not "
                  f"{claim.paper_value}")
    lo, hi = claim.band()
    if not lo <= claim.paper_value <= hi and tol.rule != "direction":
        raise bad(f"the paper's value {claim.paper_value} is outside the claim's own band "
                  f"[{lo:.4g}, {hi:.4g}]")
    if claim.direction in ("higher", "lower") and tol.rule != "direction":
        n = claim.neutral
        on_side = lo > n if claim.direction == "higher" else hi < n
        if not on_side:
            raise bad(f"the band [{lo:.4g}, {hi:.4g}] reaches the neutral value {n:g}: a "
                      f"'{claim.direction}' claim's band must lie on its side (narrow the "
                      "tolerance)")
    if claim.testbed == "model" and not any(m.startswith("ftl_") or "modelled" in m
                                            for m in claim.metrics()):
        raise bad("testbed 'model' judges a metric of the device model (waf_modelled*, ftl_*, "
                  "*_modelled_*)")


def load(path: Path = CLAIMS) -> list[Claim]:
    """The claims of `path`, validated (schema, unique ids, the rules of check())."""
    path = Path(path)
    try:
        # libyaml's parser (PyYAML's wheels carry it): 10x the pure-Python one on the
        # largest YAML that every Snakemake start reads.
        data = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    except (OSError, yaml.YAMLError) as e:
        raise ClaimsError(f"cannot read the claims file {path}: {e}") from e
    try:
        jsonschema.validate(data, yaml.safe_load(SCHEMA.read_text()))
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        cid = ""
        if len(e.absolute_path) >= 2 and e.absolute_path[0] == "claims":
            cid = f" (claim {data['claims'][e.absolute_path[1]].get('id')!r})"
        raise ClaimsError(f"{path}: {where}{cid}: {e.message}") from e
    claims = [_claim(d) for d in data["claims"]]
    seen = set()
    for c in claims:
        if c.id in seen:
            raise ClaimsError(f"{path}: claim id {c.id!r} appears twice; ids must be unique")
        seen.add(c.id)
        check(c)
    return claims
