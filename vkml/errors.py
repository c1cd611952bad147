"""Exceptions that vkml raises on purpose, so callers can tell bad input from bugs."""


class ModelError(ValueError):
    """The model itself is malformed or uses something vkml cannot run.

    Raised at load time, never at the first run, and always names the node or value at fault.
    """


class UnsupportedOpsError(ModelError):
    """One or more op types have no implementation; lists every one with its node names."""

    def __init__(self, missing: dict[tuple[str, str, int], list[str]]):
        self.missing = missing
        lines = [
            f"  {(dom + '::') if dom not in ('', 'ai.onnx') else ''}{op} (opset {ver}): "
            + ", ".join(repr(n) for n in names[:8])
            + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            for (dom, op, ver), names in sorted(missing.items())
        ]
        super().__init__(
            f"the model uses {len(missing)} unsupported op type(s):\n" + "\n".join(lines)
        )
