-- Parallel research: main's message delegated L1 and L2 (by the command line, before).
-- :DeepResearchResearchers lists them with vim.ui.select and opens L1's message document;
-- there everything works as in main's, as L1: diagnostics on L1's state, a write that
-- waits for approval (approvalMode 'read'), :DeepResearchExecute approving it, L1's prompt.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  local messages = {}
  H.setup({ settings = { deepResearch = { approvalMode = 'read' } } })
  vim.lsp.handlers['window/showMessage'] = function(_, params)
    table.insert(messages, params.message)
  end
  local dr = require('deep_research')
  local main_buf, client = H.open()

  local offered
  vim.ui.select = function(items, opts, on_choice)
    offered = {}
    for _, item in ipairs(items) do
      table.insert(offered, opts.format_item(item))
    end
    H.record('select_prompt', opts.prompt)
    on_choice(vim.iter(items):find(function(item) return item.name == 'L1' end))
  end
  local chosen
  vim.cmd('DeepResearchResearchers')
  H.wait(function() return chosen ~= nil or offered ~= nil end, 'the researchers to be offered')
  H.record('offered', offered)
  local buf = vim.api.nvim_get_current_buf()
  H.record('opened', vim.api.nvim_buf_get_name(buf))
  H.wait(function()
    local attached = vim.lsp.get_clients({ bufnr = buf, name = 'deep_research' })[1]
    return attached ~= nil and attached.id == client.id
  end, "the same client to attach to L1's document")
  H.record('same_client_other_buffer', buf ~= main_buf) -- the wait above checked the client

  -- Diagnostics run on L1's state: its focus is L1, which has no subproblems yet.
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { '///focus_down Data' })
  H.wait(function() return #vim.diagnostic.get(buf) > 0 end, "a diagnostic in L1's document")
  H.record('diagnostics', H.diagnostics(buf))

  -- A write above the approval mode runs nothing; :DeepResearchExecute approves it, as L1.
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { '///add_criteria Names the L1 size of two CPUs' })
  vim.cmd('write')
  H.wait(function() return #messages > 0 end, 'the server to say the message needs approval')
  H.record('messages', messages)
  H.record('executions_after_write', #H.executions)
  local result = dr.execute(buf)
  H.record('result', result)
  H.record('lines_after_execute', vim.api.nvim_buf_get_lines(buf, 0, -1, false))

  -- Its prompt is L1's own.
  vim.cmd('DeepResearchPrompt')
  H.wait(function()
    return vim.api.nvim_buf_get_name(0):match('/%.deep%-research/researchers/[^/]+/prompt%.md$') ~= nil
  end, "L1's prompt in the current window")
  H.record('prompt_lines', vim.api.nvim_buf_get_lines(0, 0, -1, false))
end)
