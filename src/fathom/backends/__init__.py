"""Backends: simulated archetypes now; real models behind the same protocol."""
