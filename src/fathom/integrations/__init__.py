"""fathom inside the tools evaluators already run: inspect_ai's tasks and log import, and
lm-evaluation-harness task folders. Each module imports its tool lazily (an optional extra)."""
