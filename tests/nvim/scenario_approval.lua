-- approvalMode 'read' (set by the user with vim.lsp.config): writing a message with a
-- create command runs nothing and says why; :DeepResearchExecute approves and runs it.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  local messages = {}
  H.setup({ settings = { deepResearch = { approvalMode = 'read' } } })
  vim.lsp.handlers['window/showMessage'] = function(_, params)
    table.insert(messages, params.message)
  end
  local dr = require('deep_research')
  local buf = H.open()
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { '///add_criteria Needs approval first' })
  vim.cmd('write')
  H.wait(function() return #messages > 0 end, 'the server to say the message needs approval')
  H.record('messages', messages)
  H.record('lines_after_write', vim.api.nvim_buf_get_lines(buf, 0, -1, false))
  H.record('executions_after_write', #H.executions)
  H.record('result', dr.execute(buf))
  H.record('lines_after_execute', vim.api.nvim_buf_get_lines(buf, 0, -1, false))
  H.record('modified_after_execute', vim.bo[buf].modified)
end)
