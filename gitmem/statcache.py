"""The old home of :mod:`gitmem.git.statcache`, kept while callers move there."""

from gitmem.git.statcache import *  # noqa: F401,F403
