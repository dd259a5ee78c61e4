"""Files that ship with the package: the locked harness tools, the workspace template, the skill."""
