-- A markdown file of the research tree gets the server's check findings as diagnostics
-- (a hand-edited status); a markdown file outside any research gets no client at all.
local H = dofile(vim.env.DR_HARNESS)

--- Whether the runtime's root_dir (lsp/deep_research.lua) starts a client for the buffer,
--- and with which root.
local function decision(buf)
  local started, root = false, nil
  require('deep_research').root_dir(buf, function(dir) started, root = true, dir end)
  return { started = started, root = root }
end

H.run(function()
  H.setup()
  local buf = H.open() -- DR_FILE: the subproblem's Problem Definition.md, status edited by hand
  H.record('filetype', vim.bo[buf].filetype)
  H.wait(function() return #H.diagnostics(buf) > 0 end, 'the check finding on the tree file')
  H.record('found', H.diagnostics(buf))
  H.record('tree_decision', decision(buf))
  vim.cmd.edit(vim.fn.fnameescape(vim.env.DR_OTHER_MD))
  local other = vim.api.nvim_get_current_buf()
  H.record('other_filetype', vim.bo[other].filetype)
  H.record('other_decision', decision(other))
  vim.cmd.edit(vim.fn.fnameescape(vim.env.DR_PROMPT_MD)) -- the bookkeeping's prompt.md is not a tree file
  H.record('prompt_decision', decision(vim.api.nvim_get_current_buf()))
end)
