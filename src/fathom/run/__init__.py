"""Orchestration: plan the cells, build, ask the backend, score, append. The only stage that writes
records; the run folder (``store``) and its reader (``lines``) live here too."""
