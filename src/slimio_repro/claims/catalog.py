"""The claims file: loaded, checked against its schema and its own rules, typed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jsonschema
import yaml

from slimio_repro import paths

SCHEMA = paths.CLAIMS_SCHEMA
CLAIMS = paths.CLAIMS_FILE

SYSTEM_LABELS = {"baseline": "Baseline", "slimio": "SlimIO", "slimio-nofdp": "SlimIO w/o FDP",
                 "baseline-ext4": "Baseline (EXT4)", "nopersist": "No persistence (bound)"}
POLICY_LABELS = {"periodical": "Periodical-Log", "always": "Always-Log",
                 "none": "No persistence"}


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
        where = f"{self.workload}, {POLICY_LABELS[self.policy]}" if self.policy else self.workload
        return f"{SYSTEM_LABELS[self.system]} {self.metric} ({where})"


@dataclasses.dataclass(frozen=True)
class Measure:
    term: Term
    reference: Term | None = None


@dataclasses.dataclass(frozen=True)
class Tolerance:
    rule: str           # relative | absolute | direction
    reason: str
    value: float | None = None

    def label(self) -> str:
        if self.rule == "relative":
            return f"±{self.value * 100:g} %"
        if self.rule == "absolute":
            return f"±{self.value:g}"
        return "direction"


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
    if tol.rule in ("relative", "absolute") and tol.value is None:
        raise bad(f"tolerance rule {tol.rule!r} needs a value")
    if tol.rule == "direction" and tol.value is not None:
        raise bad("tolerance rule 'direction' takes no value (only the side counts)")
    if claim.kind == "absolute":
        if claim.measure.reference or claim.versus:
            raise bad("an absolute claim has no reference and no versus")
        if claim.direction != "equal" or tol.rule == "direction":
            raise bad("an absolute claim is judged by its tolerance: direction 'equal' and a "
                      "relative or absolute tolerance")
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
    if claim.direction == "equal" and tol.rule == "direction":
        raise bad("an 'equal' claim needs a relative or absolute band, not rule 'direction'")
    if claim.testbed == "model" and not any(m.startswith("ftl_") or "modelled" in m
                                            for m in claim.metrics()):
        raise bad("testbed 'model' judges a metric of the device model (waf_modelled*, ftl_*, "
                  "*_modelled_*)")


def load(path: Path = CLAIMS) -> list[Claim]:
    """The claims of `path`, validated (schema, unique ids, the rules of check())."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
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
