"""LLM judges of a run's answers: rubric prompts that an answer cannot escape, strict verdicts,
judges held apart from the model under test, and judgements.jsonl beside the run's records
(``runner.judge_run``; the numbers are ``fathom.analysis.agreement``'s)."""
