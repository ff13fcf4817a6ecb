-- :write executes the message through the code action, the server clears the buffer
-- (workspace/applyEdit), the runtime saves it empty; writing again executes nothing.
local H = dofile(vim.env.DR_HARNESS)

local MESSAGE = {
  'I will define the problem first.',
  '',
  '<<< define_problem',
  '///title',
  'Tiled matrix multiplication',
  '///content',
  'Find the best 16x16 tiled matmul in C for teaching.',
  '>>>',
  '///add_criteria Cites three sources',
}

H.run(function()
  H.setup()
  local dr = require('deep_research')
  local results = {}
  local on_write = dr.on_write
  dr.on_write = function(bufnr) -- record what each write did
    local result = on_write(bufnr)
    table.insert(results, result or vim.NIL)
    return result
  end

  local buf, client = H.open()
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, MESSAGE)
  vim.cmd('write')
  -- on_write waits for the execution, so by now the message is consumed and saved.
  H.record('first_write', results[1])
  H.record('lines_after_write', vim.api.nvim_buf_get_lines(buf, 0, -1, false))
  H.record('modified_after_write', vim.bo[buf].modified)
  H.record('current_buffer_is_message', vim.api.nvim_get_current_buf() == buf)
  local shown = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    table.insert(shown, vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win)))
  end
  H.record('windows', shown)
  H.wait(function() return #H.executions == 1 end, 'the deepResearch/didExecute notification')

  -- The same (now empty) buffer written again: nothing runs.
  vim.cmd('write')
  H.record('second_write', results[2])
  H.record('on_write_calls', #results)
  -- An explicit request after the write: anything the write set off is done by its answer.
  local tree = client:request_sync('workspace/executeCommand',
    { command = 'deepResearch.tree', arguments = { vim.uri_from_bufnr(buf) } }, H.WAIT, buf)
  H.record('tree', tree and tree.result)

  -- With a problem defined, `///` now completes the commands valid in focus.
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { '///' })
  H.record('labels_after', (H.complete(buf, client, 0, 3)))
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
  vim.bo[buf].modified = false
end)
