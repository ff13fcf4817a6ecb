"""The crash-replay harness: file-system operations recorded in process, every disk a
power loss may leave rebuilt, the research checked in each (see replay.py)."""
