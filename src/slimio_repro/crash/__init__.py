"""The crash campaign: SlimIO and stock Redis killed at random moments and at every named
failpoint, restarted twice, and checked against what their clients were told
(``slimio-repro crash-campaign``; rule ``crash_campaign``)."""

from .campaign import (EVERYSEC_CONTRACT_S, FAILPOINTS, CampaignPlan, make_plan, passed, render_md,
                       run, run_configured, run_iteration, summarize)
from .oracle import History, check_client, value

__all__ = ["EVERYSEC_CONTRACT_S", "FAILPOINTS", "History", "CampaignPlan", "check_client",
           "make_plan", "passed", "render_md", "run", "run_configured", "run_iteration",
           "summarize", "value"]
