"""The run-time layer (docs: issue #16's layout): what happens while a session runs."""
