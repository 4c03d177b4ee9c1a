"""Reading a statement's EXPLAIN (ANALYZE, FORMAT JSON): how much of a table it read."""

from __future__ import annotations

import json
from typing import Any


def rows_read(explained: Any, relation: str) -> int:
    """Rows the plan's scans of ``relation`` returned, outside per-row subplans (a
    subplan's index probe is the rule asked of a row, not the scan that found it)."""
    plan = json.loads(explained) if isinstance(explained, str) else explained

    def walk(node: dict[str, Any], in_subplan: bool) -> int:
        own = 0
        if node.get("Relation Name") == relation and not in_subplan:
            own = int(node.get("Actual Rows", 0)) * int(node.get("Actual Loops", 1))
        return own + sum(
            walk(child, in_subplan or child.get("Parent Relationship") == "SubPlan")
            for child in node.get("Plans", [])
        )

    return walk(plan[0]["Plan"], False)
