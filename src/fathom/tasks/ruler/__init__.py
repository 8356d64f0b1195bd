"""RULER's thirteen tasks (Hsieh et al., 2024), rebuilt on fathom's exact-length prompts."""
