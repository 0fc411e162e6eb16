"""Developer tools, not installed: example and fixture generators, the schema writer, the demo,
the mutation run. Run as ``python -m tools.<name>`` from the repository root.
"""
