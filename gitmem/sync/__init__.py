"""A repository among others: remotes, clones, and what leaves the machine.

``exchange`` (``gitmem sync``: fetch, merge, push; the background sync), ``clone``,
``secrets`` (the check of what is about to be pushed), ``forget`` (a secret taken out
of unpushed commits), ``rescue`` (writes a person's reset or amend took off ``main``).

May import: the facade (``gitmem.repository``) and everything below it.
"""
