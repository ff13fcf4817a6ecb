-- A .dr file outside any research: the client still starts (single-file mode, no root),
-- the server says why nothing can run here and offers to make the folder a research.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  H.setup()
  local buf, client = H.open()
  H.record('root_dir', client.root_dir or vim.NIL)
  H.wait(function() return #vim.diagnostic.get(buf) > 0 end, 'the not-a-research diagnostic')
  H.record('diagnostics', H.diagnostics(buf))
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 0 } },
    context = { diagnostics = {} },
  }
  local response = client:request_sync('textDocument/codeAction', params, H.WAIT, buf)
  local titles = {}
  for _, action in ipairs(response and response.result or {}) do
    table.insert(titles, action.title)
  end
  H.record('actions', titles)
  -- Writing does not execute anything here (and does not fail).
  vim.cmd('write')
  H.record('lines_after_write', vim.api.nvim_buf_get_lines(buf, 0, -1, false))
end)
