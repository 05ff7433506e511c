"""Writes to configuration tables (queues, schedules, retry policies) that the API owns.

Job state is never written here: enqueue, cancel, retry, replay, discard and pause/resume go
through `codity.core`. Every statement is scoped by `project_id`, like the reads.
"""
