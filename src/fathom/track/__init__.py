"""Results where training runs are watched: ``--log mlflow`` and ``--log wandb`` on ``fathom run``,
``compare`` and ``series`` (docs/tracking.md).

``trackers.py`` is the protocol a tracker implements and the ``--log`` value read; ``mlflow_tracker.py``
and ``wandb_tracker.py`` implement it, each importing its library only when named (the ``mlflow`` and
``wandb`` extras); ``logged.py`` says what each command logs, under which names. Logging only reads a
run folder: nothing is written into one.
"""
