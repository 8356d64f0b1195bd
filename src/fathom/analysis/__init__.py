"""Records -> numbers: pure functions over records, no files written. Imports records and the task
catalogue, never ``fathom.run`` or ``fathom.report``."""
