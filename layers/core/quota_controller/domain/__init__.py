"""The pure core: the quota document and its validation, the planner, impact analysis, status
and alert classification and rendering.

Nothing here imports boto3, botocore, Powertools or `os`, reads the environment or makes a
call; services pass it data and act on what it returns. The import contract in `make lint`
(pyproject.toml, `[tool.importlinter]`) keeps it so.
"""
