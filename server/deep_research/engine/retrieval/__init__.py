"""What in the sources answers a question? A text divided into parts (`parts`) and the
divisions kept on disk (`layout_store`), the full-text index (`index`) and the vectors' store
(`vectors`), both opened one way (`database`), and the ranking of passages (`ranking`).

Imports only the store. Everything here is derived data, rebuilt from the sources' text and
never trusted over it; no network (the vectors are brought by `sources/embeddings.py`).
"""
