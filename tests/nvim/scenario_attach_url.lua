-- A page served on this machine, attached from Neovim: the user allows private networks
-- in the server's settings (deepResearch.fetch.allowPrivateNetworks), hovers the URL,
-- then :write executes ///attach_url, which fetches the page and attaches it.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  H.setup({ settings = { deepResearch = { approvalMode = 'update', fetch = { allowPrivateNetworks = true } } } })
  local buf, client = H.open()
  local line = '///attach_url ' .. assert(vim.env.DR_URL, 'DR_URL: the page to attach')
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'A local page to read.', line })
  local hover = client:request_sync('textDocument/hover', {
    textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = 1, character = 20 },
  }, H.WAIT, buf)
  H.record('hover', hover and hover.result and hover.result.contents.value)
  vim.cmd('write')
  H.wait(function() return #H.executions == 1 end, 'the deepResearch/didExecute notification')
  H.record('lines_after_write', vim.api.nvim_buf_get_lines(buf, 0, -1, false))
  H.record('modified_after_write', vim.bo[buf].modified)
end)
