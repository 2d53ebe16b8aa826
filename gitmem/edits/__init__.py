"""What people and other programs do to the files, taken in.

``handedits`` (an editor's save merged in as a commit), ``rewrites`` (what a person's
amend or reset took off ``main``), ``watch`` (file-system events that start a look),
``quick_reads`` (reads from the work tree while a stamp vouches that it holds HEAD).

May import: the layers below (``git``, ``records``, ``stores``, ``history``).
"""
