-- Deep Research message buffers (filetype `deep-research`): execute on write,
-- :DeepResearchPrompt, :DeepResearchExecute, :DeepResearchUndo, :DeepResearchReport, :DeepResearchExport and
-- :DeepResearchCompile.
-- See lua/deep_research/init.lua.
if vim.b.did_ftplugin_deep_research then
  return
end
vim.b.did_ftplugin_deep_research = true

local bufnr = vim.api.nvim_get_current_buf()
require('deep_research').attach_buffer(bufnr)

local undo = ("lua require('deep_research').detach_buffer(%d); vim.b[%d].did_ftplugin_deep_research = nil")
  :format(bufnr, bufnr)
vim.b.undo_ftplugin = (vim.b.undo_ftplugin and (vim.b.undo_ftplugin .. ' | ') or '') .. undo
