"""Tasks: what a cell is and how it becomes a prompt."""
