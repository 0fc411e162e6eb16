"""Pure, side-effect-free verification of agent-produced repository patches.

Nothing in this package touches SQLite, the network or the CLI, and nothing in it executes,
imports or applies candidate content. It turns bytes into typed values and verdicts.
"""

__version__ = "0.1.0"
