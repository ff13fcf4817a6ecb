-- Two executions in a row, then look at the prompt Neovim shows. $DR_MODE says how
-- Neovim is set up: 'plain' (only vim.lsp.config, no runtime folder, the server executes
-- on save) or 'runtime' (the runtime folder, as the README says).
-- The server must never select a line past the end of the prompt buffer Neovim holds
-- (plain Neovim keeps the buffer it loaded first); the runtime folder re-reads it.
local H = dofile(vim.env.DR_HARNESS)
H.run(function()
  local errors = {}
  local notify = vim.notify
  vim.notify = function(msg, level, opts)
    if level == vim.log.levels.ERROR then
      table.insert(errors, msg)
    end
    return notify(msg, level, opts)
  end
  local settings_applied, logs = false, {}
  vim.lsp.handlers['window/logMessage'] = function(_, params)
    table.insert(logs, params.message)
    settings_applied = settings_applied or params.message:find('executeOnSave=True', 1, true) ~= nil
  end
  if vim.env.DR_MODE == 'plain' then
    vim.filetype.add({ extension = { dr = 'deep-research' } })
    vim.cmd('filetype on')
    vim.lsp.config('deep_research', {
      cmd = H.env.server_cmd and vim.json.decode(H.env.server_cmd) or { 'deep-research', 'serve' },
      filetypes = { 'deep-research' },
      root_markers = { '.deep-research' },
      settings = { deepResearch = { executeOnSave = true } },
    })
    vim.lsp.handlers['deepResearch/didExecute'] = function(_, params)
      table.insert(H.executions, params)
    end
    vim.lsp.enable('deep_research')
  else
    H.setup()
  end
  local buf = H.open()
  if vim.env.DR_MODE == 'plain' then -- the server executes on save once it has the settings
    H.wait(function() return settings_applied end, 'the server to apply executeOnSave')
  end
  -- The first message starts a new session (a short prompt); the second's reply lies
  -- below the end of that short prompt.
  local messages = {
    { '<<< add_subproblem', '///title', 'Cache sizes', '///content', 'Which tiles fit L1?', '>>>',
      '///focus_down Cache sizes' },
    { '///add_criteria Second criterion' },
  }
  local prompt = vim.fs.joinpath(vim.fs.dirname(H.env.file), '.deep-research', 'prompt.md')
  for round, message in ipairs(messages) do
    vim.api.nvim_set_current_buf(buf)
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, message)
    vim.cmd('silent write')
    H.wait(function() return #H.executions == round end, 'execution ' .. round)
    H.wait(function() return vim.fn.bufwinid(prompt) ~= -1 end, 'the prompt in a window after execution ' .. round)
  end
  local win = vim.fn.bufwinid(prompt)
  local prompt_buf = vim.api.nvim_win_get_buf(win)
  H.record('cursor_line', vim.api.nvim_win_get_cursor(win)[1])
  H.record('prompt_line_count', vim.api.nvim_buf_line_count(prompt_buf))
  H.record('prompt_text', table.concat(vim.api.nvim_buf_get_lines(prompt_buf, 0, -1, false), '\n'))
  H.record('errors', errors)
  H.record('server_log', logs)
  H.record('errmsg', vim.v.errmsg)
end)
