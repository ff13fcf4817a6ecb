-- :DeepResearchExecute runs the message at once (and saves the cleared buffer);
-- :DeepResearchPrompt opens the prompt the assistant sees next (window/showDocument).
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  H.setup()
  local buf = H.open()
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { '///add_criteria Explains the cache effects' })
  vim.cmd('DeepResearchExecute')
  H.record('lines_after_execute', vim.api.nvim_buf_get_lines(buf, 0, -1, false))
  H.record('modified_after_execute', vim.bo[buf].modified)
  H.wait(function() return #H.executions == 1 end, 'the deepResearch/didExecute notification')

  vim.cmd('DeepResearchPrompt')
  H.wait(function()
    return vim.api.nvim_buf_get_name(0):match('/%.deep%-research/prompt%.md$') ~= nil
  end, 'the prompt in the current window')
  H.record('prompt_buffer', vim.api.nvim_buf_get_name(0))
  H.record('prompt_lines', vim.api.nvim_buf_get_lines(0, 0, -1, false))
end)
