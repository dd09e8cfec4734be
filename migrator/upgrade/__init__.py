"""`vam upgrade`: verify-imports and verify-api against a release, migrate in dual-lane form,
the checks again, and the report of what is left for a person (run.py, report.py; lanes.py
leaves out the lines a release never runs; api.py bridges to verify-api when present)."""

from migrator.upgrade.report import GROUPS, Item, as_json, as_text, left
from migrator.upgrade.run import Check, Upgrade, UpgradePlan, dual_lane, upgrade

__all__ = ["GROUPS", "Check", "Item", "Upgrade", "UpgradePlan", "as_json", "as_text", "dual_lane",
           "left", "upgrade"]
