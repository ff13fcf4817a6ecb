-- A typo gives a diagnostic with a "did you mean" at the exact range; fixing it as you
-- type removes that diagnostic. The document on disk holds `///focus_upp` (line 2).
local H = dofile(vim.env.DR_HARNESS)

local function unknown(buf)
  return vim.tbl_filter(function(d) return d.code == 'unknown-command' end, H.diagnostics(buf))
end

H.run(function()
  H.setup()
  local buf = H.open()
  H.wait(function() return #unknown(buf) > 0 end, 'the unknown-command diagnostic')
  H.record('typo', H.diagnostics(buf))
  -- Fix the typo as a user would, and wait (didChange is debounced 150 ms) for the pull.
  vim.api.nvim_buf_set_text(buf, 1, 11, 1, 12, {})
  H.record('fixed_line', vim.api.nvim_buf_get_lines(buf, 1, 2, false)[1])
  H.wait(function() return #unknown(buf) == 0 end, 'the diagnostic to go once the typo is fixed')
  H.record('after_fix', H.diagnostics(buf))
end)
