"""The files the report stage writes, by name: a run folder's derived files (re-made from its
manifest and records at any time) and a comparison's."""

SUMMARY = "summary.json"
REPORT = "report.html"
HEATMAP = "heatmap.png"
GRID = "grid.png"
DEPTH = "depth.png"
TRAP = "trap.png"
PERPLEXITY = "perplexity.png"

COMPARISON_JSON = "compare.json"
COMPARISON_PNG = "compare.png"
COMPARISON_HTML = "compare.html"
