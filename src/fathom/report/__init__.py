"""Numbers -> files and text: summary.json, the plots, report.html, comparisons and run listings."""
