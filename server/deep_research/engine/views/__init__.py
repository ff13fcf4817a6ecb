"""What are people and models shown? The prompt (`prompt`), the system's reply (`reply`),
editor assistance (`assist`), `deep-research check`'s findings (`check`) and its safe fixes
made (`repair`).

Computed from the tree and the analysis, never kept apart from them; nothing here writes but
`repair`, one transaction per pass.
"""
