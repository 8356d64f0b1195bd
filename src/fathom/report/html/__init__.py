"""The self-contained HTML pages: a run's report, a comparison and the gallery's building blocks."""
