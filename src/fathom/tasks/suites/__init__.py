"""Real long-document suites read from the user's copies of their official files: LongBench,
LongBench-E, LongBench v2 and InfiniteBench, each task with its suite's own prompt, answer budget and
metric, and the suites' middle truncation as a recorded step."""
