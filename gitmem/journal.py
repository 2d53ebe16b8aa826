"""The old home of :mod:`gitmem.git.journal`, kept while callers move there."""

from gitmem.git.journal import *  # noqa: F401,F403
