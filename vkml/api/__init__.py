"""What users touch: InferenceSession, onnxruntime's options and I/O binding, feed checks, the
onnx.backend and the CLI (the top layer; docs/architecture.md, "The layout")."""
