-- :DeepResearchRun drives a whole research: the model (a scripted server on loopback,
-- $DR_MODEL_URL) writes each message into the buffer, the server runs it as a save does,
-- until the research is finished. The statusline function and the notifications follow.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  H.setup({ settings = { deepResearch = {
    approvalMode = 'update', baseUrl = assert(vim.env.DR_MODEL_URL), model = 'scripted-model',
  } } })
  local said = {}
  local notify = vim.notify
  vim.notify = function(msg, level, opts)
    table.insert(said, msg)
    return notify(msg, level, opts)
  end
  local offered = {}
  vim.ui.select = function(items, opts, on_choice) -- the user takes the offer of the final report
    table.insert(offered, { prompt = opts.prompt, items = items })
    on_choice(items[1], 1)
  end
  local buf = H.open()
  local dr = require('deep_research')
  local uri = vim.uri_from_bufnr(buf)
  local lines_seen = {} -- what the buffer held while the model wrote
  vim.api.nvim_buf_attach(buf, false, {
    on_lines = function()
      local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
      if text ~= '' then
        table.insert(lines_seen, text)
      end
    end,
  })
  vim.cmd('DeepResearchRun')
  H.wait(function() return dr.autopilot[uri] ~= nil end, 'the autopilot to start')
  H.record('statusline_running', dr.statusline())
  H.wait(function()
    local state = dr.autopilot[uri] and dr.autopilot[uri].state
    return state == 'finished' or state == 'error' or state == 'stopped'
  end, 'the autopilot to end', 60000)
  H.record('final', dr.autopilot[uri])
  H.record('statusline_final', dr.statusline())
  H.record('lines_after', vim.api.nvim_buf_get_lines(buf, 0, -1, false))
  H.record('written', lines_seen)
  H.record('said', said)
  -- The autopilot offered the answer; taken, the root's report opened.
  local function shown(name)
    local current = vim.api.nvim_buf_get_name(0)
    return current:sub(-#name) == name and current or nil
  end
  H.wait(function() return shown('research/Report 3 Pager.md') end,
    'the final report to open', 30000)
  H.record('offered', offered)
  H.record('report_buffer', vim.api.nvim_buf_get_name(0))
  H.record('report_lines', vim.api.nvim_buf_get_lines(0, 0, -1, false))
  -- :DeepResearchReport with a problem's name (titles below the root).
  vim.api.nvim_set_current_buf(buf)
  vim.cmd('DeepResearchReport cache sizes')
  H.wait(function() return shown('/Cache sizes/Report 3 Pager.md') end, "the subproblem's report to open", 30000)
  H.record('child_report_lines', vim.api.nvim_buf_get_lines(0, 0, -1, false))
end)
