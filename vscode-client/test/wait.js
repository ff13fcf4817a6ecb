// Polling with a deadline, for the extension-host suite (CommonJS) and the Playwright
// drivers (ES modules): tests wait for a condition, never for a fixed time.
'use strict';

/** Resolves with `fn()`'s first truthy result; rejects after `timeoutMs`, naming `what`. */
async function waitFor(what, fn, timeoutMs = 15000, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last.message})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

module.exports = { waitFor };
