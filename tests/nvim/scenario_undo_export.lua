-- :DeepResearchUndo takes the last message back into the (empty) buffer, unsaved;
-- :DeepResearchExport writes the dossier (not opened: vim.g.deep_research_open_dossier);
-- :DeepResearchCompile html writes the report (not opened), :DeepResearchCompile opens report.md.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  vim.g.deep_research_open_dossier = false
  H.setup()
  local buf = H.open()
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { '///add_criteria Taken back' })
  vim.cmd('DeepResearchExecute')
  H.wait(function() return #H.executions == 1 end, 'the execution')
  H.record('lines_after_execute', vim.api.nvim_buf_get_lines(buf, 0, -1, false))

  local result = require('deep_research').undo(buf)
  H.record('undo', result)
  H.record('lines_after_undo', vim.api.nvim_buf_get_lines(buf, 0, -1, false))
  H.record('modified_after_undo', vim.bo[buf].modified)
  H.wait(function() return #H.executions == 2 end, 'the notification after the undo')
  H.record('notification', H.executions[2])

  local exported, failure
  vim.api.nvim_set_current_buf(buf)
  require('deep_research').export(buf, function(r, err) exported, failure = r or false, err end)
  H.wait(function() return exported ~= nil end, 'the dossier')
  H.record('export', exported)
  H.record('export_error', failure)
  local compiled, compile_failure
  vim.g.deep_research_open_report = false
  vim.cmd('DeepResearchCompile html')
  local html = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ':h') .. '/report.html'
  H.wait(function() return vim.fn.filereadable(html) == 1 end, 'report.html')
  require('deep_research').compile(buf, 'rtf', function(r, err) compile_failure = err end)
  H.wait(function() return compile_failure ~= nil end, 'the refusal of an unknown format')
  H.record('compile_error', compile_failure)
  vim.g.deep_research_open_report = nil
  require('deep_research').compile(buf, '', function(r, err) compiled = r or false end)
  H.wait(function() return compiled ~= nil end, 'the report')
  H.record('compile', compiled)
  H.record('opened', vim.fn.fnamemodify(vim.api.nvim_buf_get_name(0), ':t'))
  H.record('commands', vim.tbl_keys(vim.api.nvim_buf_get_commands(buf, {})))
end)
