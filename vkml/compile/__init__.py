"""Compile stages: pure functions over a graph and one input signature (concretize, fold, fuse,
place, cut into units, lay out arenas); below the API, above the runtime (docs/architecture.md)."""
