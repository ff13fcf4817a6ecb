"""What does a message mean, and may it run? Parsing (`parser`), the command table
(`commands`), a command bound to its row (`binding`), the budgets (`budgets`), the message rules
and the dry run (`analysis`), kept between edits (`incremental`), and approval (`approval`).

The parser never fails; the command table is the only list of commands; diagnostics and
execution share one analysis.
"""
