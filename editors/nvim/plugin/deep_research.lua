-- Commands that work before any message is open: :DeepResearchNew [dir] starts a research
-- (asking with vim.ui.input / vim.ui.select), :DeepResearchContinue gives the research of
-- the current buffer or directory a new instruction. See lua/deep_research/init.lua.
if vim.g.loaded_deep_research then
  return
end
vim.g.loaded_deep_research = true

vim.api.nvim_create_user_command('DeepResearchNew', function(args)
  require('deep_research').new_research(args.args)
end, { nargs = '?', complete = 'dir', desc = 'Deep Research: start a research (folder, instruction, context, attachments)' })

vim.api.nvim_create_user_command('DeepResearchContinue', function()
  require('deep_research').continue_research()
end, { desc = 'Deep Research: a new instruction for this research (a finished one reopens)' })
