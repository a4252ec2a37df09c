"""Spark jobs over the sidecar's recorded flow history (SPEC §10).

The recorder (`sidecar.records.history`) writes JSON Lines; these jobs turn them into flow
episodes, hourly summaries, threshold recommendations and a report, on `local[*]` or
unchanged on a cluster.
"""
