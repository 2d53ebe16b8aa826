"""Files that gitmem renders into repositories and projects (not Python code)."""
