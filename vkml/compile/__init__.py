"""Compile stages: pure functions over graphs and plans, no device handles (issue #16's layout;
the existing stages move here over time)."""
