"""passhat: run every task of an agent eval n times and report how consistently it passes.

The package is layered (see docs/design.md); imports point down only:
stats -> api -> trials / report / metrics -> local | operator | runner -> cli.
"""

__version__ = "0.1.0"
