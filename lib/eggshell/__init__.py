"""Eggshell: a local memory layer for coding agents.

Turns are recorded as a graph of Work and Outcome values in append-only `.egg`
files; later requests get the relevant prior outcomes handed back as context.
"""

__version__ = "0.1.0"
