"""The run-time layer: devices, vkml.Tensor, the CPU plan and its executor, GPU runs and their
slots, the scheduler (docs/architecture.md, "The layout")."""
