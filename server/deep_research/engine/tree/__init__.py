"""What is the problem tree, in markdown on disk? A problem as its files say it (`model`),
each file written and read back (`formats`), problems read on demand (`reader`) or the whole
tree a level at a time (`walk`), what a report rested on (`staleness`), `[[citations]]`, a
report's shape (`report`) and the effort spent (`accounting`).

Reads tolerantly and writes none of the tree: a draft's files are committed by the facade.
"""
