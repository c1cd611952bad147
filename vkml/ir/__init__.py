"""ONNX to graph, no devices: the loader, the Graph, dtypes and type inference (docs/architecture.md,
"The layout")."""
