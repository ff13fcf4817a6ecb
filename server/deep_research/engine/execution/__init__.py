"""What does each command do? The operation protocol (`protocol`), the working copy a message
changes (`draft`), and the operations: the problem tree's (`operations`), the outside world's
(`evidence`: attach_url, attach_file, search) and the sources' (`reading`: read, find).

An operation checks everything before it changes anything, changes only a `Draft`, and never
reaches the network: what it needs from outside is given to it as `Evidence`.
"""
