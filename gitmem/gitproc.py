"""The old home of :mod:`gitmem.git.gitproc`, kept while callers move there."""

from gitmem.git.gitproc import *  # noqa: F401,F403
