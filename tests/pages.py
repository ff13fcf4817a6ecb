"""Pages served on loopback by the tests that fetch evidence."""

# An article among navigation: what extraction keeps and what it drops.
CACHE_BLOCKING = """<html><head><title>Cache blocking</title></head><body><nav>Home | Log in</nav><article>
<h1>Cache blocking</h1><p>Blocking a loop nest keeps a working set in cache, so that each value fetched from memory
is used many times. It is the single most useful optimisation for dense linear algebra on every modern processor.</p>
</article></body></html>"""
