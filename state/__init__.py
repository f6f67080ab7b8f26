"""vigil.state: the daemon's files in the state dir.

- ``state.store.RunnerStateStore``: ``runner_state.json`` (atomic writes, a person's edits merged
  while the daemon runs); ``state.models.RunnerState`` is its content.
- ``state.journal``: ``JsonlJournal`` (``logs/decisions.jsonl``), ``CsvJournal``
  (``logs/trades.csv``), append-only with torn-line repair.
- ``state.atomic``: crash-safe whole-file replacement for any small file (e.g. the learner model).
"""
